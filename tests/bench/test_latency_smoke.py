"""Smoke test of the round-trip latency bench (``python -m bench.latency
--quick --json``): real brokers (lazy and fsync), the raw socket, the sync
and asyncio producers, the stamped producer's split and, where strace is
installed, the broker's syscalls per send; one round of 300 sends (~15 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import gone

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]
STAGES = {"pingpong", "fdatasync", "fdatasync_prealloc", "raw_lazy", "raw_fsync", "sync_lazy",
          "sync_fsync", "aio_fsync", "split_fsync"}
DERIVED = {"network", "broker_processing", "fsync_path", "fdatasync_floor", "fdatasync_prealloc",
           "client_fsync", "client_lazy", "split_send_call", "split_to_callback", "split_callback",
           "split_to_result", "split_sum", "asyncio_vs_sync"}


def test_quick_latency_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.latency", "--quick", "--json", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    assert {"environment", "params", "rounds", "summary", "derived", "syscalls", "elapsed_s"} <= set(out)
    assert out["quick"] is True and len(out["rounds"]) == 1
    (rnd,) = out["rounds"]
    assert set(rnd) == STAGES
    for name, stage in rnd.items():
        assert stage["n"] == out["params"]["sends"], name
        assert 0 < stage["p50_ms"] <= stage["p99_ms"], name
        if "broker" in stage:  # a fresh broker, stopped cleanly by SIGTERM
            assert stage["broker_exit_code"] == 0 and gone(stage["broker_pid"]), name
            assert stage["client_cpu_us"] > 0 and stage["broker"]["ctx"] > 0, name
    split = rnd["split_fsync"]["split"]
    assert split["send_call"]["p50_ms"] > 0 and split["to_callback"]["p50_ms"] > 0
    s = out["summary"]
    assert all(s[name]["p50_ms"]["median"] > 0 for name in STAGES)
    # the broker's durable round trip cannot beat half the disk's own fdatasync
    assert s["raw_fsync"]["p50_ms"]["median"] >= s["fdatasync"]["p50_ms"]["median"] * 0.5
    derived = {d["key"]: d for d in out["derived"]}
    assert DERIVED <= set(derived)
    assert derived["network"]["ms"]["median"] > 0
    calls = out["syscalls"]
    if "per_send" in calls:
        assert calls["sends"] == out["params"]["strace_sends"]
        assert calls["per_send"].get("fdatasync", 0) >= 0.5, calls
    else:
        assert calls["skipped"]
    assert "Where the time goes" in proc.stderr and "Durable 1 KiB round trip" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
