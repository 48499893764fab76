// A small SVG line chart (no library): lineChart(series, options) -> <svg>.
// series: [{name, points: [[t_ms, value], ...]}]; options: {width, height, unit}.
"use strict";
const CHART_COLORS = ["#2456c9", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285", "#5c940d", "#e67700"];

function lineChart(series, options) {
  const W = options.width || 720, H = options.height || 220, L = 64, R = 12, T = 10, B = 24;
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const pts = series.flatMap(s => s.points);
  if (!pts.length) {
    el("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, "no samples yet");
    return svg;
  }
  let t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]));
  if (t1 === t0) { t0 -= 1000; t1 += 1000; }
  const top = Math.max(1, ...pts.map(p => p[1])) * 1.1;
  const x = t => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = v => H - B - v / top * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eceff4"});
    el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, formatNumber(v) + (options.unit || ""));
  }
  const clock = t => new Date(t).toLocaleTimeString([], {hour12: false});
  el("text", {x: L, y: H - 6}, clock(t0));
  el("text", {x: W - R, y: H - 6, "text-anchor": "end"}, clock(t1));
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    const color = CHART_COLORS[i % CHART_COLORS.length], last = s.points[s.points.length - 1];
    el("path", {d, fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name});
    el("circle", {cx: x(last[0]), cy: y(last[1]), r: 3, fill: color});
  });
  return svg;
}

function formatNumber(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return a >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1);
}
