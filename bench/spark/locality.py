"""Spark reads of a replicated topic by replica files against Fetch (issue
28, item 3): a 3-broker cluster, one local[2] SparkSession, one run.

    python -m bench.spark.locality            # 200,000 records, ~1 minute here
    python -m bench.spark.locality --quick    # smoke run: 5,000 records, 2 rounds
    python -m bench.spark.locality --json     # JSON on stdout, tables on stderr

- Cluster: etcd and 3 brokers (ids 1-3) on 127.0.0.1 (bench/cluster/procs.py,
  ``cluster3``), each process started here and stopped by its PID.
- Data: topic ``bench`` with replication factor 3 and 4 partitions; the
  Producer (acks=all) writes ``--records`` records (16-byte keys among
  1,024, 200-byte values) round-robin, so all are committed on every
  in-sync replica.
- Reads: ``select(key, value)`` of every record into Spark's ``noop`` sink
  (one stage, one task per partition) through a fresh ``load()`` with
  ``bootstrap`` + ``paths`` (the JVM connector: each task reads a replica's
  segment files on its host) and with ``bootstrap`` alone (the Python
  source: each task fetches from the leader). Both are first checked to
  read the same key and value bytes, then ``--rounds`` rounds time each
  once, the order reversed every other round; medians (min-max).
- Locality: ``LocalityListener`` (in the connector's jar) counts each
  read's finished tasks by the locality Spark ran them at; the table gives
  the share NODE_LOCAL or better. The local executor's host is 127.0.0.1
  (``SPARK_LOCAL_HOSTNAME``), the brokers' advertised host. Spark reports
  a task without preferred locations (the Python source's) as
  PROCESS_LOCAL, so that read's share says nothing about where its data
  was: its column "preferred hosts" says none.
"""

from __future__ import annotations

import json
import os
import time

from bench.common import harness
from bench.common.environment import environment
from bench.common.harness import fmt_s, table
from bench.common.stats import summary

TOPIC, PARTITIONS, KEY_BYTES, VALUE_BYTES = "bench", 4, 16, 200
CHECK = ("count(*) as n", "sum(length(key)) + sum(length(value)) as bytes")
LOCAL = ("PROCESS_LOCAL", "NODE_LOCAL")
MODES = ("jvm_paths", "python_fetch")


def parse_args(argv):
    ap = harness.parser("spark.locality", __doc__, "5,000 records, 2 rounds")
    ap.add_argument("--records", type=int, help="records written (default 200,000; quick 5,000)")
    ap.add_argument("--rounds", type=int, help="timed rounds (default 5; quick 2)")
    return harness.parse(ap, argv)


def produce(bootstrap: str, records: int, log) -> None:
    from logbroker import Admin, Producer

    with Admin(bootstrap, request_timeout_ms=10_000) as admin:
        admin.create_topic(TOPIC, PARTITIONS, replication_factor=3)
        deadline = time.monotonic() + 30  # until every partition has a leader and a full ISR
        while True:
            parts = [p for p in admin.describe_cluster([TOPIC]).partitions]
            if all(p.leader >= 0 and len(p.isr) == 3 for p in parts):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {TOPIC} not fully replicated after 30 s: {parts}")
            time.sleep(0.1)
    keys = [(b"key-%d-" % i).ljust(KEY_BYTES, b".") for i in range(1024)]
    values = [os.urandom(VALUE_BYTES) for _ in range(64)]
    t = time.perf_counter()
    with Producer(bootstrap, acks="all") as p:
        for i in range(records):
            p.send(TOPIC, values[i & 63], key=keys[i & 1023])
        p.flush()
    log(f"produced {records:,} records (acks=all, RF=3) in {time.perf_counter() - t:.1f} s")


