"""Spark data source benchmark (issues 4 and 13): the ``logbroker`` format beside
a Python data source doing no work, Spark's Parquet and JSON-lines readers over
the same records, in one run.

    python -m bench.spark             # full run (216 MB of payload), ~2 minutes on 2 cores
    python -m bench.spark --profile   # + read() in this process: time and cProfile
    python -m bench.spark --quick     # smoke test: tiny data, one checked repeat, no warm-up
    python -m bench.spark --json      # JSON on stdout, tables on stderr

Data: ``Store`` writes N records (16-byte keys among 1024 distinct, 200-byte
random values, 1000-record batches, round-robin over 2 partitions, 64 MiB
segments, lazy flush) into a temporary dir inside the checkout; ``close()``
checkpoints the high watermark. The same records go to Parquet (pyarrow, one
snappy file per partition, 128 Ki-row row groups) and, through Spark, to JSON
lines (binary columns as base64; ``unbase64`` on read so queries see bytes).
The no-work source (``bench/spark/floor.py``) yields the same number of rows
per task with the same columns, key and value sizes from one prebuilt Arrow
batch: what any Python data source costs at least (Spark's Python worker,
Arrow to the JVM, rows).

Formats: ``logbroker`` and ``floor`` (all seven columns), ``logbroker_kv`` and
``floor_kv`` (``.schema("key binary, value binary")``), ``parquet``, ``json``.

Queries (after one untimed round of every query on every format, each query
gets one checked warm-up per format, then ``--repeats`` rounds, each timing
every format once, the order reversed every other round; median, min-max;
``--quick`` has no warm-ups and checks its one round's answers instead):

- ``count``: ``df.count()``
- ``scan``: ``sum(length(key)) + sum(length(value))`` (a full scan touching both)
- ``groupby``: ``groupBy(key).count()`` collected (1024 rows)
- ``range``: ~1% of each partition's offsets in the middle of the log:
  ``startingOffsets``/``endingOffsets`` options for ``logbroker``, a
  ``.where(partition = p and offset between ...)`` for Parquet and JSON;
  aggregates ``count`` and ``sum(length(value))`` (not on the no-work source).

MB/s = key + value payload bytes the query covers / wall time of the action.
Ratios are speed ratios of medians: ``vs no-work`` = no-work s / logbroker s
(same schema), ``vs Parquet`` = Parquet s / logbroker s. ``CPU s`` is the CPU
time of the whole process tree (driver, JVM, Python workers) during the action
(bench/spark/cputime.py): on a shared machine it stretches far less than wall
time; ``CPU vs no-work`` is its ratio. Spark runs
``local[2]`` with ``PYSPARK_PYTHON`` = this interpreter. With ``--profile``
the data source's ``read()`` is also run in this process (no Spark) over
every split, for both schemas, timed, and profiled with cProfile.

Work happens in a fresh temporary dir (default: inside the checkout) removed at
the end, also on error or Ctrl-C.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench import ROOT
from bench.common import harness
from bench.common.environment import environment
from bench.common.harness import fmt_s, table, targets_table
from bench.common.stats import MiB, summary, timed
from bench.spark.cputime import tree_cpu_seconds
from bench.spark.data import KEY_BYTES, TOPIC, VALUE_BYTES, fmt_mib, write_json, write_parquet, write_store
from bench.spark.session import local_session

FORMATS = ("jvm", "jvm_kv", "logbroker", "floor", "logbroker_kv", "floor_kv", "parquet", "json")
FLOORS = {"logbroker": "floor", "logbroker_kv": "floor_kv"}  # ours -> its no-work source
JVM = ("jvm", "jvm_kv")  # the JVM connector (engine=jvm); logbroker* are the Python source
KV_SCHEMA = "key binary, value binary"  # *_kv: a given schema picks the columns
QUERIES = ("count", "scan", "groupby", "range", "range_where")
PAYLOAD = KEY_BYTES + VALUE_BYTES


def parse_args(argv):
    ap = harness.parser("spark", __doc__, "tiny data, one checked repeat, no warm-ups (smoke test)")
    ap.add_argument("--records", type=int, help="records written (default 1,000,000; quick 20,000)")
    ap.add_argument("--repeats", type=int, help="timed repeats per query (default 3; quick 1)")
    ap.add_argument("--profile", action="store_true", help="also time and cProfile read() in-process")
    return harness.parse(ap, argv)


def make_spark():
    os.environ["PYTHONPATH"] = os.pathsep.join(  # workers import bench.spark.floor
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    spark = local_session("logbroker-bench")
    from bench.spark.floor import FloorSource

    spark.dataSource.register(FloorSource)
    return spark


def frames(spark, data_dir: str, parquet_dir: str, json_dir: str, records: int) -> dict:
    """Format -> a function making a fresh DataFrame (a fresh ``load()`` re-plans)."""
    from pyspark.sql import functions as F

    json_schema = ("key string, value string, topic string, partition int, offset long, "
                   "timestamp timestamp, timestampType int")
    js = spark.read.schema(json_schema).json(json_dir)
    js = js.withColumn("key", F.unbase64("key")).withColumn("value", F.unbase64("value"))

    def reader(fmt: str, schema):  # a new reader each time: options set on one stay on it
        r = spark.read.format(fmt)
        return r.schema(schema) if schema else r

    def ours(schema=None, engine="python"):
        return lambda **o: (reader("logbroker", schema).option("path", data_dir).option("subscribe", TOPIC)
                            .option("engine", engine).options(**o).load())

    def floor(schema=None):
        return lambda **o: reader("logbroker_bench_floor", schema).option("records", records).option("parts", 2).load()

    return {"jvm": ours(engine="jvm"), "jvm_kv": ours(KV_SCHEMA, "jvm"),
            "logbroker": ours(), "logbroker_kv": ours(KV_SCHEMA), "floor": floor(), "floor_kv": floor(KV_SCHEMA),
            "parquet": lambda **o: spark.read.parquet(parquet_dir), "json": lambda **o: js}


def ranges(end_offsets: list[int]) -> dict:
    """~1% of each partition, in the middle of its log: {partition: (start, end)}, end exclusive."""
    out = {}
    for p, end in enumerate(end_offsets):
        width = max(1, end // 100)
        start = end // 2 - width // 2
        out[p] = (start, start + width)
    return out


def query(name: str, fmt: str, make, rng: dict):
    """A thunk running one query (the Spark action) and returning its result rows."""
    from pyspark.sql import functions as F

    if name == "count":
        return lambda: make().count()
    if name == "scan":
        return lambda: make().agg((F.sum(F.length("key")) + F.sum(F.length("value"))).alias("b")).collect()
    if name == "groupby":
        return lambda: make().groupBy("key").count().collect()
    agg = (F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("b"))
    if name == "range" and fmt.startswith(("logbroker", "jvm")):
        starting = json.dumps({TOPIC: {str(p): s for p, (s, _) in rng.items()}})
        ending = json.dumps({TOPIC: {str(p): e for p, (_, e) in rng.items()}})
        return lambda: make(startingOffsets=starting, endingOffsets=ending).agg(*agg).collect()
    cond = None
    for p, (s, e) in rng.items():
        c = (F.col("partition") == p) & F.col("offset").between(s, e - 1)
        cond = c if cond is None else cond | c
    return lambda: make().where(cond).agg(*agg).collect()


def check(name: str, result, records: int, range_records: int) -> None:
    """Every format must return the same answer (a wrong answer would make the timing meaningless)."""
    if name == "count":
        ok = result == records
    elif name == "scan":
        ok = result[0]["b"] == records * PAYLOAD
    elif name == "groupby":
        ok = sum(r["count"] for r in result) == records and len(result) == min(records, 1024)
    else:
        ok = result[0]["n"] == range_records and result[0]["b"] == range_records * VALUE_BYTES
    if not ok:
        raise SystemExit(f"query {name}: unexpected result {str(result)[:200]}")


def formats_of(name: str) -> tuple:
    """The formats a query runs on: the ranges not on the no-work source, the
    range by ``where`` only where a filter can narrow the read (the JVM with
    all columns: the key+value schema has no offset column; Parquet)."""
    if name == "range_where":
        return ("jvm", "parquet")
    return tuple(f for f in FORMATS if not (name == "range" and f.startswith("floor")))


def run_queries(spark, dfs: dict, layout: dict, repeats: int, log, warm: bool = True) -> list[dict]:
    """Every query on every format. ``warm``: after one untimed round of all of
    them and a checked warm-up of each; ``--quick`` runs neither and checks
    the timed runs' answers instead."""
    rng = ranges(layout["end_offsets"])
    range_records = sum(e - s for s, e in rng.values())
    rows = []
    if warm:
        log("warm-up: every query on every format once (JIT, caches)")
        for name in QUERIES:
            for fmt in formats_of(name):
                query(name, fmt, dfs[fmt], rng)()
    for name in QUERIES:
        ranged = name.startswith("range")
        covered = (range_records if ranged else layout["records"])
        nbytes = covered * (VALUE_BYTES if ranged else PAYLOAD)
        thunks = {fmt: query(name, fmt, dfs[fmt], rng) for fmt in formats_of(name)}
        if warm:
            for thunk in thunks.values():
                check(name, thunk(), layout["records"], range_records)  # warm-up, checked
        else:  # no warm-up: every timed run's answer is checked
            thunks = {fmt: (lambda t=t: check(name, t(), layout["records"], range_records))
                      for fmt, t in thunks.items()}
        times: dict = {fmt: [] for fmt in thunks}
        cpu: dict = {fmt: [] for fmt in thunks}
        for r in range(repeats):  # rounds of every format; the order reversed every other round
            for fmt in (list(thunks) if r % 2 == 0 else list(reversed(thunks))):
                before = tree_cpu_seconds()
                times[fmt] += timed(thunks[fmt], 1)
                cpu[fmt].append(tree_cpu_seconds() - before)
        for fmt, ts in times.items():
            s = summary(ts)
            mbs = summary([nbytes / 1e6 / x for x in ts])
            rows.append({"query": name, "format": fmt, "seconds": s, "mb_per_s": mbs, "records": covered,
                         "bytes": nbytes, "cpu_seconds": summary(cpu[fmt])})
            log(f"{name:8} {fmt:13} {s['median']:.3f} s  {mbs['median']:,.1f} MB/s  "
                f"CPU {rows[-1]['cpu_seconds']['median']:.2f} s")
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Speed ratios of medians per query: ours against the no-work source of
    the same schema (``None`` where it does not run), Parquet, JSON and (the
    JVM connector) the Python source of the same schema; ``cpu_vs_floor`` the
    same of CPU seconds (driver, JVM, workers)."""
    by = {(r["query"], r["format"]): r["seconds"]["median"] for r in rows}
    cpu = {(r["query"], r["format"]): r["cpu_seconds"]["median"] for r in rows}

    def vs(q, other, ours):
        return by[(q, other)] / by[(q, ours)] if (q, other) in by and (q, ours) in by else None

    out = []
    for q in QUERIES:
        for ours in ("jvm", "jvm_kv", "logbroker", "logbroker_kv"):
            if (q, ours) not in by:
                continue
            floor = FLOORS.get(ours)
            floor_cpu = cpu.get((q, floor))
            python = {"jvm": "logbroker", "jvm_kv": "logbroker_kv"}.get(ours)
            out.append({"query": q, "format": ours, "vs_floor": vs(q, floor, ours) if floor else None,
                        "cpu_vs_floor": floor_cpu / cpu[(q, ours)] if floor_cpu and cpu[(q, ours)] else None,
                        "vs_parquet": vs(q, "parquet", ours), "vs_json": vs(q, "json", ours),
                        "vs_python": vs("range" if q == "range_where" else q, python, ours)
                        if python else None})
    return out


# Issue 28's targets for the JVM connector, as speed ratios to Parquet
JVM_TARGETS = {"count": 1.0, "scan": 1.2, "groupby": 1.2, "range": 3.0, "range_where": 3.0}


def targets(ratio_rows: list[dict]) -> list[dict]:
    """Issue 13: the Python source's full scan at >= 0.9x the no-work source,
    for both schemas; issue 28: the JVM connector against Parquet."""
    r = {(x["query"], x["format"]): x for x in ratio_rows}
    out = []
    for ours, what in (("logbroker", "all columns"), ("logbroker_kv", "key+value schema")):
        x = r.get(("scan", ours))
        if x is None or x["vs_floor"] is None:
            continue
        cpu = f", CPU {x['cpu_vs_floor']:.2f}x" if x["cpu_vs_floor"] else ""
        out.append({"target": f"Python source full scan >= 0.9x the no-work source, {what}",
                    "measured": f"{x['vs_floor']:.2f}x (vs Parquet {x['vs_parquet']:.2f}x{cpu})",
                    "value": x["vs_floor"], "met": x["vs_floor"] >= 0.9})
    for q, want in JVM_TARGETS.items():
        for ours, what in (("jvm", "all columns"), ("jvm_kv", "key+value schema")):
            x = r.get((q, ours))
            if x is None or x["vs_parquet"] is None:
                continue
            out.append({"target": f"JVM {q} >= {want:.1f}x Parquet, {what}",
                        "measured": f"{x['vs_parquet']:.2f}x", "value": x["vs_parquet"],
                        "met": x["vs_parquet"] >= want})
    return out


def profile_read(data_dir: str, log, top: int = 12) -> list[dict]:
    """read() of every split in this process (no Spark), all columns and the
    key+value schema: time, and cProfile's top functions."""
    import cProfile
    import io
    import pstats

    from pyspark.sql.types import BinaryType, StructField, StructType

    from logbroker.spark.source import LogbrokerReader

    out = []
    kv = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    for fmt, schema in (("logbroker", None), ("logbroker_kv", kv)):
        reader = LogbrokerReader({"path": data_dir, "subscribe": TOPIC}, schema)

        def read_all() -> int:
            return sum(batch.num_rows for part in reader.partitions() for batch in reader.read(part))

        rows = read_all()  # warm-up
        times = timed(read_all, 5)
        prof = cProfile.Profile()
        prof.enable()
        read_all()
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
        s = summary(times)
        mbs = summary([rows * PAYLOAD / 1e6 / x for x in times])
        log(f"in-process read() {fmt}: {s['median']:.3f} s, {mbs['median']:,.0f} MB/s")
        out.append({"format": fmt, "seconds": s, "mb_per_s": mbs, "rows": rows,
                    "cprofile_tottime": buf.getvalue()})
    return out


