"""The peer benchmark's report (bench/peers/report.py) over hand-made results:
failed phases and failed limits become cells, not crashes; medians, n= marks
and like-for-like ratios are right, the windowed produce (and its ratio to
the same run's streaming produce) and the 1 KiB round trip included."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SIZES = {"W1": [10, 1024], "W2": [100, 100], "RT": 5, "RT1k": 5, "scale": [2, 5], "window": 5}


def phase(records, seconds, cpu=0.1):
    return {"records": records, "seconds": seconds, "cpu_s": cpu, "peak_rss_mib": 30.0,
            "disk_bytes": 4096 + records * 200, "disk_before": 4096}


def window(records, seconds, p50):
    return {**phase(records, seconds), "windows": records // 5, "window_p50_ms": p50, "window_p99_ms": 2 * p50}


def roundtrip(p50):
    return {"records": 5, "p50_ms": p50, "p99_ms": 2 * p50, "cpu_s": 0.01, "peak_rss_mib": 30.0}


def run(lb_w1_seconds, redis_ok=True):
    def system(w1, rt1k):
        return {"W1/produce": phase(10, w1), "W1/consume": phase(10, 1.0), "W1/window": window(10, 2 * w1, 3.0),
                "W2/produce": phase(100, 1.0), "W2/consume": phase(100, 1.0), "W2/window": window(100, 4.0, 1.0),
                "RT/roundtrip": roundtrip(0.1), "RT1k/roundtrip": roundtrip(rt1k),
                "scale/produce": {**phase(10, 1.0), "setup_seconds": 0.5}, "scale/consume": phase(10, 1.0)}
    out = {"logbroker": system(lb_w1_seconds, 0.2), "redis-always": system(2.0, 0.1)}
    if not redis_ok:
        out["redis-always"]["W1/produce"] = {"error": "TimeoutError: not done within 30 s"}
        out["redis-always"]["W2/window"] = {"error": "TimeoutError: not done within 30 s"}
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


def test_windows_and_1k_roundtrip(report):
    figs = report.figures(results())
    lb, redis = figs["logbroker"], figs["redis-always"]
    assert lb["W1 window rec/s"]["median"] == 5.0  # 10 records in 2 x 0.5, 2 x 1, 2 x 2 s
    assert lb["W1 window / stream"]["median"] == 0.5  # per run: windowed ÷ that run's streaming
    assert redis["W1 window / stream"]["n"] == 2  # no streaming figure in the failed run: no ratio
    assert lb["W2 window rec/s"]["median"] == 25.0 and redis["W2 window rec/s"]["n"] == 2
    assert lb["W2 window / stream"]["median"] == 0.25
    assert lb["W1 window p50 ms"]["median"] == 3.0 and lb["W1 window p99 ms"]["median"] == 6.0
    assert report.ratio(figs, "redis-always", "W1 window rec/s") == "2.00x"  # 5 / 2.5
    assert report.ratio(figs, "redis-always", "RT1k p50 ms", higher_is_better=False) == "0.50x"
    assert (lb["RT p50 ms"]["median"], lb["RT1k p50 ms"]["median"]) == (0.1, 0.2)
    table = report.window_table(figs, ["logbroker", "redis-always"])
    head, _, lb_row, redis_row = table.splitlines()
    assert "W1 window ÷ own streaming W1 produce" in head and "logbroker ÷ this, W2 window" in head
    assert lb_row.split(" | ")[2:6] == ["5 (2–10)", "0.0 (0.0–0.0)", "0.50 (0.50–0.50)",
                                        "3.00 (3.00–3.00) / 6.00 (6.00–6.00)"]
    assert redis_row.endswith("| 2.00x | 1.00x |")
    md = report.markdown(results(), [])
    assert "**Windows of 5 (send 5, wait for every ack, next)**" in md
    assert "**RT1k: single-record round trip, 1 KiB values (5 awaited sends)**" in md
