// The read-only console: a hash router over the broker's JSON API (/api/*).
// Data is put in the page with textContent only (never as HTML).
"use strict";
const REFRESH_MS = 2000;
let timer = null, generation = 0;

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    if (k === "class") e.className = attrs[k];
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
    else e.setAttribute(k, attrs[k]);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(id, columns, rows) {
  // columns: [[key, title, numeric?]]; rows: [{key: value or Node}]
  return h("table", {id},
    h("thead", {}, h("tr", {}, columns.map(([, title]) => h("th", {}, title)))),
    h("tbody", {}, rows.map(r => h("tr", {}, columns.map(([key, , num]) =>
      h("td", {"data-col": key, class: num ? "num" : ""}, r[key] === null || r[key] === undefined ? "–" : r[key]))))));
}

function size(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}

async function api(path) {
  const resp = await fetch(path, {headers: {Accept: "application/json"}});
  if (resp.status === 401) { location.assign("/login"); throw {code: "LOGIN_REQUIRED", message: "log in first"}; }
  const body = await resp.json();
  if (!resp.ok) throw body;
  return body;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat(Infinity).filter(n => n !== null && n !== undefined));
}

function failure(err) {
  return h("p", {class: "error", id: "error"}, `${err.code || "ERROR"}: ${err.message || err}`);
}

function link(hash, text) { return h("a", {href: hash}, text); }

function card(label, value, id) {
  return h("div", {class: "card", id}, h("div", {class: "label"}, label), h("div", {class: "value"}, value));
}

function age(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7200000) return `${Math.round(ms / 60000)} min`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

function openTxns(list) {
  return list.map(t => `${t.producer_id}/${t.producer_epoch} @${t.first_offset} (${age(t.age_ms)})`).join(", ");
}

function legend(series) {
  return h("div", {class: "legend"}, series.map((s, i) => {
    const swatch = h("i");
    swatch.style.background = CHART_COLORS[i % CHART_COLORS.length];
    return h("span", {}, swatch, s.name);
  }));
}

