"""Partition moves under broker kills (marker ``long``): etcd + 3 real
brokers, a topic of 3 partitions (replication factor 2), the reassignment
throttle at 1 MB/s, one idempotent acks=all producer thread per partition
sending numbered 200-byte values all along (about 40 KB/s each: a move
catches up only while the throttle outruns the producers, as in Kafka).

Each round (``LOGBROKER_REASSIGN_FAULTS``, default 5) moves one partition
to another pair of brokers (its leader's replica always among the
removed ones when it can be, so leadership moves too), waits a random
0.1-1.5 s, kills one broker with SIGKILL (seeded choice: the controller,
the partition's leader, an adding or a removing replica), restarts it after
0.3-2 s, and waits (bounded) until the move has finished: the replicas
are the target, the ISR holds both, nothing is listed in progress.

At the end: every partition's leader is asked for everything below its
HW; every acknowledged record must be there at its offset with its value
(nothing acknowledged lost), each producer's values appear in order, once
each (idempotence), and no broker keeps files of a partition it is no
longer a replica of. Run:
``LOGBROKER_ETCD_REQUIRED=1 pytest -m long -s tests/cluster/test_reassign_nemesis.py``.
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from logbroker import Admin, Producer
from logbroker.errors import LogbrokerError
from tests.support.cluster import Cluster, EtcdProcess, require_etcd
from tests.support.fixtures import wait_until

pytestmark = pytest.mark.long
TOPIC = "moves"
PARTITIONS = 3
MOVE_TIMEOUT = 90.0


class Sending(threading.Thread):
    """Numbered values to one partition; ``acked``: (offset, value) of each
    acknowledged one."""

    def __init__(self, bootstrap: str, partition: int, stop: threading.Event) -> None:
        super().__init__(name=f"send-{partition}", daemon=True)
        self.bootstrap, self.partition, self.stop = bootstrap, partition, stop
        self.acked: list = []
        self.errors = 0
        self.failure: "BaseException | None" = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def _run(self) -> None:
        seq = 0
        with Producer(bootstrap=self.bootstrap, acks="all", idempotent=True, linger_ms=2,
                      request_timeout_ms=5000, delivery_timeout_ms=60_000) as producer:
            while not self.stop.is_set():
                window = []
                for _ in range(20):
                    value = b"%d-%08d-" % (self.partition, seq) + b"v" * 190
                    seq += 1
                    try:
                        window.append((value, producer.send(TOPIC, value,
                                                            partition=self.partition)))
                    except LogbrokerError:
                        self.errors += 1
                for value, handle in window:
                    try:
                        self.acked.append((handle.result(timeout=90).offset, value))
                    except (LogbrokerError, TimeoutError):
                        self.errors += 1
                time.sleep(0.1)  # ~40 KB/s per partition: well below the throttle


def _moved(c: Cluster, p: int, target: tuple) -> bool:
    try:
        leader, _, replicas, isr = c.state(TOPIC, p)
    except (AssertionError, OSError):
        return False
    return tuple(replicas) == target and sorted(isr) == sorted(target) and leader in target


def test_moves_finish_and_nothing_acknowledged_is_lost_while_brokers_are_killed(tmp_path):
    require_etcd()
    faults = int(os.environ.get("LOGBROKER_REASSIGN_FAULTS", "5"))
    seed = int(os.environ.get("LOGBROKER_REASSIGN_SEED", str(random.randrange(1 << 30))))
    print(f"seed {seed}, {faults} faults")
    rng = random.Random(seed)
    with EtcdProcess(tmp_path / "etcd") as etcd:
        c = Cluster(tmp_path, etcd.url, n=3,
                    config={"reassignment_throttle_bytes_per_s": 1_000_000})
        stop = threading.Event()
        senders = []
        try:
            _run(c, rng, faults, stop, senders)
        finally:
            stop.set()
            for s in senders:
                s.join(120)
            c.close()


def _run(c: Cluster, rng, faults: int, stop: threading.Event, senders: list) -> None:
    """The rounds, then the checks (module docstring)."""
    c.start()
    c.create(TOPIC, partitions=PARTITIONS, replication_factor=2)
    senders += [Sending(c.bootstrap, p, stop) for p in range(PARTITIONS)]
    for s in senders:
        s.start()
    time.sleep(2.0)  # some data before the first move
    took = []
    for n in range(faults):
        p = n % PARTITIONS
        leader, _, replicas, _ = c.state(TOPIC, p)
        others = [b for b in (1, 2, 3) if b not in replicas]
        keep = next(r for r in replicas if r != leader)
        target = tuple(rng.sample([keep, *others], 2))
        started = time.monotonic()
        with Admin(c.bootstrap, request_timeout_ms=10_000) as admin:
            assert admin.reassign_partitions({(TOPIC, p): list(target)}) \
                == {(TOPIC, p): None}
        time.sleep(rng.uniform(0.1, 1.5))
        controller = c.metadata().controller
        victim = rng.choice([controller, leader, *others, keep])
        roles = "+".join(name for name, ok in (("controller", victim == controller),
                                                ("leader, removed", victim == leader),
                                                ("adding", victim in others),
                                                ("staying", victim == keep)) if ok)
        c.brokers[victim].kill()
        time.sleep(rng.uniform(0.3, 2.0))
        c.brokers[victim].start()
        wait_until(lambda: _moved(c, p, target), MOVE_TIMEOUT,
                   f"move {n}: {TOPIC}-{p} {list(replicas)} -> {list(target)} "
                   f"(killed broker {victim})")
        took.append(time.monotonic() - started)
        print(f"move {n}: {TOPIC}-{p} {list(replicas)} -> {list(target)}, killed "
              f"broker {victim} ({roles}): done in {took[-1]:.1f} s")
    with Admin(c.bootstrap) as admin:
        wait_until(lambda: admin.list_partition_reassignments() == {}, 10,
                   "nothing in progress")
    time.sleep(1.0)
    stop.set()
    for s in senders:
        s.join(120)
    for s in senders:
        assert s.failure is None, s.failure
    lost = 0
    for p, s in enumerate(senders):
        leader, _, replicas, isr = c.wait_state(
            TOPIC, p, lambda ld, e, r, i: ld >= 0 and sorted(i) == sorted(r), 30,
            "full ISR")
        log = dict(c.read_all(leader, TOPIC, p))
        lost += sum(log.get(offset) != value for offset, value in s.acked)
        seqs = [int(v.split(b"-")[1]) for _, v in sorted(log.items())]
        assert seqs == sorted(set(seqs)), f"partition {p}: out of order or twice"
        print(f"partition {p}: replicas {list(replicas)}, {len(s.acked)} acknowledged, "
              f"{s.errors} not, {len(log)} in the log")
        for b in (1, 2, 3):
            if b not in replicas:
                path = os.path.join(c.brokers[b].data_dir, f"{TOPIC}-{p}")
                wait_until(lambda: not os.path.exists(path), 10,
                           f"broker {b}'s copy of {TOPIC}-{p} deleted")
    assert lost == 0, f"{lost} acknowledged record(s) lost"
    assert sum(len(s.acked) for s in senders) > 1000
    print(f"{faults} moves under kills: every move finished (median "
          f"{sorted(took)[len(took) // 2]:.1f} s), nothing acknowledged lost")
