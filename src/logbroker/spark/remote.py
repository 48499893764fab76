"""Reading from running brokers: ``option("bootstrap", "host:port,...")``.

The same queries as over a data dir, through the protocol instead of the
files:

- ``RemotePlanner`` (the driver): topics and partition counts from Metadata,
  log start and high watermark per partition from ListOffsets (earliest /
  latest, one request per leader for all partitions), timestamps through
  ListOffsets, ``cleanup_policy`` from DescribeTopics. One split per
  partition range (``minPartitions`` halves the widest).
- ``remote_read.fetch_batches(split)`` (a task): Fetch requests to the
  partition's leader from ``start`` until ``end``, walked and CRC-checked
  with the same code as the files.

With option ``paths`` on the JVM engine (``locality``), each split also
names the partition's in-sync replicas that have a data dir in ``paths``,
as ``(host, data dir)``, the leader first (one DescribeCluster per plan): a
task reads the segment files of a replica on its own host, and Spark
prefers those hosts (``preferredLocations``). The range is the same: its
end is at most the leader's high watermark, which every in-sync replica's
files hold.

``end`` is at most the high watermark the driver saw: records below it are
committed (on every in-sync replica with ``acks=all``), so a leader change
mid-read serves the same records from the new leader. A task follows it
(metadata refresh, retry) until ``request_timeout`` passes without
progress, then fails naming the partition and offset; it never returns a
record from beyond the planned range.
"""

from __future__ import annotations

import dataclasses

from ..client.admin.sync import Admin
from ..errors import LogbrokerError
from .remote_read import REQUEST_TIMEOUT_MS
from .options import Options, SparkSourceError, Split
from .plan import PlannerBase



class RemotePlanner(PlannerBase):
    """Plans over running brokers through the sync ``Admin`` client."""

    def __init__(self, o: Options, locality: bool = False) -> None:
        super().__init__(o)
        self.locality = locality  # splits carry ``replicas`` (option paths, JVM engine)
        if locality and o.read_committed:  # the replicas' files are read, not fetched
            raise SparkSourceError("kafka.isolation.level read_committed with option paths (the "
                                   "JVM engine reading the replicas' files) is not supported: "
                                   "read over the brokers (no paths) or with option path")
        self._replicas: dict[tuple[str, int], tuple] = {}
        try:
            self.admin = Admin(o.bootstrap, client_id="logbroker-spark",
                               request_timeout_ms=REQUEST_TIMEOUT_MS, **dict(o.client))
        except (LogbrokerError, ValueError) as exc:
            raise SparkSourceError(f"option bootstrap {o.bootstrap!r}: {exc}") from None
        self._bounds: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._compacts: dict[str, bool] = {}

    def close(self) -> None:
        self.admin.close()

    def forget(self) -> None:
        """Drop the partition bounds seen so far (a stream's next trigger)."""
        self._bounds.clear()
        self._replicas.clear()

    def available(self) -> dict[str, list[int]]:
        counts = self._call("list the topics", self.admin.list_topics)
        return {t: list(range(n)) for t, n in sorted(counts.items())}

    def prefetch(self, tps: list) -> None:
        """Bounds of every partition of ``tps`` in two ListOffsets rounds."""
        want = [tp for tp in tps if tp not in self._bounds]
        if not want:
            return
        starts = self._call("list earliest offsets", self.admin.list_offsets, want, "earliest")
        isolation = "read_committed" if self.o.read_committed else "read_uncommitted"
        ends = self._call("list latest offsets", lambda: self.admin.list_offsets(
            want, "latest", isolation_level=isolation))
        for tp in want:
            self._bounds[tp] = (-1, starts[tp].offset, ends[tp].offset)

    def bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        self.prefetch([(topic, partition)])
        return self._bounds[(topic, partition)]

    def timestamp_offset(self, topic: str, partition: int, bounds, ts: int) -> int:
        found = self._call(f"look up timestamp {ts} in {topic}-{partition}",
                           self.admin.list_offsets, [(topic, partition)], ts)
        offset = found[(topic, partition)].offset
        return bounds[2] if offset < 0 else min(offset, bounds[2])

    def selected(self) -> dict:
        """As ``PlannerBase.selected``; with ``locality`` also the replicas
        of every selected partition, from one DescribeCluster."""
        chosen = super().selected()
        if self.locality and chosen:
            self._place(chosen)
        return chosen

    def _place(self, tps) -> None:
        """``(host, data dir)`` of each partition's in-sync replicas with a
        path, the leader first; none is an error naming the brokers that would do."""
        topics = sorted({t for t, _ in tps})
        desc = self._call("describe the cluster", self.admin.describe_cluster, topics)
        hosts = {b.id: b.host for b in desc.brokers}
        paths = self.o.paths
        for part in desc.partitions:
            if (part.topic, part.partition) not in tps:
                continue
            order = ([part.leader] if part.leader in part.isr else []) + \
                [b for b in part.isr if b != part.leader]
            picked = tuple((hosts[b], paths[b]) for b in order if b in paths and b in hosts)
            if not picked:
                raise SparkSourceError(
                    f"partition {part.topic}-{part.partition}: none of its in-sync replicas "
                    f"(brokers {', '.join(map(str, order)) or 'none'}) has a data dir in option "
                    f"paths (it names brokers {', '.join(map(str, paths))}); add one of them")
            self._replicas[(part.topic, part.partition)] = picked

    def _split(self, topic, partition, pid, start, end) -> list[Split]:
        split = self._make(topic, partition, start, end, compacted=self._compacted(topic))
        if self.locality:
            replicas = self._replicas.get((topic, partition))
            if replicas is None:
                raise SparkSourceError(f"partition {topic}-{partition}: not in the cluster's "
                                       "description (no replicas to read)")
            split = dataclasses.replace(split, replicas=replicas)
        return [split]

    def _compacted(self, topic: str) -> bool:
        if topic not in self._compacts:
            found = self._call(f"describe topic {topic}", self.admin.describe_topics, [topic])
            policy = str(found[topic].configs.get("cleanup_policy", "")) if topic in found else ""
            self._compacts[topic] = "compact" in policy
        return self._compacts[topic]

    @staticmethod
    def _call(what: str, fn, *args):
        try:
            return fn(*args)
        except LogbrokerError as exc:
            raise SparkSourceError(f"cannot {what}: {exc}") from None