// -- pages --------------------------------------------------------------------------------
const pages = {
  async overview() {
    const o = await api("/api/overview");
    return [h("h1", {}, "Overview"),
      h("div", {class: "cards"},
        card("mode", o.mode + (o.cluster ? ` (${o.cluster})` : ""), "mode"),
        card("this broker", `${o.broker_id} @ ${o.address}`, "self"),
        card("controller", o.controller, "controller"),
        card("topics", o.topics, "topic-count"), card("partitions", o.partitions, "partition-count"),
        card("under-replicated", o.under_replicated, "under-replicated"),
        card("offline", o.offline, "offline"), card("connections", o.connections, "connections"),
        card("groups", o.groups, "group-count")),
      h("h2", {}, "Brokers"),
      table("brokers", [["id", "id", true], ["address", "address"], ["role", "role"]],
        o.brokers.map(b => ({id: b.id, address: b.address,
          role: [b.controller ? "controller" : "", b.self ? "this broker" : ""].filter(Boolean).join(", ")})))];
  },

  async topics() {
    const t = await api("/api/topics");
    return [h("h1", {}, "Topics"),
      table("topics", [["name", "topic"], ["partitions", "partitions", true], ["records", "records", true],
                       ["size", "size", true], ["open_transactions", "open transactions", true]],
        t.topics.map(x => ({...x, name: link(`#/topic/${encodeURIComponent(x.name)}`, x.name), size: size(x.size)})))];
  },

  async topic(name) {
    const t = await api(`/api/topic?name=${encodeURIComponent(name)}`);
    const rows = t.partitions.map(p => ({...p, replicas: p.replicas.join(", "), isr: p.isr.join(", "),
      size: size(p.size), open_transactions: openTxns(p.open_transactions), browse: p.local ? link(`#/messages?topic=${encodeURIComponent(name)}&partition=${p.partition}`, "messages") : null}));
    return [h("h1", {}, `Topic ${t.name}`),
      table("partitions", [["partition", "partition", true], ["leader", "leader", true], ["replicas", "replicas"],
                           ["isr", "ISR"], ["log_start", "log start", true], ["hw", "high watermark", true],
                           ["log_end", "log end", true], ["lso", "last stable", true],
                           ["lso_lag", "HW - LSO", true], ["size", "size", true],
                           ["open_transactions", "open transactions"],
                           ["browse", ""]], rows)];
  },

  async groups() {
    const g = await api("/api/groups");
    return [h("h1", {}, "Consumer groups"),
      g.groups.length ? table("groups", [["name", "group"], ["state", "state"], ["members", "members", true],
                                          ["partitions", "partitions", true], ["lag", "lag", true]],
        g.groups.map(x => ({...x, name: link(`#/group/${encodeURIComponent(x.name)}`, x.name)})))
        : h("p", {class: "muted"}, "No groups.")];
  },

  async transactions() {
    const t = await api("/api/transactions");
    const c = t.counts;
    return [h("h1", {}, "Transactions"),
      h("div", {class: "cards"}, card("coordinated ids", t.total, "txn-total"),
        card("open", t.open_count, "txn-open"),
        card("committed", c.committed === undefined ? "–" : c.committed, "txn-committed"),
        card("aborted", c.aborted === undefined ? "–" : c.aborted, "txn-aborted"),
        card("timed out", c.timed_out === undefined ? "–" : c.timed_out, "txn-timed-out")),
      h("h2", {}, "Transactional ids this broker coordinates"),
      t.coordinated.length ? table("txn-ids", [["transactional_id", "transactional id"], ["state", "state"],
          ["producer_id", "producer id", true], ["producer_epoch", "epoch", true], ["partitions", "partitions"],
          ["age", "open for", true], ["timeout", "timeout", true]],
        t.coordinated.map(x => ({...x, partitions: x.partitions.join(", ") +
          (x.hidden_partitions ? ` (+${x.hidden_partitions} hidden)` : ""), age: age(x.age_ms), timeout: age(x.timeout_ms)})))
        : h("p", {class: "muted"}, "No transactional ids."),
      t.total > t.coordinated.length ? h("p", {class: "muted"}, `${t.coordinated.length} of ${t.total} shown (open first, oldest first).`) : null,
      h("h2", {}, "Open transactions on this broker's partitions"),
      t.partition_open.length ? table("txn-open-parts", [["topic", "topic"], ["partition", "partition", true],
          ["producer_id", "producer id", true], ["producer_epoch", "epoch", true], ["first_offset", "first offset", true],
          ["age", "age", true], ["lso", "last stable", true], ["hw", "high watermark", true], ["lso_lag", "HW - LSO", true]],
        t.partition_open.map(x => ({...x, age: age(x.age_ms)})))
        : h("p", {class: "muted"}, "No open transactions.")];
  },

  async group(name) {
    const g = await api(`/api/group?name=${encodeURIComponent(name)}`);
    const series = [{name: "total lag (records)", points: g.lag_history}];
    return [h("h1", {}, `Group ${g.name}`),
      h("div", {class: "cards"}, card("state", g.state, "state"), card("protocol", g.protocol || "–"),
        card("generation", g.generation), card("members", g.members.length),
        card("lag", g.lag, "total-lag")),
      h("h2", {}, "Members"),
      g.members.length ? table("members", [["member_id", "member"], ["client_id", "client"], ["host", "host"],
                                           ["assignment", "assignment"]],
        g.members.map(m => ({...m, assignment: m.assignment.join(", ")})))
        : h("p", {class: "muted"}, "No members."),
      h("h2", {}, "Committed offsets"),
      table("offsets", [["topic", "topic"], ["partition", "partition", true], ["committed", "committed", true],
                        ["hw", "high watermark", true], ["lag", "lag", true]], g.offsets),
      h("h2", {}, "Lag over time"), legend(series), lineChart(series, {})];
  },

  async throughput() {
    const t = await api("/api/throughput");
    const metric = (i, title, unit) => {
      const series = t.topics.map(name => ({name, points: t.series[name].map(p => [p[0], p[i]])}));
      return [h("h2", {}, title), legend(series), lineChart(series, {unit})];
    };
    return [h("h1", {}, "Throughput"),
      h("p", {class: "muted", id: "sampled"}, `per topic, sampled every ${t.sample_s} s by the broker; ` +
        `${t.topics.length} topic(s) with traffic`),
      metric(1, "Bytes in per second", "B/s"), metric(2, "Records in per second", "/s"),
      metric(3, "Bytes out per second (fetches)", "B/s")];
  },

  async messages(_, params) {
    const form = h("form", {class: "query", id: "query"},
      field("topic", params.get("topic") || ""), field("partition", params.get("partition") || "0"),
      field("offset", params.get("offset") || "", "from offset"),
      field("time", params.get("time") || "", "or from time (ISO / epoch ms)"),
      field("limit", params.get("limit") || "20", "records (≤ 50)"),
      h("label", {}, "show as", h("select", {name: "format", id: "format"},
        ["text", "json", "hex"].map(f => { const o = h("option", {value: f}, f);
          if ((params.get("format") || "text") === f) o.selected = true; return o; }))),
      h("button", {type: "submit", id: "go"}, "Show"));
    form.addEventListener("submit", e => { e.preventDefault(); go(form, {}); });
    form.querySelector("#format").addEventListener("change", () => go(form, {}));
    const out = [h("h1", {}, "Messages"), form];
    if (!params.get("topic")) return [...out, h("p", {class: "muted"}, "Pick a topic and partition.")];
    let page;
    try { page = await api(`/api/messages?${params}`); }
    catch (err) { return [...out, failure(err)]; }
    const rows = page.records.map(r => r.skipped ? {offset: r.offset, time: "", key: "", value: h("span", {class: "null"}, r.skipped), headers: ""}
      : {offset: r.offset, time: r.time, key: value(r.key), value: value(r.value, true),
         headers: r.headers.length ? h("div", {}, r.headers.map(([k, v]) => h("div", {}, h("b", {}, k + ": "), value(v)))) : ""});
    const next = h("button", {type: "button", id: "next", onclick: () => go(form, {offset: page.next_offset, time: ""})}, "Next page");
    return [...out,
      h("p", {class: "muted", id: "page-info"}, `partition ${page.partition}: log start ${page.log_start}, ` +
        `high watermark ${page.hw}; ${page.records.length} record(s) from ${page.from}, next ${page.next_offset}`),
      page.stopped ? h("p", {class: "muted", id: "page-stopped"}, page.stopped) : null,
      table("records", [["offset", "offset", true], ["time", "time"], ["key", "key"], ["value", "value"], ["headers", "headers"]], rows),
      page.next_offset < page.hw ? next : null];
  },
};