def spark_env(spark) -> dict:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"pyspark": spark.version, "java": java[0] if java else "-", "master": spark.sparkContext.master}


def report_tables(results: dict) -> list:
    layout = results["data"]
    out = [table(f"Data — {layout['records']:,} records, payload {fmt_mib(layout['payload_bytes'])}",
                 ("copy", "on disk", "files"),
                 [("logbroker segments", fmt_mib(layout["segment_bytes_on_disk"]), str(layout["segment_files"])),
                  ("Parquet (snappy)", fmt_mib(layout["parquet_bytes"]), str(layout["partitions"])),
                  ("JSON lines", fmt_mib(layout["json_bytes"]), "-")])]
    rat = {(r["query"], r["format"]): r for r in results["ratios"]}
    rows = []
    for r in results["queries"]:
        x = rat.get((r["query"], r["format"]))
        cells = tuple(f"{x[k]:.2f}x" if x and x.get(k) else "-"
                      for k in ("vs_floor", "cpu_vs_floor", "vs_python", "vs_parquet", "vs_json"))
        rows.append((r["query"], FORMAT_NAMES[r["format"]], fmt_s(r["seconds"], 3), fmt_s(r["mb_per_s"]),
                     f"{r['cpu_seconds']['median']:.2f}") + cells)
    out.append(table(f"Queries, local[2] — median (min–max) of {results['params']['repeats']} rounds",
                     ("query", "format", "seconds", "MB/s", "CPU s", "vs no-work", "CPU vs no-work",
                      "vs Python source", "vs Parquet", "vs JSON"), rows))
    if results.get("profile"):
        prow = [(f"logbroker read() in this process, no Spark, all splits, {FORMAT_NAMES[p['format']]}",
                 fmt_s(p["seconds"], 3), fmt_s(p["mb_per_s"])) for p in results["profile"]]
        out.append(table("Where the time goes — median (min–max) of 5", ("case", "seconds", "MB/s"), prow))
    out.append(targets_table(results["targets"]))
    return out


