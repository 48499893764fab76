"""What one ConsumerGroupHeartbeat costs the coordinator's loop (KIP-848,
docs/kafka.md §4.13): the sans-I/O state machine alone, no I/O.

    python -m bench.groups.heartbeat_cost

For groups of 10, 100 and 1,000 members over 100, 1,000 and 10,000
partitions (ten topics, identical subscriptions): the mean join, a steady
heartbeat (nothing changed) and a join that makes the group reassign.
"""

from __future__ import annotations

import time

from logbroker.coordinator.consumer_group import Beat, ConsumerGroup
from logbroker.coordinator.group import GroupLimits


class _Topics:
    def __init__(self, counts: dict) -> None:
        self.counts = counts

    def count(self, name: str):
        return self.counts.get(name)

    def names(self) -> list:
        return list(self.counts)


def measure(members: int, partitions: int) -> dict:
    topics = _Topics({f"t{i}": partitions // 10 for i in range(10)})
    names = tuple(topics.counts)
    g = ConsumerGroup("g", GroupLimits(max_size=members + 1))
    started = time.perf_counter()
    for i in range(members):
        g.beat(Beat(f"m{i}", 0, rebalance_timeout_ms=1000, names=names), topics, 0.0)
    join = (time.perf_counter() - started) / members
    for _ in range(3):  # every member reconciles to the target
        for mid, mb in list(g.members.items()):
            g.beat(Beat(mid, mb.member_epoch, owned=dict(mb.assigned)), topics, 0.5)
    started = time.perf_counter()
    for mid, mb in list(g.members.items()):
        g.beat(Beat(mid, mb.member_epoch, owned=dict(mb.assigned)), topics, 0.6)
    steady = (time.perf_counter() - started) / members
    started = time.perf_counter()
    g.beat(Beat("late", 0, rebalance_timeout_ms=1000, names=names), topics, 0.7)
    return {"members": members, "partitions": partitions, "join_ms": join * 1e3,
            "steady_ms": steady * 1e3, "reassign_ms": (time.perf_counter() - started) * 1e3}


def main() -> None:
    for members, partitions in ((10, 100), (100, 1_000), (1_000, 10_000)):
        r = measure(members, partitions)
        print(f"{members:>5} members {partitions:>6} partitions: join {r['join_ms']:.2f} ms, "
              f"steady heartbeat {r['steady_ms']:.3f} ms, a join that reassigns "
              f"{r['reassign_ms']:.1f} ms")


if __name__ == "__main__":
    main()