class Reads:
    """The two reads of the topic, each through a fresh ``load()``, and the
    locality of each read's tasks (LocalityListener)."""

    def __init__(self, spark, bootstrap: str, paths: dict) -> None:
        self.spark = spark
        self.options = {"jvm_paths": {"bootstrap": bootstrap, "paths": json.dumps(paths)},
                        "python_fetch": {"bootstrap": bootstrap}}
        self.listener = spark._jvm.org.logbroker.spark.LocalityListener
        self.listener.register(spark.sparkContext._jsc.sc())

    def load(self, mode: str):
        return self.spark.read.format("logbroker").options(subscribe=TOPIC,
                                                           **self.options[mode]).load()

    def check(self, mode: str) -> tuple:
        df = self.load(mode)
        plan = df._jdf.queryExecution().executedPlan().toString()
        if ("logbroker (jvm)" in plan) != (mode == "jvm_paths"):
            raise AssertionError(f"{mode} planned on the wrong engine: {plan[:300]}")
        row = df.selectExpr(*CHECK).first()
        self._tasks(0)  # let the check's task events land before the next reset
        return row.n, row.bytes

    def timed(self, mode: str) -> tuple[float, dict]:
        """Seconds of one noop write of every key and value; the tasks by locality."""
        self.listener.reset()
        t = time.perf_counter()
        self.load(mode).select("key", "value").write.format("noop").mode("overwrite").save()
        took = time.perf_counter() - t
        return took, self._tasks(PARTITIONS)

    def _tasks(self, count: int, timeout: float = 30.0) -> dict:
        """The counts once ``count`` tasks were seen (bounded: the listener
        bus delivers after the job's result), then a short settle."""
        deadline = time.monotonic() + timeout
        while self.listener.total() < count and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        return dict(self.listener.snapshot())


def run(args, workdir: str, err) -> dict:
    from bench.cluster.procs import Setup
    from bench.spark.session import local_session

    log = harness.progress_log()
    records = args.records or (5_000 if args.quick else 200_000)
    rounds = args.rounds or (2 if args.quick else 5)
    results = {"environment": environment(workdir), "records": records, "rounds": rounds,
               "partitions": PARTITIONS}
    setup = Setup("cluster3", workdir).start()
    try:
        log(f"cluster up in {setup.start_s:.1f} s: {setup.bootstrap}")
        produce(setup.bootstrap, records, log)
        paths = {i: os.path.abspath(b.data_dir) for i, b in setup.brokers.items()}
        os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "127.0.0.1")  # the brokers' advertised host
        spark = local_session("logbroker-bench-locality")
        try:
            reads = Reads(spark, setup.bootstrap, paths)
            checked = {m: reads.check(m) for m in MODES}
            if len(set(checked.values())) != 1 or checked["jvm_paths"][0] != records:
                raise AssertionError(f"the reads disagree or miss records: {checked}")
            log(f"both reads see {records:,} records, {checked['jvm_paths'][1]:,} key+value bytes")
            for m in MODES:  # warm-up
                reads.timed(m)
            seconds = {m: [] for m in MODES}
            tasks = {m: {} for m in MODES}
            for i in range(rounds):
                for m in (MODES if i % 2 == 0 else MODES[::-1]):
                    took, counts = reads.timed(m)
                    seconds[m].append(took)
                    for k, v in counts.items():
                        tasks[m][k] = tasks[m].get(k, 0) + v
                log(f"round {i + 1}/{rounds}: " + ", ".join(f"{m} {seconds[m][-1]:.2f} s"
                                                          for m in MODES))
            results["seconds"] = {m: summary(v) for m, v in seconds.items()}
            results["tasks"] = tasks
        finally:
            spark.stop()
    finally:
        setup.stop()
    return results


def tables(results: dict) -> list:
    n = results["records"]
    rows = []
    for m in MODES:
        s, counts = results["seconds"][m], results["tasks"][m]
        total = sum(counts.values())
        local = sum(counts.get(k, 0) for k in LOCAL)
        rows.append((m, "the replicas'" if m == "jvm_paths" else "none", fmt_s(s, 3),
                     f"{n / s['median']:,.0f}", f"{local}/{total}",
                     ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))))
    ratio = results["seconds"]["python_fetch"]["median"] / results["seconds"]["jvm_paths"]["median"]
    return [table(f"{n:,} records (RF=3, {results['partitions']} partitions, 3 brokers on "
                  f"127.0.0.1) into noop: median (min–max) s of {results['rounds']} rounds; "
                  f"replica files {ratio:.2f}x the speed of Fetch",
                  ("read", "preferred hosts", "seconds", "records/s", "tasks NODE_LOCAL or better",
                   "tasks by locality"), rows)]


def main(argv=None) -> int:
    args = parse_args(argv)
    return harness.main(args, "spark_locality", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
