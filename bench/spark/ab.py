"""A/B of two Spark JVM connector jars over the same records, alternated.

    python -m bench.spark.ab A.jar B.jar              # 1,000,000 records, A B A B A B, 9 rounds each
    python -m bench.spark.ab A.jar B.jar --quick      # 20,000 records, A B, 2 rounds
    python -m bench.spark.ab A.jar B.jar --json

Writes the records of ``bench.spark`` (``bench/spark/data.py``) as segments
and as Parquet into a temporary dir inside the checkout, then runs each jar
in turn in its own ``local[2]`` session (a child process), A B A B ...
(``--alternations``). A child warms every query twice, then times
``--rounds`` rounds of: ``groupBy(key).count()``, the full scan
(``sum(length(key)) + sum(length(value))``), the 1% range by ``where`` (and
the time to its executed plan), and Parquet's ``groupBy(key).count()`` (the
reference in the same session); it prints the medians as one JSON line.
Both jars must speak this tree's planner (``spark/bridge.py`` ``VERSION``):
to compare with an older tree, build its jar against this tree's bridge or
run that tree's planner (``spark.logbroker.python``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench import ROOT
from bench.common import harness
from bench.common.environment import environment
from bench.common.harness import table

QUERIES = ("groupby", "scan", "range_where", "range_where_plan", "parquet_groupby")


def parse_args(argv):
    ap = harness.parser("spark.ab", __doc__, "20,000 records, A B once, 2 rounds (smoke test)")
    ap.add_argument("jar_a", help="the A jar (e.g. one built from the tree before a change)")
    ap.add_argument("jar_b", help="the B jar")
    ap.add_argument("--records", type=int, help="records written (default 1,000,000; quick 20,000)")
    ap.add_argument("--rounds", type=int, help="timed rounds per query in each run (default 9; quick 2)")
    ap.add_argument("--alternations", type=int, help="A B pairs (default 3; quick 1)")
    ap.add_argument("--child", nargs=4, metavar=("JAR", "DATA", "PARQUET", "ROUNDS"),
                    help=argparse.SUPPRESS)  # a child run: one jar's medians as a JSON line
    return harness.parse(ap, argv)


def child(jar: str, data: str, parquet: str, rounds: int) -> dict:
    """Medians (s) of each query in a fresh session carrying ``jar``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from bench.spark.data import TOPIC

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false").config("spark.jars", jar).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        ends = [int(r[0]) for r in spark.read.format("logbroker").option("path", data)
                .option("subscribe", TOPIC).option("engine", "jvm").load()
                .groupBy("partition").max("offset").orderBy("partition").collect()]
        cond = None
        for p, last in enumerate(ends):
            width = max(1, (last + 1) // 100)
            lo = (last + 1) // 2 - width // 2
            c = (F.col("partition") == p) & F.col("offset").between(lo, lo + width - 1)
            cond = c if cond is None else cond | c

        def ours():
            return (spark.read.format("logbroker").option("path", data).option("subscribe", TOPIC)
                    .option("engine", "jvm").load())

        ranged = (lambda: ours().where(cond).agg(F.count(F.lit(1)), F.sum(F.length("value"))))
        queries = {
            "groupby": lambda: ours().groupBy("key").count().collect(),
            "scan": lambda: ours().agg(F.sum(F.length("key")) + F.sum(F.length("value"))).collect(),
            "range_where": lambda: ranged().collect(),
            "range_where_plan": lambda: ranged()._jdf.queryExecution().executedPlan(),
            "parquet_groupby": lambda: spark.read.parquet(parquet).groupBy("key").count().collect(),
        }
        for q in queries.values():
            q()
            q()
        times: dict = {name: [] for name in queries}
        for _ in range(rounds):
            for name, q in queries.items():
                t = time.perf_counter()
                q()
                times[name].append(time.perf_counter() - t)
        return {name: statistics.median(ts) for name, ts in times.items()}
    finally:
        spark.stop()


def run(args, workdir: str, err) -> dict:
    from bench.spark.data import write_parquet, write_store

    log = harness.progress_log(err.file)
    records = args.records or (20_000 if args.quick else 1_000_000)
    rounds = args.rounds or (2 if args.quick else 9)
    pairs = args.alternations or (1 if args.quick else 3)
    jars = {"A": os.path.abspath(args.jar_a), "B": os.path.abspath(args.jar_b)}
    for name, jar in jars.items():
        if not os.path.isfile(jar):
            raise SystemExit(f"jar {name} {jar!r} does not exist")
    data, parquet = os.path.join(workdir, "data"), os.path.join(workdir, "parquet")
    log(f"writing {records:,} records")
    layout = write_store(data, records, 2, 1000, 64 << 20)
    write_parquet(parquet, layout.pop("_cols"))
    runs = []
    for i in range(pairs):
        for name in ("A", "B"):
            log(f"run {i + 1}/{pairs}: {name}")
            done = subprocess.run([sys.executable, "-m", "bench.spark.ab", jars[name], jars[name],
                                   "--child", jars[name], data, parquet, str(rounds)],
                                  capture_output=True, text=True, cwd=ROOT, timeout=900)
            if done.returncode != 0:
                raise SystemExit(f"run {name} failed:\n{done.stderr[-3000:]}")
            runs.append({"jar": name, **json.loads(done.stdout.strip().splitlines()[-1])})
    ratios = {q: [b[q] / a[q] for a, b in zip(runs[0::2], runs[1::2])] for q in QUERIES}
    return {"environment": environment(workdir), "jars": jars, "records": records, "rounds": rounds,
            "runs": runs, "b_over_a": ratios}


def tables(results: dict) -> list:
    rows = [(r["jar"],) + tuple(f"{r[q]:.3f}" for q in QUERIES) for r in results["runs"]]
    rows.append(("B/A",) + tuple(", ".join(f"{x:.2f}" for x in results["b_over_a"][q]) for q in QUERIES))
    return [table(f"{results['records']:,} records, medians (s) of {results['rounds']} rounds per run; "
                  f"A = {results['jars']['A']}, B = {results['jars']['B']}", ("run",) + QUERIES, rows)]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        jar, data, parquet, rounds = args.child
        print(json.dumps(child(jar, data, parquet, int(rounds))))
        return 0
    return harness.main(args, "spark.ab", run, tables)


if __name__ == "__main__":
    sys.exit(main())
