"""The peer benchmark's report (bench/peers/report.py) over hand-made results:
failed phases and failed limits become cells, not crashes; medians, n= marks
and like-for-like ratios are right."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SIZES = {"W1": [10, 1024], "W2": [100, 100], "RT": 5, "scale": [2, 5]}


def phase(records, seconds, cpu=0.1):
    return {"records": records, "seconds": seconds, "cpu_s": cpu, "peak_rss_mib": 30.0,
            "disk_bytes": 4096 + records * 200, "disk_before": 4096}


def run(lb_w1_seconds, redis_ok=True):
    def system(w1):
        return {"W1/produce": phase(10, w1), "W1/consume": phase(10, 1.0),
                "W2/produce": phase(100, 1.0), "W2/consume": phase(100, 1.0),
                "RT/roundtrip": {"records": 5, "p50_ms": 0.1, "p99_ms": 0.2, "cpu_s": 0.01,
                                 "peak_rss_mib": 30.0},
                "scale/produce": {**phase(10, 1.0), "setup_seconds": 0.5}, "scale/consume": phase(10, 1.0)}
    out = {"logbroker": system(lb_w1_seconds), "redis-always": system(2.0)}
    if not redis_ok:
        out["redis-always"]["W1/produce"] = {"error": "TimeoutError: not done within 30 s"}
    return out


def results():
    return {"quick": False, "sizes": SIZES, "systems": ["logbroker", "redis-always"],
            "runs": [run(0.5), run(1.0), run(2.0, redis_ok=False)],
            "limits": [{"seq_write_fsync_1m": {"mb_per_s": 100.0}}, {"error": "OSError: boom"},
                       {"seq_write_fsync_1m": {"mb_per_s": 300.0}}],
            "command": "python -m bench.peers", "elapsed_s": 1.0, "versions": {"x": "1"},
            "environment": {"date": "d", "nproc": 2, "cpu": "c", "ram_gib": 1, "disk": "k",
                            "kernel": "k", "python": "3", "git_commit": "g"}}


@pytest.fixture
def report(monkeypatch):
    """bench.peers.report, imported from the checkout root as ``python -m bench.peers`` does."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.peers.report")


def test_figures_medians_ratios_and_failures(report):
    figs = report.figures(results())
    w1 = figs["logbroker"]["W1 produce rec/s"]
    assert (w1["median"], w1["min"], w1["max"], w1["n"], w1["of"]) == (10.0, 5.0, 20.0, 3, 3)
    redis = figs["redis-always"]["W1 produce rec/s"]
    assert redis["n"] == 2 and redis["median"] == 5.0  # the failed run is left out
    assert report.fmt(redis) == "5 (5–5) n=2"
    assert report.ratio(figs, "redis-always", "W1 produce rec/s") == "2.00x"  # 10 / 5
    assert report.ratio(figs, "redis-always", "RT p50 ms", higher_is_better=False) == "1.00x"
    assert figs["logbroker"]["W1 disk/payload"]["median"] == 10 * 200 / (10 * (16 + 1024))
    lims = report.limit_figures(results())
    assert lims["seq_write_fsync_1m.mb_per_s"]["median"] == 200.0  # the failed run is skipped
    md = report.markdown(results(), ["a.png"])
    assert "median (min–max) of 3 runs" in md and "n=2" in md and "![a.png](a.png)" in md
