"""Spark streaming and reads over the protocol (issue 13): one broker, one
local[2] SparkSession, one run.

    python -m bench.spark.stream            # ~2 minutes here
    python -m bench.spark.stream --quick    # smoke test
    python -m bench.spark.stream --json     # JSON on stdout, tables on stderr

- Data: a fresh ``logbroker serve`` (fsync, checkpoints every 100 ms so a
  data-dir reader sees its high watermark promptly) on 127.0.0.1; the sync
  Producer writes ``--records`` records (16-byte keys among 1,024, 200-byte
  values) to topic ``bench`` with 2 partitions, then the bench waits until
  the checkpoint covers all of them.
- ``scan``: ``sum(length(key)) + sum(length(value))`` over a fresh
  ``load()`` in ``path`` mode (the broker's data dir) and in ``bootstrap``
  mode (Fetch from the leader), ``--repeats`` timed runs each after one
  warm-up, alternating the modes. Target: bootstrap >= 0.7x path.
- ``stream``: the same records through ``readStream`` (startingOffsets
  earliest, Trigger.AvailableNow, micro-batches of a quarter and of half
  the records by maxOffsetsPerTrigger) into Spark's ``noop`` sink, in both
  modes: wall time from ``start()`` to the end, and sustained time (the
  summed ``triggerExecution`` of the micro-batches, without the query's
  start-up), against the batch scan of the same mode. Target: >= 0.5x.
- ``latency``: a query (bootstrap mode, a fresh topic from its start, 1 s
  processing-time trigger, ``foreachBatch`` in this process) while a
  producer thread sends one record every 5 ms for ``--latency-seconds``;
  each record's end-to-end delay is the time its micro-batch reached
  ``foreachBatch`` minus its timestamp (set by the Producer at send()).
  Target: p50 <= 2 s.
"""

from __future__ import annotations

import os
import threading
import time

from bench import ROOT
from bench.broker.server import BrokerServer
from bench.common import harness
from bench.common.environment import environment
from bench.common.harness import fmt_s, table, targets_table
from bench.common.stats import summary
from bench.spark.session import local_session

TOPIC, KEY_BYTES, VALUE_BYTES = "bench", 16, 200
SCAN = "sum(length(key)) + sum(length(value)) as n"


def parse_args(argv):
    ap = harness.parser("spark.stream", __doc__, "tiny data, one repeat, a short latency run")
    ap.add_argument("--records", type=int, help="records written (default 1,000,000; quick 20,000)")
    ap.add_argument("--repeats", type=int, help="timed repeats per case (default 3; quick 1)")
    ap.add_argument("--latency-seconds", type=float, help="length of the latency run (default 20; quick 4)")
    return harness.parse(ap, argv)


def start_broker(workdir: str) -> BrokerServer:
    config = os.path.join(workdir, "broker.toml")
    with open(config, "w") as fh:
        fh.write("housekeeping_ms = 50\n[storage]\ncheckpoint_interval_ms = 100\n")
    return BrokerServer(os.path.join(workdir, "data"), "fsync", ("--config", config)).start()


def produce(bootstrap: str, records: int, log) -> None:
    from logbroker import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic(TOPIC, 2, exist_ok=True)
    keys = [(b"key-%d-" % i).ljust(KEY_BYTES, b".") for i in range(1024)]
    values = [os.urandom(VALUE_BYTES) for _ in range(64)]
    t = time.perf_counter()
    with Producer(bootstrap) as p:
        for i in range(records):
            p.send(TOPIC, values[i & 63], key=keys[i & 1023])
        p.flush()
    log(f"produced {records:,} records in {time.perf_counter() - t:.1f} s")


def wait_checkpointed(data_dir: str, records: int, timeout: float = 60.0) -> None:
    """Until the data dir's checkpoints cover every record (bounded)."""
    from logbroker.spark.options import Options
    from logbroker.spark.plan import Planner

    deadline = time.monotonic() + timeout
    while True:
        planner = Planner(Options(data_dir=data_dir))
        try:
            seen = sum(planner.bounds(TOPIC, p)[2] for p in range(2))
        finally:
            planner.close()
        if seen >= records:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the checkpoint covers {seen} of {records} records after {timeout} s")
        time.sleep(0.1)


