"""Admin operations as coroutines over one ``BrokerLink`` (used by the sync
``Admin`` and ``logbroker.aio.Admin``), and the value objects they return."""

from __future__ import annotations

from typing import Iterable, NamedTuple

from ..errors import for_code
from ..protocol import messages as m
from .link import BrokerLink
from .metadata import part_error


class NewTopic(NamedTuple):
    name: str
    partitions: int = 1
    configs: "dict | None" = None


class BrokerInfo(NamedTuple):
    id: int
    host: str
    port: int


class PartitionInfo(NamedTuple):
    partition: int
    log_start: int
    log_end: int
    high_watermark: int
    size_bytes: int
    segments: int


class TopicDescription(NamedTuple):
    name: str
    configs: dict
    partitions: tuple  # of PartitionInfo, by partition


class GroupPartition(NamedTuple):
    """``lag`` in records; ``lag_ms``: age of the next record to read (-1:
    caught up or unknown); -1 for ``log_end``/``lag``/``lag_ms`` when the
    partition is gone."""

    topic: str
    partition: int
    committed: int
    log_end: int
    lag: int
    commit_ms: int
    lag_ms: int


class GroupDescription(NamedTuple):
    group: str
    partitions: tuple  # of GroupPartition


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str
    commit_ms: int


class OffsetAndTimestamp(NamedTuple):
    """``offset`` -1 when no record is that late (timestamp lookups);
    ``timestamp`` -1 for earliest/latest lookups."""

    offset: int
    timestamp: int


SPECS = {"earliest": m.EARLIEST, "latest": m.LATEST}


def _spec(spec) -> int:
    if spec in SPECS:
        return SPECS[spec]
    if type(spec) is int and spec >= 0:
        return spec
    raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms, got {spec!r}")


def _results(entries, raise_errors: bool) -> dict:
    out, first = {}, None
    for name, err, message in entries:
        exc = for_code(err)(f"{name}: {message}" if message else name) if err else None
        out[name] = exc
        first = first or exc
    if raise_errors and first is not None:
        raise first
    return out


def _new_topic(item) -> tuple:
    if isinstance(item, str):
        item = NewTopic(item)
    elif not isinstance(item, NewTopic):
        item = NewTopic(*item)
    if type(item.partitions) is not int or item.partitions < 1:
        raise ValueError(f"{item.name}: partitions must be an int >= 1")
    return (item.name, item.partitions, dict(item.configs or {}))


class AdminCore:
    def __init__(self, link: BrokerLink) -> None:
        self.link = link

    async def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        resp = await self.link.call(m.CreateTopics(topics=tuple(map(_new_topic, topics))),
                                    retry=False)
        return _results(resp.topics, raise_errors)

    async def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        resp = await self.link.call(m.DeleteTopics(topics=tuple(names)), retry=False)
        return _results(resp.topics, raise_errors)

    async def list_topics(self) -> dict[str, int]:
        resp = await self.link.call(m.Metadata(topics=None))
        return {name: n for name, err, _, n in resp.topics if not err}

    async def describe_cluster(self) -> dict:
        resp = await self.link.call(m.Metadata(topics=()))
        return {"brokers": [BrokerInfo(*b) for b in resp.brokers], "server": self.link.server}

    async def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        resp = await self.link.call(m.DescribeTopics(
            topics=None if names is None else tuple(names)))
        out = {}
        for name, err, message, configs, parts in resp.topics:
            if err:
                raise for_code(err)(f"{name}: {message}" if message else name)
            out[name] = TopicDescription(name, dict(configs), tuple(
                PartitionInfo(*p) for p in sorted(parts)))
        return out

    async def list_groups(self) -> list[str]:
        resp = await self.link.call(m.ListGroups())
        return sorted(resp.groups)

    async def describe_groups(self, groups: Iterable[str]) -> dict:
        resp = await self.link.call(m.DescribeGroups(groups=tuple(groups)))
        return {g: GroupDescription(g, tuple(GroupPartition(*p) for p in sorted(parts)))
                for g, parts in resp.groups}

    async def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        resp = await self.link.call(m.DeleteGroups(groups=tuple(groups)), retry=False)
        return _results(resp.groups, raise_errors)

    async def commit_offsets(self, group: str, offsets: dict) -> None:
        entries = []
        for (topic, partition), value in offsets.items():
            off, meta = value if isinstance(value, tuple) else (value, "")
            entries.append((topic, partition, off, meta))
        resp = await self.link.call(m.CommitOffsets(group=group, offsets=tuple(entries)))
        for topic, partition, err, message in resp.parts:
            if err:
                raise part_error(err, message, topic, partition)

    async def fetch_offsets(self, group: str, partitions=None) -> dict:
        resp = await self.link.call(m.FetchOffsets(
            group=group, parts=None if partitions is None else tuple(map(tuple, partitions))))
        out = {}
        for topic, partition, off, meta, ms in resp.parts:
            out[(topic, partition)] = OffsetAndMetadata(off, meta, ms) if off >= 0 else None
        return out

    async def partitions_of(self, topics: Iterable[str]) -> list:
        from .metadata import partition_counts

        counts = await partition_counts(self.link, list(topics),
                                        timeout=self.link.options.request_timeout)
        return [(t, p) for t, n in counts.items() for p in range(n)]

    async def list_offsets(self, partitions, spec="latest") -> dict:
        if isinstance(partitions, dict):
            specs = {tuple(tp): _spec(s) for tp, s in partitions.items()}
        else:
            items = [partitions] if isinstance(partitions, str) else list(partitions)
            topics = [t for t in items if isinstance(t, str)]
            tps = [tuple(tp) for tp in items if not isinstance(tp, str)]
            if topics:
                tps += await self.partitions_of(topics)
            specs = {tp: _spec(spec) for tp in tps}
        resp = await self.link.call(m.ListOffsets(parts=tuple(
            (t, p, s) for (t, p), s in specs.items())))
        out = {}
        for topic, partition, err, message, offset, ts in resp.parts:
            if err:
                raise part_error(err, message, topic, partition)
            out[(topic, partition)] = OffsetAndTimestamp(offset, ts)
        return out

