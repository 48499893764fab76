"""kill -9 at every step of a compaction swap leaves a valid log with the same
newest value per key (storage/swap.py's protocol, finished or discarded by
the loader). A real child process compacts; the test hook
LOGBROKER_TEST_COMPACTION_PAUSE makes it stop at a step and say so; the
test kills it with SIGKILL there (bounded waits, no sleeps)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.fixtures import read_line
from tests.support.compaction import open_compacted, records_of

from logbroker.storage.swap import PAUSE_ENV

CHILD = r"""
import sys
sys.path.insert(0, {root!r})
from tests.support.compaction import open_compacted, keyed
s = open_compacted({data!r})
if s.topics.get("t") is None:
    s.create_topic("t")
lg = s.get_log("t", 0)
for i in range(200):
    lg.append([keyed([(b"k%d" % (i % 7), b"v%d" % i), (b"j%d" % (i % 5), None if i % 11 == 0 else b"w%d" % i)])])
lg.roll()
print("produced", flush=True)
for _ in range(50):
    s.tick(10_000)
print("finished", flush=True)
"""


def expected() -> dict:
    latest = {}
    for i in range(200):
        latest[b"k%d" % (i % 7)] = b"v%d" % i
        latest[b"j%d" % (i % 5)] = None if i % 11 == 0 else b"w%d" % i
    return latest


def run_child(data, step: "str | None", timeout: float = 60.0) -> str:
    """Run the child until it pauses at ``step`` (then SIGKILL it) or ends;
    returns its last line."""
    env = dict(os.environ)
    env.pop(PAUSE_ENV, None)
    if step:
        env[PAUSE_ENV] = step
    code = CHILD.format(root=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        data=str(data))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        last = ""
        while True:
            line = read_line(proc, timeout)  # bounded: "" when the child ends or stays silent
            if not line:
                break
            last = line.strip()
            if last.startswith("compaction paused"):
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=timeout)
        return last
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=timeout)
        proc.stdout.close()


@pytest.mark.parametrize("step", ["cleaned", "swap", "indexed", "renamed", "done"])
def test_kill9_during_compaction_leaves_a_valid_log(tmp_path, step):
    data = tmp_path / "d"
    assert run_child(data, step) == f"compaction paused at {step}"
    leftovers = sorted(os.listdir(data / "t-0"))
    assert any(n.endswith((".cleaned", ".swap", ".deleted")) for n in leftovers) or step == "done"
    with open_compacted(data) as s:
        lg = s.get_log("t", 0)
        assert lg.offline is None
        got = records_of(lg)
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets)) and lg.log_end_offset == 400
        latest = {}
        for _, key, value in got:
            latest[key] = value
        assert latest == expected()
        assert not [n for n in os.listdir(data / "t-0") if n.endswith((".cleaned", ".swap"))]
    assert run_child(data, None) == "finished"  # and compaction goes on from there
    with open_compacted(data) as s:
        got = records_of(s.get_log("t", 0))
        assert {k: v for _, k, v in got} == expected()
        assert len(got) == len(expected())  # fully compacted (tombstones not yet expired)
