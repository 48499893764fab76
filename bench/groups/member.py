"""A consumer-group member in a process of its own, for the groups bench
(bench/groups/__main__.py) and the schedule test (tests/coordinator/test_group_schedules.py).

    python -m bench.groups.member SPEC_JSON

``SPEC_JSON``: ``{"bootstrap", "group", "topics": [...], "settings": {...}
(Consumer settings, e.g. client_id, session_timeout_ms), "max_seconds"
(the process ends by itself after that: bounded), "gated": bool}``.

It joins the group and polls in a loop. Every line it prints on stdout is
flushed at once and starts with a kind and ``time.monotonic()`` (one clock
for every process of the machine):

- ``ready T`` once subscribed;
- ``assign T t:p,t:p`` / ``revoke T ...`` / ``lost T ...``: its rebalance
  callbacks (its own view of what it owns), in the order it applied them;
- ``first T t:p OFFSET``: the first record of a partition after each
  assignment of it (records themselves are not printed);
- ``count T RECORDS BYTES T_FIRST T_LAST``: every 0.2 s while the totals
  change: records and value+key bytes read since ``go`` (gated) or start,
  and when the first and the last of them arrived;
- ``closed T`` after a clean ``close()``.

Commands on stdin, one per line: ``go`` (gated members start at the end of
their partitions and read nothing until then; ``go`` seeks every owned
partition to its beginning and starts the counters), ``close`` (a clean
leave: ``close()``, then exit). SIGKILL is the crash.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

from logbroker import Consumer


def say(*fields) -> None:
    sys.stdout.write(" ".join(str(f) for f in fields) + "\n")
    sys.stdout.flush()


def parts(partitions) -> str:
    return ",".join(f"{t}:{p}" for t, p in sorted(partitions)) or "-"


class Counter:
    """Records and bytes read, with the arrival of the first and the last."""

    def __init__(self) -> None:
        self.records = self.bytes = 0
        self.first = self.last = 0.0
        self.printed = -1
        self.next_print = 0.0

    def add(self, records: list) -> None:
        now = time.monotonic()
        if not self.records:
            self.first = now
        self.records += len(records)
        self.bytes += sum(len(r.value or b"") + len(r.key or b"") for r in records)
        self.last = now

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if (force or now >= self.next_print) and self.records != self.printed:
            say("count", now, self.records, self.bytes, self.first, self.last)
            self.printed, self.next_print = self.records, now + 0.2


class Member:
    """The consumer, what it owns in its own view, and what it still has to
    see a first record of."""

    def __init__(self, spec: dict) -> None:
        settings = dict(spec.get("settings", {}))
        if spec.get("gated"):
            settings.update(auto_offset_reset="latest", enable_auto_commit=False)
        self.consumer = Consumer(spec["bootstrap"], group=spec["group"], **settings)
        self.fresh: set = set()  # assigned partitions without a record since
        self.counter = Counter()
        self.consumer.subscribe(spec["topics"], on_assign=self.on_assign,
                                on_revoke=lambda ps: self.dropped("revoke", ps),
                                on_lost=lambda ps: self.dropped("lost", ps))

    def on_assign(self, partitions) -> None:
        self.fresh |= set(partitions)
        say("assign", time.monotonic(), parts(partitions))

    def dropped(self, kind: str, partitions) -> None:
        self.fresh -= set(partitions)
        say(kind, time.monotonic(), parts(partitions))

    def poll(self, counting: bool) -> None:
        records = self.consumer.poll(0.05)
        for r in records:
            if (r.topic, r.partition) in self.fresh:
                self.fresh.discard((r.topic, r.partition))
                say("first", time.monotonic(), f"{r.topic}:{r.partition}", r.offset)
        if counting and records:
            self.counter.add(records)
        if counting:
            self.counter.report()


def commands() -> queue.Queue:
    """Lines of stdin, read by a daemon thread (EOF: ``close``)."""
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            q.put(line.strip())
        q.put("close")

    threading.Thread(target=read, daemon=True).start()
    return q


def main() -> int:
    spec = json.loads(sys.argv[1])
    member = Member(spec)
    counting = not spec.get("gated")
    say("ready", time.monotonic())
    inbox = commands()
    deadline = time.monotonic() + float(spec.get("max_seconds", 120))
    try:
        while time.monotonic() < deadline:
            try:
                command = inbox.get_nowait()
            except queue.Empty:
                command = ""
            if command == "close":
                break
            if command == "go":
                member.consumer.seek_to_beginning()
                member.counter, counting = Counter(), True
            member.poll(counting)
    finally:
        member.counter.report(force=True)
        member.consumer.close()
        say("closed", time.monotonic())
    return 0


if __name__ == "__main__":
    sys.exit(main())
