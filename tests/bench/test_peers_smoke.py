"""Smoke test of the peer benchmark (``python -m bench.peers --quick``): every
system, every workload (the streaming ones, the windows of 1,000 and both
round trips) and every machine limit runs to completion on real servers, and
the report and charts come out (marker ``bench``: ``make test-bench``). The
full run is not part of CI.

Needs redis-server, nats-server and rabbitmq-server (``make test`` installs
them as root via bench/peers/install-servers.sh). Without them the test is
skipped, unless LOGBROKER_PEERS_REQUIRED=1 (set by .ci/run) makes that a
failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVERS = {"redis-server": shutil.which("redis-server"), "nats-server": shutil.which("nats-server"),
           "rabbitmq-server": os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server") or None}
MISSING = [name for name, found in SERVERS.items() if not found]
CLIENTS = [m for m in ("redis", "hiredis", "nats", "rstream", "matplotlib")
           if importlib.util.find_spec(m) is None]

pytestmark = [
    pytest.mark.bench,  # make test-bench (-m bench), as the other benches' smoke runs
    pytest.mark.skipif(
        bool(MISSING or CLIENTS) and os.environ.get("LOGBROKER_PEERS_REQUIRED") != "1",
        reason=f"peer benchmark needs {', '.join(MISSING + CLIENTS)} (make test installs them "
               "as root)")]


def test_quick_peers_bench_runs_every_system_and_limit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    raw = tmp_path / "raw.json"
    proc = subprocess.run([sys.executable, "-m", "bench.peers", "--quick", "--no-install", "--out", str(out),
                           "--json", str(raw)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(raw.read_text())
    sizes = results["sizes"]
    assert sizes["W1"] == [2000, 1024] and sizes["W2"] == [10000, 100] and sizes["RT"] == sizes["RT1k"] == 100
    assert sizes["window"] == 1000  # not scaled by --quick
    assert len(results["runs"]) == 1 and len(results["limits"]) == 1
    run = results["runs"][0]
    assert set(run) == {"logbroker", "logbroker-lazy", "redis-always", "redis-everysec", "nats", "rabbitmq"}
    expect = {"W1": 2000, "W2": 10000, "scale": sizes["scale"][0] * sizes["scale"][1]}
    for system, phases in run.items():
        assert set(phases) == {"W1/produce", "W1/consume", "W1/window", "W2/produce", "W2/consume", "W2/window",
                               "RT/roundtrip", "RT1k/roundtrip", "scale/produce", "scale/consume"}, system
        for phase, res in phases.items():
            assert "error" not in res, (system, phase, res)
            wl = phase.split("/")[0]
            if wl in expect:
                assert res["records"] == expect[wl], (system, phase, res)
                assert res["seconds"] > 0 and res["cpu_s"] >= 0 and res["peak_rss_mib"] > 0
            else:
                assert res["records"] == 100 and 0 < res["p50_ms"] <= res["p99_ms"]
        for wl in ("W1", "W2"):  # ack latency under load, sampled
            res = phases[f"{wl}/produce"]
            assert res["ack_samples"] > 0 and 0 < res["ack_p50_ms"] <= res["ack_p99_ms"], (system, res)
            res = phases[f"{wl}/window"]  # windows of 1,000, each waited for
            assert res["windows"] == expect[wl] // 1000, (system, res)
            assert 0 < res["window_p50_ms"] <= res["window_p99_ms"] <= res["seconds"] * 1000, (system, res)
        produced = phases["W1/produce"]["disk_bytes"] - phases["W1/produce"]["disk_before"]
        assert produced >= 2000 * 1024 * 0.9, (system, produced)  # the payload reached the disk
    lim = results["limits"][0]
    assert {"seq_write_fsync_64k", "seq_write_fsync_1m", "append_4k_fdatasync", "tcp_blocking",
            "tcp_asyncio", "sendfile"} <= set(lim)
    assert lim["seq_write_fsync_1m"]["mb_per_s"] > 0 and lim["sendfile"]["gb_per_s"] > 0
    md = (out / "peers.md").read_text()
    for title in ("**W1:", "**W2:", "**Windows of 1,000 (send 1,000, wait for every ack, next)**", "**RT:",
                  "**RT1k:", "**Scale:", "**The machine's limits", "logbroker against"):
        assert title in md
    assert "failed" not in md
    for png in ("peers-throughput.png", "peers-latency.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
