"""Smoke test of the partitions-at-scale bench (``python -m bench.scale
--quick --json``): 1 and 100 partitions, fsync and lazy, every figure; the
Redis column (``appendfsync always``, 1 and 100 streams) and the RF=3 row
(12 partitions on etcd + 3 brokers), every figure a positive number and
every server gone afterwards.

The Redis part needs redis-server and the redis package (bench/peers/
install-servers.sh), the RF=3 part etcd (tools/install-etcd.sh): without
them that part is left out (``--no-redis``, ``--rf3 0``), unless
LOGBROKER_PEERS_REQUIRED=1 or LOGBROKER_ETCD_REQUIRED=1 make it a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import gone

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]
REDIS = bool(shutil.which("redis-server") and importlib.util.find_spec("redis")) \
    or os.environ.get("LOGBROKER_PEERS_REQUIRED") == "1"
ETCD = bool(shutil.which("etcd")) or os.environ.get("LOGBROKER_ETCD_REQUIRED") == "1"


def medians(row: dict) -> dict:
    return {k: v["median"] for k, v in row.items() if isinstance(v, dict)}


def quick(module: str, tmp_path: Path, *extra: str, timeout: float = 300) -> dict:
    """``python -m MODULE --quick --json --dir TMP EXTRA...``'s JSON (exit 0 asserted)."""
    proc = subprocess.run([sys.executable, "-m", module, "--quick", "--json", "--dir",
                           str(tmp_path), *extra], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_quick_scale_bench_emits_json(tmp_path: Path) -> None:
    skip = ([] if REDIS else ["--no-redis"]) + ([] if ETCD else ["--rf3", "0"])
    out = quick("bench.scale", tmp_path, *skip, timeout=600)
    rows = {(r["case"], r["partitions"], r["flush"]): r for r in out["summary"]}
    brokers = {("broker", p, f) for p in (1, 100) for f in ("fsync", "lazy")}
    redis = {("redis", 1, "always"), ("redis", 100, "always")} if REDIS else set()
    rf3 = {("rf3", 12, "fsync")} if ETCD else set()
    assert set(rows) == brokers | redis | rf3
    for key in brokers:
        med = medians(rows[key])
        assert med["produce_rec_s"] > 0 and med["consume_rec_s"] > 0
        assert med["produce_broker_us"] >= 0 and med["rss_mb"] > 0 and med["open_files"] > 0
        assert 0 < med["stop_s"] < 120 and 0 < med["restart_s"] < 300
        assert med["create_worst_rtt_ms"] > 0
        # the calling thread's CPU is part of the process's (its I/O thread does the rest)
        for phase in ("produce", "consume"):
            assert 0 < med[f"{phase}_caller_us"] <= med[f"{phase}_client_us"] * 1.01, (key, phase)
    # /proc counts CPU in 10 ms ticks: one quick case (5,000 records in ~15 ms) may show none
    assert sum(medians(rows[key])["produce_broker_us"] for key in brokers) > 0
    for key in redis:
        med = medians(rows[key])
        assert med["produce_rec_s"] > 0 and med["consume_rec_s"] > 0, key
        assert med["produce_client_us"] > 0 and med["consume_client_us"] > 0, key
        assert med["rss_mb"] > 0 and med["used_memory_mb"] > 0, key
    for key in rf3:
        med = medians(rows[key])
        assert 0 < med["create_s"] <= med["isr_s"] and med["create_worst_rtt_ms"] > 0
        assert med["produce_rec_s"] > 0 and med["consume_rec_s"] > 0
        assert med["produce_broker_us"] > 0 and med["rss_mb"] > 0 and med["open_files"] > 0
        assert 0 < med["stop_s"] < 60
    (done,) = out["rounds"]
    for case in done:
        if case["case"] == "redis":
            assert gone(case["pid"])
        if case["case"] == "rf3":
            assert sum(case["leaders"].values()) == 12 and len(case["leaders"]) == 3
            assert set(case["exit_codes"].values()) == {0}, case["exit_codes"]  # clean exits
            assert case["pids"] and all(gone(pid) for pid in case["pids"].values())
    assert "partitions" in proc.stderr  # progress lines
    from bench.common.harness import tables_markdown
    from bench.scale.__main__ import tables
    md = tables_markdown(tables(out))  # as --render prints them
    assert ("| Redis produce rec/s |" in md) == REDIS and ("| fsync, RF=3 |" in md) == ETCD


def test_quick_phases_bench_times_each_phase_in_order(tmp_path: Path) -> None:
    """``python -m bench.scale.phases --quick --json``: for 1 and 100
    partitions every phase of a consumer's start is timed, in the order
    they happen, and the brokers are gone."""
    out = quick("bench.scale.phases", tmp_path)
    from bench.scale.phases import PHASES, tables
    assert [c["partitions"] for c in out["cases"]] == [1, 100]
    for case in out["cases"]:
        times = [case[ph]["median"] for ph in PHASES[1:]]
        assert 0 < times[0] and times == sorted(times), case  # first fetch, ..., all
        # positions: a ListOffsets answer before the first fetch, or (decision 111) that
        # fetch's answer absorbed
        assert 0 < case["positions"]["median"] <= case["absorbed"]["median"], case
        assert gone(case["pid"])
    from bench.common.harness import tables_markdown
    assert "| 100 |" in tables_markdown(tables(out))


def test_quick_decode_bench_replays_every_record_at_each_count(tmp_path: Path) -> None:
    """``python -m bench.scale.decode --quick --json``: for 1 and 100
    partitions the captured answers replay to every record (the bench
    raises otherwise), 100 partitions come in more batches than one,
    the ratio to one partition is given, and the brokers are gone."""
    out = quick("bench.scale.decode", tmp_path)
    from bench.scale.decode import tables
    one, hundred = out["cases"]
    assert (one["partitions"], hundred["partitions"]) == (1, 100)
    assert 0 < one["batches"] < hundred["batches"] and hundred["records_per_batch"] > 0
    for case in (one, hundred):
        assert 0 < case["take_ms"] <= case["total_ms"] and case["absorb_ms"] >= 0, case
        assert case["x_one"] == one["total_ms"] / case["total_ms"]
        assert gone(case["pid"])
    from bench.common.harness import tables_markdown
    assert "| 100 |" in tables_markdown(tables(out))


def test_quick_parts_bench_times_each_request_kind(tmp_path: Path) -> None:
    """``python -m bench.scale.parts --quick --json``: for 1 and 100
    partitions, the produce (first and later) and the first fetch are
    timed, a request of 100 parts takes longer than one of 1, and the
    brokers are gone."""
    out = quick("bench.scale.parts", tmp_path)
    from bench.scale.parts import tables
    one, hundred = out["cases"]
    assert (one["partitions"], hundred["partitions"]) == (1, 100)
    for kind in ("first_produce", "produce", "fetch"):
        assert 0 < one[kind]["ms"] < hundred[kind]["ms"], kind
        assert hundred[kind]["us_per_part"] == hundred[kind]["ms"] * 1000 / 100
    assert gone(one["pid"]) and gone(hundred["pid"])
    from bench.common.harness import tables_markdown
    assert "| 100 |" in tables_markdown(tables(out))


def test_quick_barrier_bench_times_each_way_to_durability(tmp_path: Path) -> None:
    """``python -m bench.scale.barrier --quick --json``: for 1 and 100
    files, a syncfs, an fdatasync a file and a journal append are each
    timed, fsyncing 100 files takes longer than one, and the work dir is
    left empty."""
    out = quick("bench.scale.barrier", tmp_path)
    from bench.scale.barrier import tables
    one, hundred = out["cases"]
    assert (one["partitions"], hundred["partitions"]) == (1, 100)
    for kind in ("syncfs", "fdatasync", "journal"):
        assert one[kind]["ms"] > 0 and hundred[kind]["ms"] > 0, kind
        assert hundred[kind]["us_per_file"] == pytest.approx(hundred[kind]["ms"] * 1000 / 100)
    assert one["fdatasync"]["ms"] < hundred["fdatasync"]["ms"]
    assert not any(tmp_path.iterdir())
    from bench.common.harness import tables_markdown
    assert "| 100 |" in tables_markdown(tables(out))