FORMAT_NAMES = {"jvm": "JVM connector", "jvm_kv": "JVM connector key+value",
                "logbroker": "Python source", "logbroker_kv": "Python source key+value", "floor": "no-work source",
                "floor_kv": "no-work source key+value", "parquet": "Parquet", "json": "JSON lines"}


def run(args, workdir: str, err) -> dict:
    log = harness.progress_log(err.file)
    records = args.records or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 5)
    seg = (1 if args.quick else 64) * MiB
    data_dir, parquet_dir, json_dir = (os.path.join(workdir, d) for d in ("data", "parquet", "json"))
    results = {"quick": args.quick, "params": {"records": records, "repeats": repeats, "partitions": 2,
                                               "batch_records": 1000, "segment_bytes": seg,
                                               "key_bytes": KEY_BYTES, "value_bytes": VALUE_BYTES}}
    results["environment"] = environment(workdir)
    log(f"writing {records:,} records with Store into {data_dir}")
    layout = write_store(data_dir, records, 2, 1000, seg, progress=log)
    cols = layout.pop("_cols")
    log(f"segments: {fmt_mib(layout['segment_bytes_on_disk'])} in {layout['segment_files']} files "
        f"({layout['write_s']:.1f} s); writing Parquet")
    layout["parquet_bytes"] = write_parquet(parquet_dir, cols)
    del cols
    log("starting Spark (local[2])")
    spark = make_spark()
    try:
        results["environment"]["spark"] = spark_env(spark)
        log("writing JSON lines with Spark")
        layout["json_bytes"] = write_json(spark, parquet_dir, json_dir)
        results["data"] = layout
        dfs = frames(spark, data_dir, parquet_dir, json_dir, records)
        results["queries"] = run_queries(spark, dfs, layout, repeats, log, warm=not args.quick)
    finally:
        spark.stop()
    results["ratios"] = ratios(results["queries"])
    results["targets"] = targets(results["ratios"])
    if args.profile:
        results["profile"] = profile_read(data_dir, log)
    return results


def main(argv=None) -> int:
    return harness.main(parse_args(argv), "spark", run, report_tables)


if __name__ == "__main__":
    sys.exit(main())
