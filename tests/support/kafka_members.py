"""Group members of the Kafka groups tests, each polling in its own
thread (a join waits for every member, so two members cannot be polled
from one thread): a kafka-python KafkaConsumer or our Consumer."""

from __future__ import annotations

import threading
import time

from tests.support.kafka_raw import WAIT


class Member(threading.Thread):
    """A group member polling in its own thread: ``got`` its records'
    (partition, value), ``owned`` its latest assignment; ``stop()`` commits
    what it read and closes (leaving the group)."""

    def __init__(self, poll, assignment, commit, close, begin=lambda: None) -> None:
        super().__init__(daemon=True)
        self._begin = begin
        self._poll, self._assignment, self._commit, self._close = poll, assignment, commit, close
        self.got: list = []
        self.owned: set = set()
        self.error: "BaseException | None" = None
        self._stop_flag = threading.Event()
        self.commit_on_stop = True

    def run(self) -> None:
        try:
            self._begin()
            while not self._stop_flag.is_set():
                self.got += self._poll()
                self.owned = self._assignment()
            if self.commit_on_stop:
                self._commit()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self._close()

    def stop(self, commit: bool = True) -> None:
        self.commit_on_stop = commit
        self._stop_flag.set()
        self.join(WAIT)
        assert not self.is_alive() and self.error is None, self.error


def kafka_member(c) -> Member:
    """A kafka-python KafkaConsumer, subscribed already."""
    def poll():
        return [(r.partition, r.value) for rs in c.poll(timeout_ms=100).values() for r in rs]
    return Member(poll, lambda: {tp.partition for tp in c.assignment()}, c.commit, c.close)


def our_member(c, topic: str) -> Member:
    """Our Consumer, subscribing to ``topic`` once started."""
    def poll():
        return [(r.partition, r.value) for r in c.poll(0.1)]
    return Member(poll, lambda: {p for _t, p in c.assignment()}, c.commit, c.close,
                  lambda: c.subscribe([topic]))


def until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def split(a: Member, b: Member) -> bool:
    """Each member owns one of the two partitions (both in the same generation)."""
    return len(a.owned) == len(b.owned) == 1 and a.owned | b.owned == {0, 1}


def confluent_member(c, topic: str) -> Member:
    """A confluent-kafka Consumer, subscribing to ``topic`` with a commit
    before its partitions are revoked (what it read is not read again by the
    member that gets them next); a commit of nothing read is no error."""
    from confluent_kafka import KafkaError, KafkaException

    def poll():
        return [(m.partition(), m.value()) for m in c.consume(10, 0.1) if m.error() is None]

    def commit():
        try:
            c.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise
    c.subscribe([topic], on_revoke=lambda _c, _parts: commit())
    return Member(poll, lambda: {tp.partition for tp in c.assignment()}, commit, c.close)


def aio_member(make, topic: str) -> Member:
    """An aiokafka consumer made by ``make()`` on the member's own event
    loop, in its thread (the group's heartbeats run while it polls),
    subscribing to ``topic`` with a commit before its partitions are revoked."""
    import asyncio

    from aiokafka import ConsumerRebalanceListener

    loop, held = asyncio.new_event_loop(), {}

    class CommitOnRevoke(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            await held["c"].commit()

        async def on_partitions_assigned(self, assigned):
            pass

    def begin():
        asyncio.set_event_loop(loop)

        async def started():
            c = make()  # made inside the loop, as aiokafka wants
            c.subscribe([topic], listener=CommitOnRevoke())
            await c.start()
            return c
        held["c"] = loop.run_until_complete(started())

    def poll():
        batches = loop.run_until_complete(held["c"].getmany(timeout_ms=100))
        return [(r.partition, r.value) for rs in batches.values() for r in rs]

    def close():
        if "c" in held:
            loop.run_until_complete(held["c"].stop())
        loop.close()
    return Member(poll, lambda: {tp.partition for tp in held["c"].assignment()},
                  lambda: loop.run_until_complete(held["c"].commit()), close, begin)


class KcatMember:
    """``kcat -G`` as a group member (a process): ``got`` its records'
    (partition, value) from stdout, ``owned`` its partitions from kcat's
    "rebalanced ... assigned:" lines on stderr; ``stop()`` is a SIGTERM
    (kcat closes the consumer: it commits and leaves)."""

    def __init__(self, kcat: str, bootstrap: str, group: str, topic: str) -> None:
        import re
        import subprocess

        self.got: list = []
        self.owned: set = set()
        self.stderr: list = []
        self.proc = subprocess.Popen(
            [kcat, "-b", bootstrap, "-G", group, "-u", "-f", "%p %s\\n",
             "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=3000",
             "-X", "heartbeat.interval.ms=100", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def out() -> None:
            for line in self.proc.stdout:
                p, value = line.rstrip("\n").split(" ", 1)
                self.got.append((int(p), value.encode()))

        def err() -> None:
            for line in self.proc.stderr:
                self.stderr.append(line)
                if "rebalanced" in line and "assigned:" in line:
                    self.owned = {int(p) for p in re.findall(r"\[(\d+)\]", line)}
                elif "rebalanced" in line and "revoked:" in line:
                    self.owned = set()
        self._readers = [threading.Thread(target=f, daemon=True) for f in (out, err)]
        for t in self._readers:
            t.start()

    def stop(self) -> int:
        self.proc.terminate()
        code = self.proc.wait(WAIT)
        for t in self._readers:
            t.join(WAIT)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code
