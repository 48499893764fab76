"""The parent's side of group member processes (bench/groups/member.py), a
steady producer thread, and what a group's coordinator says about it; for
bench/groups/__main__.py and tests/coordinator/test_group_schedules.py.

``MemberProc`` starts ``python -m bench.groups.member`` (with
``PR_SET_PDEATHSIG``: it dies with its parent), reads its lines in a daemon
thread, and answers from them: its own view of what it owns (``view``), the
first record of each partition after a time (``firsts_after``), its
counters (``count``). It is stopped by its PID only: ``kill`` (SIGKILL, the
crash), ``close`` (a clean leave through stdin; SIGKILL if it has not
exited within the timeout). Every wait here is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from bench import ROOT
from bench.common.procs import spawn


def parse_parts(text: str) -> set:
    """``t:p,t:p`` (or ``-``) as ``{(t, p)}``."""
    if text == "-":
        return set()
    return {(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1])) for tp in text.split(",")}


class MemberProc:
    """One member process; ``client_id`` names it in the coordinator's view."""

    def __init__(self, spec: dict, log_path: str) -> None:
        self.spec = spec
        self.client_id = spec["settings"]["client_id"]
        self.lines: list = []  # (kind, time, rest...) as printed
        with open(log_path, "ab") as log:
            self.proc = spawn([sys.executable, "-m", "bench.groups.member", json.dumps(spec)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                              text=True, cwd=str(ROOT))
        self.pid = self.proc.pid
        self.killed_at: "float | None" = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, t, *rest = line.split()
            self.lines.append((kind, float(t), *rest))

    # -- what it printed ------------------------------------------------------------------
    def ready(self) -> bool:
        return any(ln[0] == "ready" for ln in list(self.lines))

    def view(self) -> set:
        """What it owns in its own view: its assign / revoke / lost lines replayed."""
        owned: set = set()
        for kind, _, *rest in list(self.lines):
            if kind == "assign":
                owned |= parse_parts(rest[0])
            elif kind in ("revoke", "lost"):
                owned -= parse_parts(rest[0])
        return owned

    def events(self) -> list:
        """``(kind, time, {(t, p)})`` of its assign / revoke / lost lines."""
        return [(kind, t, parse_parts(rest[0])) for kind, t, *rest in list(self.lines)
                if kind in ("assign", "revoke", "lost")]

    def firsts_after(self, since: float) -> dict:
        """``{(t, p): time}``: the first record of a partition read after ``since``."""
        out: dict = {}
        for kind, t, *rest in list(self.lines):
            if kind == "first" and t > since:
                out.setdefault(parse_parts(rest[0]).pop(), t)
        return out

    def assigned_after(self, since: float) -> dict:
        """``{(t, p): time}``: when it was first assigned a partition after ``since``."""
        out: dict = {}
        for kind, t, parts in self.events():
            if kind == "assign" and t > since:
                for tp in parts:
                    out.setdefault(tp, t)
        return out

    def count(self) -> tuple:
        """(records, bytes, first arrival, last arrival) of its last ``count`` line."""
        last = next((ln for ln in reversed(list(self.lines)) if ln[0] == "count"), None)
        if last is None:
            return 0, 0, 0.0, 0.0
        return int(last[2]), int(last[3]), float(last[4]), float(last[5])

    # -- commands ---------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tell(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> float:
        """SIGKILL to its PID (a crash); returns when it was sent (monotonic)."""
        self.killed_at = time.monotonic()
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._finish()
        return self.killed_at

    def close(self, timeout: float = 15.0) -> None:
        """A clean leave (``close()`` in the member), then its exit; SIGKILL
        to its PID if it has not exited within ``timeout`` s."""
        if self.alive():
            try:
                self.tell("close")
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                if self.proc.poll() is None:
                    os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._finish()

    def _finish(self) -> None:
        self._reader.join(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class Feeder:
    """A producer thread: ``per_tick`` records of ``value_bytes`` to every
    partition of ``topic`` every ``interval`` s, until ``stop`` or
    ``max_seconds`` or ``max_records`` (bounded)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, interval: float = 0.005,
                 value_bytes: int = 100, max_seconds: float = 600, max_records: int = 10**7) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.interval, self.value = interval, b"v" * value_bytes
        self.max_seconds, self.max_records = max_seconds, max_records
        self.sent = 0
        self.error: "BaseException | None" = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Feeder":
        self._thread.start()
        return self

    def _run(self) -> None:
        from logbroker import Producer

        deadline = time.monotonic() + self.max_seconds
        try:
            with Producer(self.bootstrap, linger_ms=2, request_timeout_ms=10_000) as p:
                while not self._stop.is_set() and self.sent < self.max_records \
                        and time.monotonic() < deadline:
                    for part in range(self.partitions):
                        p.send(self.topic, self.value, partition=part)
                    self.sent += self.partitions
                    self._stop.wait(self.interval)
                p.flush(30)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> int:
        """Stop and join (bounded); the records sent. Raises the thread's error."""
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise RuntimeError(f"the feeder failed: {self.error!r}") from self.error
        return self.sent


def describe(admin, group: str):
    """The group's ``GroupDescription``, or None while the coordinator has none."""
    from logbroker.errors import LogbrokerError

    try:
        return admin.describe_groups([group]).get(group)
    except LogbrokerError:
        return None


def settled(desc, members: list, partitions: set) -> bool:
    """The group is Stable with exactly ``members`` (MemberProc or alike:
    ``client_id``, ``view()``), every partition owned once, the shares
    within one of each other, and each member's own view equal to the
    coordinator's."""
    if desc is None or desc.state != "Stable":
        return False
    theirs = {m.client_id: set(m.partitions) for m in desc.members}
    if len(theirs) != len(desc.members) or set(theirs) != {m.client_id for m in members}:
        return False
    shares = list(theirs.values())
    if sum(map(len, shares)) != len(partitions) or set().union(*shares) != partitions:
        return False
    if max(map(len, shares)) - min(map(len, shares)) > 1:
        return False
    return all(m.view() == theirs[m.client_id] for m in members)