function field(name, value, label) {
  return h("label", {}, label || name, h("input", {name, id: name, value, size: name === "time" ? 24 : 10}));
}

function value(v, noted) {
  if (v.text === null) return h("span", {class: "null"}, "null");
  return h("div", {}, noted && v.note ? h("span", {class: "muted"}, `(${v.note}) `) : null, h("pre", {}, v.text));
}

function go(form, override) {
  const p = new URLSearchParams();
  for (const el of form.elements) if (el.name) p.set(el.name, el.name in override ? override[el.name] : el.value);
  for (const [k, v] of [...p]) if (v === "") p.delete(k);
  location.hash = `#/messages?${p}`;
}

// -- routing ------------------------------------------------------------------------------
async function route() {
  clearTimeout(timer);
  const mine = ++generation;
  const [path, query] = (location.hash.slice(1) || "/overview").split("?");
  const [, page, arg] = path.split("/");
  const name = pages[page] ? page : "overview";
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active",
    a.dataset.page === name || a.dataset.page === name + "s"));
  const render = async () => {
    let nodes;
    try { nodes = await pages[name](arg === undefined ? undefined : decodeURIComponent(arg), new URLSearchParams(query || "")); }
    catch (err) { nodes = [h("h1", {}, name), failure(err)]; }
    if (mine !== generation) return;
    show(...nodes);
    document.body.dataset.loaded = name;
    if (name === "throughput" || name === "group" || name === "transactions") timer = setTimeout(render, REFRESH_MS);
  };
  await render();
}

async function whoami() {
  // with a login: who is logged in, and the logout button
  const s = await api("/api/session");
  if (!s.auth) return;
  document.getElementById("principal").textContent = s.principal;
  document.getElementById("logout").hidden = false;
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => { whoami().catch(() => {}); route(); });