def make_spark():
    return local_session("logbroker-bench-stream")


def source(mode: str, data_dir: str, bootstrap: str) -> dict:
    return {"path": data_dir} if mode == "path" else {"bootstrap": bootstrap}


def scan_seconds(spark, opts: dict, expect: int) -> float:
    t = time.perf_counter()
    n = spark.read.format("logbroker").options(subscribe=TOPIC, **opts).load().selectExpr(SCAN).first().n
    took = time.perf_counter() - t
    if n != expect:
        raise AssertionError(f"scan of {opts} counted {n} bytes, expected {expect}")
    return took


def stream_seconds(spark, opts: dict, records: int, per_trigger: int, checkpoint: str) -> tuple:
    """``(wall s from start() to the end, sustained s)`` of an AvailableNow
    stream of every record into the ``noop`` sink in micro-batches of
    ``per_trigger``; sustained = the summed trigger times of the batches that
    carried records (Spark's ``triggerExecution``: without the query's
    start-up, which a long-running stream pays once)."""
    df = (spark.readStream.format("logbroker").options(subscribe=TOPIC, startingOffsets="earliest",
                                                        maxOffsetsPerTrigger=str(per_trigger), **opts)
          .load())
    t = time.perf_counter()
    query = (df.writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    if not query.awaitTermination(600):
        query.stop()
        raise RuntimeError("the AvailableNow stream did not end within 600 s")
    took = time.perf_counter() - t
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    read = sum(p["numInputRows"] for p in progress)
    if read != records:
        raise AssertionError(f"the stream read {read} records, expected {records}")
    return took, sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000


def latency(spark, bootstrap: str, seconds: float, checkpoint: str, log) -> dict:
    """End-to-end delays (ms) of records sent one every 5 ms, through a 1 s trigger."""
    from logbroker import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic("latency", 1, exist_ok=True)
    delays: list[float] = []

    def on_batch(batch_df, batch_id: int) -> None:
        now_ms = time.time() * 1000
        delays.extend(now_ms - r.ms for r in batch_df.selectExpr("unix_millis(timestamp) as ms").collect())

    df = spark.readStream.format("logbroker").options(bootstrap=bootstrap, subscribe="latency",
                                                      startingOffsets="earliest").load()
    query = (df.writeStream.foreachBatch(on_batch).option("checkpointLocation", checkpoint)
             .trigger(processingTime="1 second").start())
    sent = 0
    try:
        with Producer(bootstrap) as p:
            p.send("latency", b"warm-up").result(timeout=30)  # the first batch starts workers
            end = time.monotonic() + 120
            while not delays and time.monotonic() < end and query.isActive:
                time.sleep(0.1)
            delays.clear()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and sent < seconds * 400:
                p.send("latency", b"x" * 100)
                sent += 1
                time.sleep(0.005)  # the offered load: one record every 5 ms
            p.flush()
        end = time.monotonic() + 30
        while len(delays) < sent and time.monotonic() < end and query.isActive:
            time.sleep(0.1)
        if query.exception():
            raise RuntimeError(f"the latency query failed: {query.exception()}")
    finally:
        query.stop()
    delays.sort()
    log(f"latency: {len(delays)} of {sent} records seen")
    pick = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))] if delays else float("nan")  # noqa: E731
    return {"sent": sent, "seen": len(delays), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
            "max_ms": delays[-1] if delays else float("nan")}


