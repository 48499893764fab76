"""python -m bench.peers [--quick] [--no-install] [--systems a,b] [--json PATH] [--keep]

Installs what it needs (apt-get: redis-server nats-server; pip: redis[hiredis]
nats-py), starts each system on 127.0.0.1 in its own temp dir under
build/ (never ./data), runs the same workloads on each, stops everything by
PID and prints markdown tables.

Workloads (``--quick``: 1 % of the counts):
  W1  200,000 records x 1 KiB value, 16-byte keys (1,024 distinct)
  W2  1,000,000 records x 100 B value, same keys
  each: one producer (timed until every record is acknowledged), then one
  consumer reading from the start (timed until it has all records);
  RT  10,000 awaited single-record sends (100 B), p50/p99.

Every client run is a fresh subprocess (``--client SPEC``) bounded by a count
and a deadline; every server is stopped by its PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.broker_server import BrokerServer, Worker  # noqa: E402
from bench.peers.clients import KEY_BYTES, KEYS, client_main, run_client  # noqa: E402
from bench.peers.servers import RabbitServer, Server, start_nats, start_redis  # noqa: E402

FULL = {"W1": (200_000, 1024), "W2": (1_000_000, 100), "RT": 10_000}
DURABILITY = {
    "logbroker": "fsync before ack (default --flush fsync)",
    "logbroker-lazy": "no fsync per ack (--flush lazy)",
    "redis-always": "AOF appendfsync always (fsync before reply, group commit)",
    "redis-everysec": "AOF appendfsync everysec (no fsync per ack)",
    "nats": "JetStream file store default (no fsync per ack)",
    "rabbitmq": "RabbitMQ Streams default (no fsync per ack)",
}
APT = ["redis-server", "nats-server", "rabbitmq-server"]
PIP = ["redis[hiredis]", "nats-py", "rstream"]



def logbroker_rows(name: str, flush: str, work: str, sizes: dict, deadline: float) -> dict:
    res: dict = {}
    with BrokerServer(os.path.join(work, name), flush) as broker:
        for wl in ("W1", "W2"):
            n, vb = sizes[wl]
            base = {"bootstrap": broker.bootstrap, "topic": f"peers-{wl.lower()}", "records": n,
                    "value_bytes": vb, "key_bytes": KEY_BYTES, "distinct_keys": KEYS, "acks": "all",
                    "linger_ms": 5, "batch_size": 1 << 20, "deadline_s": deadline, "partitions": 1}
            for mode in ("produce", "consume"):
                try:
                    w = Worker({**base, "mode": mode}, os.path.join(work, f"{name}-{wl}-{mode}.log"))
                    w.wait_ready(60)
                    w.go()
                    res[(wl, mode)] = w.result(deadline + 30)
                    w.stop()
                except Exception as exc:  # noqa: BLE001
                    res[(wl, mode)] = {"error": str(exc)[:300]}
        try:
            w = Worker({"bootstrap": broker.bootstrap, "topic": "peers-rt", "mode": "roundtrip",
                        "value_bytes": 100, "key_bytes": KEY_BYTES, "acks": "all", "sends": sizes["RT"],
                        "warmup": 100, "deadline_s": deadline}, os.path.join(work, f"{name}-rt.log"))
            w.wait_ready(60)
            w.go()
            res[("RT", "roundtrip")] = w.result(deadline + 30)
            w.stop()
        except Exception as exc:  # noqa: BLE001
            res[("RT", "roundtrip")] = {"error": str(exc)[:300]}
    return res


def peer_rows(system: str, server: Server, sizes: dict, deadline: float) -> dict:
    res: dict = {}
    for wl in ("W1", "W2"):
        n, vb = sizes[wl]
        base = {"system": system, "port": server.port, "stream": f"peers{wl.lower()}", "records": n,
                "value_bytes": vb, "deadline_s": deadline}
        for mode in ("produce", "consume"):
            res[(wl, mode)] = run_client({**base, "mode": mode}, deadline + 30)
    res[("RT", "roundtrip")] = run_client({"system": system, "port": server.port, "stream": "peersrt",
                                           "mode": "roundtrip", "sends": sizes["RT"],
                                           "deadline_s": deadline}, deadline + 30)
    return res


def install(err) -> None:
    missing = [p for p, b in (("redis-server", "redis-server"), ("nats-server", "nats-server"),
                              ("rabbitmq-server", "/usr/lib/rabbitmq/bin/rabbitmq-server")) if shutil.which(b) is None]
    if missing:
        print(f"apt-get install {' '.join(missing)}", file=err)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                       check=True, env=env, timeout=1200)
    try:
        import hiredis  # noqa: F401
        import nats  # noqa: F401
        import redis  # noqa: F401
        import rstream  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *PIP], check=True, timeout=600)


def versions() -> dict:
    def out(args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "?"
    from importlib.metadata import version
    v = {"redis-server": out(["redis-server", "--version"]), "nats-server": out(["nats-server", "--version"])}
    v["rabbitmq-server"] = out(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"])
    for pkg in ("logbroker", "redis", "hiredis", "nats-py", "rstream"):
        try:
            v[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            v[pkg] = "?"
    v["python"] = platform.python_version()
    return v


def table(results: dict, sizes: dict) -> str:
    lines = [("| system | durability | W1 produce rec/s | W1 consume rec/s | W2 produce rec/s "
              "| W2 consume rec/s | RT p50 ms | RT p99 ms |"), "|---|---|--:|--:|--:|--:|--:|--:|"]
    for name, res in results.items():
        cells = []
        for wl in ("W1", "W2"):
            for mode in ("produce", "consume"):
                r = res.get((wl, mode), {})
                if "error" in r or not r:
                    cells.append("error")
                elif r["records"] != sizes[wl][0]:
                    cells.append(f"short: {r['records']}")
                else:
                    cells.append(f"{r['records'] / r['seconds']:,.0f}")
        rt = res.get(("RT", "roundtrip"), {})
        cells += ["error", "error"] if "error" in rt or not rt else [f"{rt['p50_ms']:.3f}", f"{rt['p99_ms']:.3f}"]
        lines.append(f"| {name} | {DURABILITY[name]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers")
    ap.add_argument("--quick", action="store_true", help="1 %% of the work (< 60 s)")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--systems", default=",".join(DURABILITY))
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        return client_main(json.loads(args.client))
    err = sys.stderr
    if not args.no_install:
        install(err)
    f = 0.01 if args.quick else 1.0
    sizes = {"W1": (int(FULL["W1"][0] * f), 1024), "W2": (int(FULL["W2"][0] * f), 100),
             "RT": int(FULL["RT"] * f)}
    deadline = 20.0 if args.quick else 300.0
    (ROOT / "build").mkdir(exist_ok=True)
    work = tempfile.mkdtemp(prefix="peers-", dir=str(ROOT / "build"))
    results: dict = {}
    t0 = time.time()
    try:
        for name in args.systems.split(","):
            print(f"-- {name}", file=err, flush=True)
            d = os.path.join(work, name)
            if name == "logbroker":
                results[name] = logbroker_rows(name, "fsync", work, sizes, deadline)
            elif name == "logbroker-lazy":
                results[name] = logbroker_rows(name, "lazy", work, sizes, deadline)
            elif name.startswith("redis-"):
                srv = start_redis(d, name.split("-", 1)[1])
                try:
                    results[name] = peer_rows("redis", srv, sizes, deadline)
                finally:
                    srv.stop()
            elif name in ("nats", "rabbitmq"):
                srv = start_nats(d) if name == "nats" else RabbitServer(d)
                try:
                    results[name] = peer_rows(name, srv, sizes, deadline)
                finally:
                    srv.stop()
            else:
                raise SystemExit(f"unknown system {name}")
            for k, v in results[name].items():
                if "error" in v:
                    print(f"   {name} {k}: {v['error']}", file=err)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    wall = time.time() - t0
    print(f"# peers {'--quick ' if args.quick else ''}{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{wall:.0f} s; W1 {sizes['W1'][0]:,} x {sizes['W1'][1]} B, W2 {sizes['W2'][0]:,} x "
          f"{sizes['W2'][1]} B, RT {sizes['RT']:,} sends of 100 B\n")
    print(table(results, sizes))
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in versions().items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"sizes": sizes, "results": {n: {f"{a}/{b}": v for (a, b), v in r.items()}
                                                   for n, r in results.items()}, "versions": versions()},
                      fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
