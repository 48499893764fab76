"""Exactly-once under faults (marker ``long``): a consume-transform-produce
processor on a 3-broker cluster while kill -9 hits the processor, a
partition leader and the transaction coordinator.

etcd + 3 brokers; topics ``eos-in`` and ``eos-out`` of 3 partitions,
replication factor 3, min_insync_replicas 2; the offsets and transaction
state topics replicated 3 times. The processor
(tests/support/children/eos_processor.py) reads ``eos-in`` read_committed
and writes one ``eos-out`` record per input record in one transaction per
poll, committing its input offsets in the same transaction (each one
waits 0-300 ms with its records written before it commits, so kills land
mid-transaction and leave aborted records behind). A feeder
appends input before every fault, so the run lasts as long as the faults.
A seeded schedule of faults, one at a time: ``processor`` (kill -9, a new
one started at once with the same transactional id: it fences the dead
one and aborts what it left open), ``leader`` (kill -9 the leader of a
random partition of either topic, restarted after 0.2-2 s), ``coordinator``
(kill -9 the broker coordinating the transactional id, restarted after
0.2-2 s). After each fault the run waits for the full ISR everywhere and for
the processor to commit again (liveness, bounded).

At the end: no more input; the processor catches up until the group's
committed offsets reach the input's ends; it is killed and a new producer
with its transactional id is initialised (nothing left open); then every
``eos-out`` partition is read from its leader with read_uncommitted, batch
by batch (the ground truth: producer ids, markers), and by our Consumer
with read_committed, and ``eos_checker.check`` must report 0 duplicates,
0 losses, 0 aborted reads and nothing else.

Environment: ``LOGBROKER_TXN_FAULTS`` (default 50), ``LOGBROKER_TXN_SEED``
(default: random, printed). Run:
``.venv/bin/pytest -m long -s tests/cluster/test_txn_nemesis.py``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from logbroker import Consumer, Producer
from logbroker.protocol import messages as m
from logbroker.records import decode_batch, scan_batches
from logbroker.records import format as fmt
from logbroker.records.control import read_marker
from tests.support.cluster import Cluster, EtcdProcess, require_etcd
from tests.support.eos_checker import Batch, check
from tests.support.fixtures import wait_until

pytestmark = pytest.mark.long
IN, OUT, GROUP, TXN_ID = "eos-in", "eos-out", "eos-group", "eos-processor"
PARTITIONS = 3
FEED = 40  # input records per partition appended before each fault
PAUSE_MS = 300  # each transaction waits 0..300 ms with its records written (kills land there)
PROC = os.path.join(os.path.dirname(__file__), "..", "support", "children", "eos_processor.py")
KINDS, WEIGHTS = ("processor", "leader", "coordinator"), (2, 2, 1)


class Processor:
    """The processor's process: its output lines kept, restarted on demand."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.proc: "subprocess.Popen | None" = None
        self.lines: list = []
        self.started = 0

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, PROC, self.bootstrap, IN, OUT, GROUP, TXN_ID, str(PARTITIONS),
             str(PAUSE_MS)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.started += 1
        lines, proc = self.lines, self.proc
        self.reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        self.reader.start()

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)  # the pipe ends with the process
        self.proc.stdout.close()

    def ensure(self) -> None:
        """A processor runs (a new one if the last exited on its own)."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.start()

    def commits(self) -> int:
        return sum(1 for ln in list(self.lines) if ln.startswith("commit"))

    def tail(self, n: int = 15) -> str:
        return "".join(list(self.lines)[-n:])

    def committed_since(self, before: int) -> bool:
        """A commit after the ``before``-th (restarting a processor that exited)."""
        self.ensure()
        return self.commits() > before


def _coordinator(c: Cluster) -> int:
    for i in c.live():
        try:
            resp = c.call(i, m.FindCoordinator(group=TXN_ID, key_type=1))
        except (OSError, AssertionError, TimeoutError):
            continue
        if not resp.error:
            return resp.broker_id
    return -1


def _settled(c: Cluster, topics) -> bool:
    try:
        for topic in topics:
            for p in range(PARTITIONS):
                leader, _, replicas, isr = c.state(topic, p)
                if leader < 0 or sorted(isr) != sorted(replicas):
                    return False
    except (AssertionError, OSError, TimeoutError):
        return False
    return True


def _feed(producer: Producer, seq: list) -> None:
    handles = []
    for p in range(PARTITIONS):
        for _ in range(FEED):
            handles.append(producer.send(IN, b"in-%d-%06d" % (p, seq[p]), partition=p))
            seq[p] += 1
    for h in handles:
        h.result(timeout=120)


def _raw(c: Cluster, leader: int, partition: int) -> list:
    """Every batch of ``OUT``-``partition`` below the HW, as ``Batch`` values."""
    out, offset = [], 0
    while True:
        resp = c.call(leader, m.Fetch(max_wait_ms=0, parts=((OUT, partition, offset, 1 << 20),)))
        part, data = resp.parts[0], bytes(resp.payload[0])
        assert part[2] == 0, part
        if not data:
            return out
        for pos, h in scan_batches(data):
            whole = data[pos:pos + h.size]
            transactional, control = fmt.txn_flags(h.magic, h.attributes)
            if control:
                commit, _ = read_marker(whole)
                out.append(Batch(h.producer_id, True, True, "commit" if commit else "abort"))
            else:
                recs = tuple((r.offset, r.value) for r in decode_batch(whole).records())
                out.append(Batch(h.producer_id, transactional, records=recs))
            offset = h.next_offset


def _origin(value: bytes):
    try:
        p, off, _ = value.split(b":", 2)
        return int(p), int(off)
    except ValueError:
        return None


def test_every_input_record_is_output_exactly_once_under_kills(tmp_path):
    require_etcd()
    faults = int(os.environ.get("LOGBROKER_TXN_FAULTS", "50"))
    seed = int(os.environ.get("LOGBROKER_TXN_SEED", str(random.randrange(1 << 30))))
    print(f"seed {seed}, {faults} faults")
    rng = random.Random(seed)
    with EtcdProcess(tmp_path / "etcd") as etcd:
        c = Cluster(tmp_path, etcd.url, n=3, config={
            "offsets_topic_replication_factor": 3, "transaction_state_replication_factor": 3})
        proc = Processor("")
        try:
            _run(c, proc, rng, faults)
        except BaseException:
            print(f"the processor's last lines:\n{proc.tail()}")
            raise
        finally:
            proc.kill()
            c.close()


def _run(c: Cluster, proc: Processor, rng, faults: int) -> None:
    c.start()
    proc.bootstrap = c.bootstrap
    for topic in (IN, OUT):
        c.create(topic, partitions=PARTITIONS, replication_factor=3, min_insync_replicas=2)
    seq = [0] * PARTITIONS
    feeder = Producer(c.bootstrap, acks="all", idempotent=True, request_timeout_ms=5_000,
                      delivery_timeout_ms=120_000)
    try:
        _feed(feeder, seq)
        proc.start()
        wait_until(lambda: proc.commits() > 0, 60, "the processor's first commit")
        counts = dict.fromkeys(KINDS, 0)
        for n in range(faults):
            _feed(feeder, seq)
            kind = rng.choices(KINDS, WEIGHTS)[0]
            counts[kind] += 1
            before = proc.commits()
            if kind == "processor":
                time.sleep(rng.uniform(0.05, 1.0))  # mid-transaction, often
                proc.kill()
                proc.start()
            else:
                victim = _coordinator(c) if kind == "coordinator" else \
                    c.state(rng.choice((IN, OUT)), rng.randrange(PARTITIONS))[0]
                if victim < 0:
                    victim = rng.choice(c.live())
                c.brokers[victim].kill()
                time.sleep(rng.uniform(0.2, 2.0))
                c.brokers[victim].start()
            wait_until(lambda: _settled(c, (IN, OUT)), 60, f"fault {n} ({kind}): full ISR")
            proc.ensure()
            wait_until(lambda: proc.committed_since(before), 90,
                       f"fault {n} ({kind}): the processor commits again")
            print(f"fault {n}: {kind}; {proc.commits()} commits, {proc.started} processors")
        ends = {p: seq[p] for p in range(PARTITIONS)}
    finally:
        feeder.close()
    with Consumer(c.bootstrap, group=GROUP, enable_auto_commit=False) as reader:
        def caught_up() -> bool:
            proc.ensure()
            done = [reader.committed(IN, p) for p in range(PARTITIONS)]
            return all(done[p] is not None and done[p] >= ends[p] for p in range(PARTITIONS))
        wait_until(caught_up, 180, "the processor consumed every input record")
        committed = {p: reader.committed(IN, p) for p in range(PARTITIONS)}
    proc.kill()
    with Producer(c.bootstrap, transactional_id=TXN_ID, request_timeout_ms=10_000) as last:
        last.init_transactions()  # whatever the last processor left open is aborted now
    wait_until(lambda: _settled(c, (IN, OUT)), 60, "full ISR at the end")
    raw = {p: _raw(c, c.state(OUT, p)[0], p) for p in range(PARTITIONS)}
    seen = _read_committed(c)
    inputs = {p: list(range(ends[p])) for p in range(PARTITIONS)}
    rep = check(inputs, committed, raw, seen, _origin)
    print(f"{faults} faults ({counts}), {proc.started} processors: {rep.summary()}")
    assert rep.ok, rep.anomalies
    assert rep.counts["committed_outputs"] == sum(ends.values())
    assert rep.counts["aborted_records"] > 0 or faults < 10  # the read_committed check had teeth


def _read_committed(c: Cluster) -> list:
    """(partition, offset) of every record a read_committed Consumer returns."""
    seen: list = []
    with Consumer(c.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                  request_timeout_ms=10_000) as consumer:
        parts = [(OUT, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning(parts)
        ends = {p: _end(c, p) for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120
        while any(consumer.position(OUT, p) < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, "the read_committed consumer did not catch up"
            seen.extend((r.partition, r.offset) for r in consumer.poll(0.5))
    return seen


def _end(c: Cluster, partition: int) -> int:
    """The partition's last stable offset (= its end: no transaction is open)."""
    leader = c.state(OUT, partition)[0]
    resp = c.call(leader, m.ListOffsets(parts=((OUT, partition, -1),), isolation=1))
    return resp.parts[0][4]