def run(args, workdir: str, err) -> dict:
    log = harness.progress_log()
    records = args.records or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = args.latency_seconds or (4.0 if args.quick else 20.0)
    results = {"environment": environment(workdir), "records": records, "repeats": repeats}
    server = start_broker(workdir)
    try:
        produce(server.bootstrap, records, log)
        data_dir = os.path.join(workdir, "data")
        wait_checkpointed(data_dir, records)
        spark = make_spark()
        try:
            payload = records * (KEY_BYTES + VALUE_BYTES)
            modes = {m: source(m, data_dir, server.bootstrap) for m in ("path", "bootstrap")}
            for opts in modes.values():  # warm-up
                scan_seconds(spark, opts, payload)
            sizes = (records // 4, records // 2)  # records per micro-batch (maxOffsetsPerTrigger)
            scans = {m: [] for m in modes}
            streams = {(m, n): [] for m in modes for n in sizes}
            for i in range(repeats):
                for m, opts in (modes.items() if i % 2 == 0 else reversed(modes.items())):
                    scans[m].append(scan_seconds(spark, opts, payload))
                    for n in sizes:
                        streams[(m, n)].append(stream_seconds(
                            spark, opts, records, n, os.path.join(workdir, f"ck-{m}-{n}-{i}")))
                    log(f"round {i + 1}: {m} scan {scans[m][-1]:.2f} s, streams (wall, sustained) "
                        + ", ".join(f"{streams[(m, n)][-1][0]:.2f}/{streams[(m, n)][-1][1]:.2f} s"
                                    for n in sizes))
            results["scan_s"] = {m: summary(v) for m, v in scans.items()}
            results["streams"] = [{"mode": m, "per_trigger": n,
                                   "wall_s": summary([w for w, _ in v]),
                                   "sustained_s": summary([t for _, t in v])}
                                  for (m, n), v in streams.items()]
            results["latency"] = latency(spark, server.bootstrap, seconds,
                                         os.path.join(workdir, "ck-latency"), log)
        finally:
            spark.stop()
    finally:
        server.stop()
    return results


def tables(results: dict) -> list:
    n = results["records"]
    scan = results["scan_s"]
    scans = [(m, fmt_s(scan[m], 3), f"{n / scan[m]['median']:,.0f}") for m in ("path", "bootstrap")]
    rows, targets = [], []
    boot = scan["path"]["median"] / scan["bootstrap"]["median"]
    targets.append({"target": "bootstrap batch scan >= 0.7x path", "measured": f"{boot:.2f}x",
                    "met": boot >= 0.7})
    for st in results["streams"]:
        m, per = st["mode"], st["per_trigger"]
        sustained = scan[m]["median"] / st["sustained_s"]["median"]
        rows.append((m, f"{per:,}", fmt_s(st["wall_s"], 3), f"{n / st['wall_s']['median']:,.0f}",
                     fmt_s(st["sustained_s"], 3), f"{n / st['sustained_s']['median']:,.0f}",
                     f"{sustained:.2f}"))
        targets.append({"target": f"streaming read >= 0.5x batch scan ({m}, {per:,} per trigger, "
                                  "sustained)", "measured": f"{sustained:.2f}x", "met": sustained >= 0.5})
    lat = results["latency"]
    targets.append({"target": "end-to-end p50 <= 2 s, 1 s trigger",
                    "measured": f"{lat['p50_ms'] / 1000:.2f} s", "met": lat["p50_ms"] <= 2000})
    return [
        table(f"Batch scans of {n:,} records (median (min–max) s of {results['repeats']})",
              ("mode", "scan s", "scan rec/s"), scans),
        table("The same records as an AvailableNow stream into noop (sustained: the summed trigger "
              "times of the micro-batches, without the query's start-up)",
              ("mode", "records per trigger", "wall s", "wall rec/s", "sustained s", "sustained rec/s",
               "sustained ÷ scan"), rows),
        table("End to end: produce -> foreachBatch, 1 s trigger, bootstrap mode",
              ("records sent", "seen", "p50 ms", "p99 ms", "max ms"),
              [(f"{lat['sent']:,}", f"{lat['seen']:,}", f"{lat['p50_ms']:,.0f}", f"{lat['p99_ms']:,.0f}",
                f"{lat['max_ms']:,.0f}")]),
        targets_table(targets),
    ]


def main(argv=None) -> int:
    args = parse_args(argv)
    return harness.main(args, "spark_stream", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
