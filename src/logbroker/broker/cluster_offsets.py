"""Committed consumer-group offsets in cluster mode: kept in etcd.

Until the group coordinator (issue 11) stores them in a replicated topic,
offsets live in etcd under ``offsets/<group>/<topic>/<partition>`` (a
commit is one etcd transaction: all its partitions or none), so they
survive the loss of any broker and every broker answers for every group.
etcd's Raft log fsyncs each commit; commits are per poll batch or per
second, not per record, so its write rate is ample. Lag is computed where
the answering broker hosts the partition (-1 elsewhere).
"""

from __future__ import annotations

import time

from .. import limits
from ..errors import GroupNotFoundError, InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..cluster.state import pack, unpack
from ..storage.groups import CommittedOffset
from .edge import check_partition_key
from .groups_view import check_fetch_offsets, lag_row, offsets_answer


class ClusterOffsets:
    def __init__(self, node) -> None:
        self.node = node

    async def _committed(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        prefix = self.node.keys.group_offsets(group)
        items, _ = await self.node.etcd.load(prefix)
        out = {}
        for it in items:
            topic, _, part = it.key[len(prefix):].rpartition("/")
            if "/" in topic or not part.isdigit():
                continue  # a longer group name that shares the prefix
            v = unpack(it.value)
            out[(topic, int(part))] = CommittedOffset(int(v["offset"]), str(v.get("metadata", "")),
                                                      int(v.get("commit_ms", 0)))
        return out

    async def commit(self, req: m.CommitOffsets) -> m.CommitOffsetsResponse:
        node, writes, out = self.node, {}, []
        now = int(time.time() * 1000)
        for topic, partition, offset, meta in req.offsets:
            try:
                check_partition_key(topic, partition)
                if topic not in node.view.topics or not 0 <= partition < node.view.topics[topic].partitions:
                    from ..errors import UnknownTopicOrPartitionError

                    raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")
                limits.check_offset(offset)
                if len(meta) > limits.MAX_COMMIT_METADATA:
                    raise InvalidRequestError(f"metadata of {len(meta)} characters (limit "
                                              f"{limits.MAX_COMMIT_METADATA})")
                writes[node.keys.offset(req.group, topic, partition)] = pack(
                    {"offset": offset, "metadata": meta, "commit_ms": now})
                out.append((topic, partition, 0, ""))
            except LogbrokerError as exc:
                out.append((topic, partition, *_err(exc)))
        if writes:
            node.check_available()
            await node.etcd.cas(writes, {})
        return m.CommitOffsetsResponse(parts=tuple(out))

    async def fetch(self, req: m.FetchOffsets) -> m.FetchOffsetsResponse:
        check_fetch_offsets(req)
        return offsets_answer(req, await self._committed(req.group))

    async def list_groups(self, req: m.ListGroups) -> m.ListGroupsResponse:
        prefix = self.node.keys.offsets
        items, _ = await self.node.etcd.load(prefix)
        groups = {it.key[len(prefix):].rsplit("/", 2)[0] for it in items}
        return m.ListGroupsResponse(groups=tuple(sorted(groups)))

    async def describe(self, req: m.DescribeGroups) -> m.DescribeGroupsResponse:
        out, now = [], int(time.time() * 1000)
        for group in req.groups:
            try:
                committed = await self._committed(limits.check_group_name(group))
                if not committed:
                    raise GroupNotFoundError(f"unknown group {group!r} (no committed offsets)")
            except LogbrokerError as exc:
                out.append((group, *_err(exc), ()))
                continue
            rows = [lag_row(self.node.store, topic, partition, c, now)
                    for (topic, partition), c in sorted(committed.items())]
            out.append((group, 0, "", tuple(rows)))
        return m.DescribeGroupsResponse(groups=tuple(out))

    async def delete(self, req: m.DeleteGroups) -> m.DeleteGroupsResponse:
        out = []
        for group in req.groups:
            try:
                committed = await self._committed(limits.check_group_name(group))
                if not committed:
                    raise GroupNotFoundError(f"unknown group {group!r}")
                self.node.check_available()
                await self.node.etcd.cas({self.node.keys.offset(group, t, p): None
                                          for t, p in committed}, {})
                out.append((group, 0, ""))
            except LogbrokerError as exc:
                out.append((group, *_err(exc)))
        return m.DeleteGroupsResponse(groups=tuple(out))
