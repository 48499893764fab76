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

``end`` is at most the high watermark the driver saw: records below it are
committed (on every in-sync replica with ``acks=all``), so a leader change
mid-read serves the same records from the new leader. A task follows it
(metadata refresh, retry) until ``request_timeout`` passes without
progress, then fails naming the partition and offset; it never returns a
record from beyond the planned range.
"""

from __future__ import annotations


from ..client.admin.sync import Admin
from ..errors import LogbrokerError
from .remote_read import REQUEST_TIMEOUT_MS
from .options import Options, SparkSourceError, Split
from .plan import PlannerBase



class RemotePlanner(PlannerBase):
    """Plans over running brokers through the sync ``Admin`` client."""

    def __init__(self, o: Options) -> None:
        super().__init__(o)
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

    def available(self) -> dict[str, list[int]]:
        counts = self._call("list the topics", self.admin.list_topics)
        return {t: list(range(n)) for t, n in sorted(counts.items())}

    def prefetch(self, tps: list) -> None:
        """Bounds of every partition of ``tps`` in two ListOffsets rounds."""
        want = [tp for tp in tps if tp not in self._bounds]
        if not want:
            return
        starts = self._call("list earliest offsets", self.admin.list_offsets, want, "earliest")
        ends = self._call("list latest offsets", self.admin.list_offsets, want, "latest")
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

    def _split(self, topic, partition, pid, start, end) -> list[Split]:
        return [self._make(topic, partition, start, end, compacted=self._compacted(topic))]

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
