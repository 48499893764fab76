"""The cluster's internal topics (``__consumer_offsets``,
``__transaction_state``) created on first use, once: one creation task per
topic, shielded from the requests that wait on it.

A FindCoordinator whose client goes away is cancelled with its request; had
the creation run inside it, etcd could be left with the topic's partition
states but no topic key (the two are separate compare-and-set writes), and
every later creation would fail with "already exists" while the topic never
appears: COORDINATOR_NOT_AVAILABLE forever. Here the creation finishes
whoever waits, and a half-created internal topic (partition states without a
topic, as a broker killed between the two writes leaves it) is repaired:
its missing partition states are placed and its topic key written.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..cluster.placement import assign
from ..cluster.state import PartitionState, TopicState, partition_value, topic_value
from ..errors import ClusterUnavailableError, TopicAlreadyExistsError
from ..storage.topic_ids import new_topic_id

log = logging.getLogger("logbroker.broker")

SETTLE_S = 2.0  # another broker's creation writes its topic key ms after its partitions
WAIT_S = 5.0  # a request waits this long for the creation (it goes on): its several etcd
# calls through a cut link could outlast a client's request timeout (10 s for ours)
TXN_OPS = 100  # etcd's default limit is 128 operations per transaction


class InternalTopics:
    """``ensure(spec)``: returns once ``spec``'s topic exists in this
    broker's view (or its creation failed: the caller answers
    COORDINATOR_NOT_AVAILABLE and the next request tries again), or raises
    CLUSTER_UNAVAILABLE after ``WAIT_S`` (the creation goes on: a later
    request finds it done or waits on it again)."""

    def __init__(self, meta) -> None:
        self.meta = meta  # ClusterMetadata
        self._tasks: dict[str, asyncio.Task] = {}

    async def ensure(self, spec) -> None:
        if spec.name in self.meta.node.view.topics:
            return
        task = self._tasks.get(spec.name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._create(spec))
            self._tasks[spec.name] = task
            task.add_done_callback(lambda t, name=spec.name: self._done(name, t))
        try:
            await asyncio.wait_for(asyncio.shield(task), WAIT_S)
        except TimeoutError:
            raise ClusterUnavailableError(f"creating {spec.name} in etcd: not done within "
                                          f"{WAIT_S:.0f} s (it goes on)") from None

    def _done(self, name: str, task: asyncio.Task) -> None:
        if self._tasks.get(name) is task:
            del self._tasks[name]
        if not task.cancelled() and task.exception() is not None:
            log.warning("creating internal topic %s failed: %s", name, task.exception())

    def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()

    async def _create(self, spec) -> None:
        meta = self.meta
        try:
            await meta.create_internal(spec.name, spec.partitions, spec.configs(),
                                       spec.replication_factor)
            return
        except TopicAlreadyExistsError:
            pass
        view = meta.node.view
        deadline = time.monotonic() + SETTLE_S
        while spec.name not in view.topics and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if spec.name not in view.topics:
            await self._repair(spec)

    async def _repair(self, spec) -> None:
        """Partition states of ``spec`` without its topic key: the missing
        partition states placed (replication factor as the existing ones'),
        then the topic key (compare-and-set on absence: a broker repairing
        at the same time loses cleanly)."""
        node, view, name = self.meta.node, self.meta.node.view, spec.name
        have = {p: view.partitions[(name, p)] for p in range(spec.partitions)
                if (name, p) in view.partitions}
        if not have:
            return  # nothing half-created: the next request creates it afresh
        rf = len(next(iter(have.values())).replicas)
        missing = [p for p in range(spec.partitions) if p not in have]
        placed = assign(len(missing), rf, view.live, view.partitions.values()) if missing else []
        writes = {node.keys.partition(name, p): partition_value(PartitionState(name, p, r, r[0],
                                                                               r, 0))
                  for p, r in zip(missing, placed)}
        keys = list(writes)
        for i in range(0, len(keys), TXN_OPS):
            chunk = {k: writes[k] for k in keys[i:i + TXN_OPS]}
            if not await node.etcd.cas(chunk, {k: 0 for k in chunk}):
                return  # another broker repairs it
        configs = {k: v for k, v in spec.configs().items() if k != "replication_factor"}
        topic = TopicState(name, spec.partitions, rf, configs, topic_id=new_topic_id())
        if await node.etcd.cas({node.keys.topic(name): topic_value(topic)},
                               {node.keys.topic(name): 0}):
            log.warning("repaired internal topic %s: it had %d partition state(s) and no topic "
                        "(a creation cut short); %d placed anew", name, len(have), len(missing))
        deadline = time.monotonic() + SETTLE_S
        while name not in view.topics and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
