"""Spark sink benchmark (issue 13, item 4): ``df.write.format("logbroker")``
beside the Python Producer it writes through, in one run.

    python -m bench.spark.sink            # 1,000,000 records, 3 repeats (~2 minutes on 2 cores)
    python -m bench.spark.sink --quick    # smoke test: 20,000 records, one repeat
    python -m bench.spark.sink --json     # JSON on stdout, tables on stderr

One fresh ``logbroker serve`` (fsync, the default) runs in a temporary dir
inside the checkout and is stopped by its PID at the end. Each repeat runs,
alternating which goes first:

- ``producer``: the W2 producer phase of ``python -m bench.broker`` in its own
  process (bench/broker/worker.py, the same spec: N records of 100-byte
  values among 1,021 random ones, 16-byte keys among 1,024, acks=all,
  linger_ms=5, batch_size=1 MiB) into a fresh 1-partition topic; timed from
  the first ``send`` to the last acknowledgement.
- ``spark``: a local[2] SparkSession (``PYSPARK_PYTHON`` = this interpreter)
  writes the same number of records, same key and value sizes and cardinality
  (``spark.range`` with generated ``key`` and ``value`` columns, 2 partitions,
  cached and counted before timing), with ``df.write.format("logbroker")``
  (``bootstrap``, ``topic``, ``linger_ms=5``) into a fresh 1-partition topic;
  only the ``save()`` action is timed (two tasks, each with its own Producer).
  The topic's end offset is checked to be N afterwards. One untimed write of
  the same records comes first (the JVM's JIT and the Python workers warm
  up: the first write of a session takes 2-3 times as long).

Records/s = N / wall seconds; medians (min-max) of the repeats; target:
spark >= 0.5 x producer (issue 13: "df.write into a topic >= 50% of the
Python Producer's own W2 throughput").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench.broker.phases import Params
from bench.broker.server import BrokerServer, Worker
from bench.common import harness
from bench.common.environment import environment
from bench.common.stats import summary
from bench.spark.stream import make_spark  # local[2], no UI, 127.0.0.1, this interpreter

TARGET = 0.5
W2 = Params()  # the broker bench's W2: records, value and key sizes, cardinality, producer settings
PHASE_TIMEOUT_S = 300.0


def records_frame(spark, n: int):
    """N rows of ``key`` (16 bytes, 1,024 distinct, as the worker's
    ``make_keys``) and ``value`` (100 bytes, 1,021 distinct), cached and
    materialised so the timed write only reads the cache."""
    key = (f"CAST(rpad(concat('key-', CAST(id % {W2.distinct_keys} AS STRING), '-'), "
           f"{W2.key_bytes}, '.') AS BINARY) AS key")
    digest = "sha2(CAST(id % 1021 AS STRING), 512)"
    value = (f"unhex(substr(concat({digest}, sha2(concat('v', {digest}), 512)), 1, "
             f"{2 * W2.w2_value_bytes})) AS value")
    df = spark.range(0, n, numPartitions=2).selectExpr(key, value).cache()
    if df.count() != n:
        raise RuntimeError("the cached DataFrame lost rows")
    return df


def create_topic(bootstrap: str, topic: str) -> None:
    from logbroker import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, W2.partitions)


def end_offset(bootstrap: str, topic: str) -> int:
    from logbroker import Admin

    with Admin(bootstrap) as admin:
        return admin.list_offsets([(topic, 0)], "latest")[(topic, 0)].offset


def producer_run(server: BrokerServer, workdir: str, n: int, i) -> dict:
    """The W2 producer phase of bench.broker, in its own process."""
    spec = {"mode": "produce", "topic": f"w2-{i}", "partitions": W2.partitions, "records": n,
            "value_bytes": W2.w2_value_bytes, "key_bytes": W2.key_bytes,
            "distinct_keys": W2.distinct_keys, "acks": W2.acks, "linger_ms": W2.linger_ms,
            "batch_size": W2.batch_size, "bootstrap": server.bootstrap,
            "deadline_s": PHASE_TIMEOUT_S}
    worker = Worker(spec, os.path.join(workdir, f"producer-{i}.log"))
    try:
        worker.wait_ready(PHASE_TIMEOUT_S)
        worker.go()
        out = worker.result(PHASE_TIMEOUT_S + 30)
    finally:
        worker.stop()
    if out["last_offset"] != n - 1:
        raise RuntimeError(f"producer: last offset {out['last_offset']}, expected {n - 1}")
    return {"seconds": out["seconds"], "records_per_s": n / out["seconds"]}


def spark_run(df, server: BrokerServer, n: int, i) -> dict:
    """``df.write.format("logbroker")`` into a fresh topic; only ``save()`` timed."""
    topic = f"spark-{i}"
    create_topic(server.bootstrap, topic)
    writer = (df.write.format("logbroker").mode("append").option("bootstrap", server.bootstrap)
              .option("topic", topic).option("linger_ms", str(W2.linger_ms))
              .option("batch_size", str(W2.batch_size)))
    started = time.perf_counter()
    writer.save()
    seconds = time.perf_counter() - started
    got = end_offset(server.bootstrap, topic)
    if got != n:
        raise RuntimeError(f"spark: topic {topic} ends at {got}, expected {n}")
    return {"seconds": seconds, "records_per_s": n / seconds}


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    n = 20_000 if args.quick else args.records
    repeats = 1 if args.quick else args.repeats
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir),
                     "params": {"records": n, "repeats": repeats, "value_bytes": W2.w2_value_bytes,
                                "key_bytes": W2.key_bytes, "distinct_keys": W2.distinct_keys,
                                "acks": W2.acks, "linger_ms": W2.linger_ms,
                                "batch_size": W2.batch_size, "master": "local[2]"},
                     "runs": []}
    server = BrokerServer(os.path.join(workdir, "data")).start()
    try:
        spark = make_spark()
        try:
            log("building the cached DataFrame")
            df = records_frame(spark, n)
            log("warm-up: one untimed write of every record (JIT, Python workers)")
            spark_run(df, server, n, "warm-up")
            for i in range(repeats):
                order = ("producer", "spark") if i % 2 == 0 else ("spark", "producer")
                done = {}
                for what in order:
                    done[what] = (producer_run(server, workdir, n, i) if what == "producer"
                                  else spark_run(df, server, n, i))
                    log(f"repeat {i + 1}/{repeats} {what}: "
                        f"{done[what]['records_per_s']:,.0f} records/s")
                results["runs"].append(done)
                if not server.alive():
                    raise RuntimeError(f"the broker died:\n{server.log()[-2000:]}")
        finally:
            spark.stop()
    finally:
        server.stop()
    results["summary"] = summarize(results["runs"])
    return results


def summarize(runs: list[dict]) -> dict:
    out = {what: summary([r[what]["records_per_s"] for r in runs]) for what in ("producer", "spark")}
    ratio = out["spark"]["median"] / out["producer"]["median"]
    pairs = [r["spark"]["records_per_s"] / r["producer"]["records_per_s"] for r in runs]
    out["ratio"] = ratio
    out["pair_ratio_median"] = statistics.median(pairs)
    out["target"] = {"target": f"Spark df.write >= {TARGET:.0%} of the Producer's W2",
                     "measured": f"{ratio:.2f} x ({out['spark']['median']:,.0f} / "
                                 f"{out['producer']['median']:,.0f} records/s)",
                     "ratio": ratio, "met": ratio >= TARGET}
    return out


def tables(results: dict) -> list:
    s, p = results["summary"], results["params"]
    rows = [(what, harness.fmt_s(s[what], 0),
             f"{p['records'] / s[what]['median']:.2f}",
             f"{s[what]['median'] * (p['value_bytes'] + p['key_bytes']) / 1e6:.1f}")
            for what in ("producer", "spark")]
    title = (f"{p['records']:,} records x {p['value_bytes']} B values, {p['key_bytes']} B keys, "
             f"medians of {p['repeats']} (min-max)")
    return [harness.table(title, ("writer", "records/s", "s", "MB/s"), rows),
            harness.targets_table([s["target"]], ratio=True)]


def main(argv: "list[str] | None" = None) -> int:
    ap = harness.parser("spark.sink", __doc__, "20,000 records, one repeat (a smoke test)")
    ap.add_argument("--records", type=int, default=W2.w2_records, help="records per write (W2: 1,000,000)")
    ap.add_argument("--repeats", type=int, default=3, help="alternated repeats (>= 3 for the target)")
    args = harness.parse(ap, argv)
    return harness.main(args, "spark_sink", run, tables)


if __name__ == "__main__":
    sys.exit(main())
