"""kill -9 durability of the storage engine: a child appends durably from two
threads and is SIGKILLed at random moments; after every restart each
acknowledged record is present exactly once at its acknowledged offset and
offsets are contiguous."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest

from tests.support.fixtures import open_store, values_of

CHILD = os.path.join(os.path.dirname(__file__), "..", "support", "children", "appender.py")


def one_round(data_dir, round_no: int, rng: random.Random, acked: dict[int, bytes]) -> None:
    proc = subprocess.Popen([sys.executable, CHILD, str(data_dir), str(round_no), "2", "20"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        wanted = rng.randint(1, 60)
        for _ in range(wanted):
            line = proc.stdout.readline()
            if not line:
                break
            offset, value = line.split()
            acked[int(offset)] = value.encode()
        proc.send_signal(signal.SIGKILL)
        # acks already written to the pipe before the kill count too
        for line in proc.stdout:
            offset, value = line.split()
            acked[int(offset)] = value.encode()
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()


def check(data_dir, acked: dict[int, bytes]) -> None:
    s = open_store(data_dir, segment_bytes=4096)
    try:
        log = s.get_log("k", 0)
        assert log.offline is None, log.offline
        values = values_of(log)  # contiguous from 0 by construction of values_of
        assert len(values) == log.log_end_offset
        for offset, value in acked.items():
            assert offset < len(values), f"acknowledged offset {offset} lost"
            assert values[offset] == value, f"offset {offset}: {values[offset]!r} != {value!r}"
        assert len(set(values)) == len(values), "a record is present twice"
    finally:
        s.close()


def run_rounds(tmp_path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    acked: dict[int, bytes] = {}
    for r in range(rounds):
        one_round(tmp_path, r, rng, acked)
        check(tmp_path, acked)
    assert len(acked) >= rounds


def test_kill9_keeps_every_acknowledged_record(tmp_path):
    run_rounds(tmp_path, rounds=8, seed=1)


@pytest.mark.slow
def test_kill9_soak(tmp_path):
    run_rounds(tmp_path, rounds=100, seed=2)
