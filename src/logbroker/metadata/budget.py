"""The partition limits (docs/security.md, "Partition limits").

- ``max_partitions_per_request``: partitions one CreateTopics asks for, in
  all (``limits.check_request_partitions``, by the handler, on both listeners);
- ``max_partitions_per_broker``: partitions one broker hosts (in a cluster
  its replicas: each replica is a log, files and memory on that broker),
  checked by every creation, auto-creation included (``PartitionBudget``).

A creation reserves its partitions on each broker before it creates
anything and holds them until what it made is counted (the store's logs, or
the cluster's view), so concurrent creations never pass the limit together.
Refusals are POLICY_VIOLATION (Kafka's code) with the rule in the message,
and a log line.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import PolicyViolationError

log = logging.getLogger("logbroker.topics")


class PartitionBudget:
    """Partitions reserved per broker id by creations in flight, against
    ``per_broker`` (the limit)."""

    def __init__(self, per_broker: int) -> None:
        self.per_broker = per_broker
        self._reserved: dict[int, int] = {}

    @contextmanager
    def reserve(self, topic: str, need: dict, hosted: Callable[[int], int]) -> Iterator[None]:
        """``hold`` for the block."""
        release = self.hold(topic, need, hosted)
        try:
            yield
        finally:
            release()

    def hold(self, topic: str, need: dict, hosted: Callable[[int], int]) -> Callable[[], None]:
        """Hold ``need`` (broker id -> new partitions) until the returned
        function is called; POLICY_VIOLATION, nothing held, when a broker's
        ``hosted(id)`` plus what is reserved there plus its need passes the
        limit."""
        for broker, n in sorted(need.items()):
            total = hosted(broker) + self._reserved.get(broker, 0) + n
            if n and total > self.per_broker:
                log.info("creating topic %s refused: broker %d would host %d partitions, above "
                         "max_partitions_per_broker %d", topic, broker, total, self.per_broker)
                raise PolicyViolationError(
                    f"topic {topic!r}: {n} more partition(s) on broker {broker} would make "
                    f"{total}; max_partitions_per_broker is {self.per_broker}")
        for broker, n in need.items():
            self._reserved[broker] = self._reserved.get(broker, 0) + n
        done = []

        def release() -> None:
            if done:
                return
            done.append(True)
            for broker, n in need.items():
                left = self._reserved[broker] - n
                if left:
                    self._reserved[broker] = left
                else:
                    del self._reserved[broker]
        return release
