"""The admin client's one core: operations as coroutines over one
``BrokerLink`` (the sync ``Admin`` runs them on its I/O thread,
``logbroker.aio.Admin`` awaits them), and the value objects they return.

Every argument is checked before anything is sent (``client/validate.py``):
a wrong type raises ``TypeError`` at once; a bad name, partition count,
config or offset raises the registry's error at once — except in
``create_topics`` / ``delete_topics`` / ``delete_groups``, which report it
as that item's result (the valid items are still sent) and raise the first
error only with ``raise_errors``.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from .. import limits
from ..errors import ClientClosedError, LogbrokerError, TopicAlreadyExistsError, for_code
from ..protocol import messages as m
from . import validate
from .link import BrokerLink
from .metadata import part_error, partition_counts

# The coroutines both Admin shells expose as they are (create_topic is the
# one more: it is written once below too).
METHODS = ("create_topics", "create_topic", "delete_topics", "list_topics", "describe_topics",
           "describe_cluster", "list_groups", "describe_groups", "delete_groups",
           "commit_offsets", "fetch_offsets", "list_offsets")


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
    error: int = 0  # PARTITION_OFFLINE (57) etc. for a partition that serves nothing
    message: str = ""  # the reason: the damage found, the failed I/O


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


def _results(entries, refused: dict, order: list, raise_errors: bool) -> dict:
    """``{name: None or error}`` in ``order``: the broker's answers, and the
    errors of items refused before sending."""
    out = dict(refused)
    for name, err, message in entries:
        out[name] = for_code(err)(f"{name}: {message}" if message else name) if err else None
    out = {name: out.get(name) for name in order}
    first = next((exc for exc in out.values() if exc is not None), None)
    if raise_errors and first is not None:
        raise first
    return out


def _split(items, check) -> tuple[list, dict, list]:
    """``check`` each item: (accepted values, {name: error} refused, names in order)."""
    good, refused, order = [], {}, []
    for item in items:
        name = item[0] if isinstance(item, (tuple, list)) and item else item
        try:
            good.append(check(item))
            order.append(good[-1][0] if isinstance(good[-1], tuple) else good[-1])
        except LogbrokerError as exc:
            if not isinstance(name, str):
                raise
            refused[name] = exc
            order.append(name)
    return good, refused, order


def _new_topic(item) -> tuple:
    if isinstance(item, str):
        item = NewTopic(item)
    elif not isinstance(item, NewTopic):
        if not isinstance(item, (tuple, list)) or not 1 <= len(item) <= 3:
            raise TypeError("a new topic is a name, a NewTopic or (name, partitions[, configs]), "
                            f"not {limits._short(item)}")
        item = NewTopic(*item)
    name = validate.topic(item.name)
    partitions = limits.check_partition_count(validate.as_int(item.partitions, "partitions"))
    return (name, partitions, validate.configs(item.configs))


class AdminCore:
    def __init__(self, link: BrokerLink) -> None:
        self.link = link
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("the admin client is closed")

    # -- topics -------------------------------------------------------------------------------------
    async def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        """Create topics: each a name, a ``NewTopic(name, partitions=1,
        configs={})`` or a ``(name, partitions[, configs])`` tuple (configs:
        LogConfig overrides such as ``retention_ms``). Returns ``{name: None
        or the error}``; with ``raise_errors`` raises the first error
        (``TopicAlreadyExistsError``, ``InvalidTopicError``,
        ``InvalidConfigError``) after all were tried."""
        good, refused, order = _split(validate.iterable(topics, "topics"), _new_topic)
        entries = ()
        if good:
            entries = (await self.link.call(m.CreateTopics(topics=tuple(good)), retry=False)).topics
        return _results(entries, refused, order, raise_errors)

    async def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None,
                           *, exist_ok: bool = False) -> bool:
        """Create one topic; returns False if it existed and ``exist_ok``."""
        try:
            await self.create_topics([(name, partitions, configs or {})])
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
            return False
        return True

    async def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        """Delete topics and their data; ``{name: None or the error}``
        (``UnknownTopicOrPartitionError`` for a missing one)."""
        good, refused, order = _split(validate.iterable(names, "names"), validate.topic)
        entries = ()
        if good:
            entries = (await self.link.call(m.DeleteTopics(topics=tuple(good)), retry=False)).topics
        return _results(entries, refused, order, raise_errors)

    async def list_topics(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic."""
        resp = await self.link.call(m.Metadata(topics=None))
        return {name: n for name, err, _, n in resp.topics if not err}

    async def describe_cluster(self) -> dict:
        """``{"brokers": [BrokerInfo(id, host, port)], "server": "logbroker x.y"}``."""
        resp = await self.link.call(m.Metadata(topics=()))
        return {"brokers": [BrokerInfo(*b) for b in resp.brokers], "server": self.link.server}

    async def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        """``{name: TopicDescription(name, configs, partitions)}`` with
        ``PartitionInfo(partition, log_start, log_end, high_watermark,
        size_bytes, segments, error, message)`` per partition (``error``
        PARTITION_OFFLINE and the reason for an offline one); all topics
        when ``names`` is None. Raises for an unknown topic."""
        resp = await self.link.call(m.DescribeTopics(
            topics=None if names is None else tuple(validate.topics(names))))
        out = {}
        for name, err, message, configs, parts in resp.topics:
            if err:
                raise for_code(err)(f"{name}: {message}" if message else name)
            out[name] = TopicDescription(name, dict(configs), tuple(
                PartitionInfo(*p) for p in sorted(parts)))
        return out

    # -- groups -------------------------------------------------------------------------------------
    async def list_groups(self) -> list[str]:
        """Every group with committed offsets, sorted."""
        resp = await self.link.call(m.ListGroups())
        return sorted(resp.groups)

    async def describe_groups(self, groups: Iterable[str]) -> dict:
        """``{group: GroupDescription(group, partitions)}`` with a
        ``GroupPartition(topic, partition, committed, log_end, lag, commit_ms,
        lag_ms)`` per committed partition; ``GroupNotFoundError`` for a group
        without committed offsets."""
        resp = await self.link.call(m.DescribeGroups(groups=tuple(validate.groups(groups))))
        for g, err, message, _ in resp.groups:
            if err:
                raise for_code(err)(message or g)
        return {g: GroupDescription(g, tuple(GroupPartition(*p) for p in sorted(parts)))
                for g, _, _, parts in resp.groups}

    async def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        """Forget groups' offsets; ``{group: None or InvalidGroupError}``."""
        good, refused, order = _split(validate.iterable(groups, "groups"), validate.group)
        entries = ()
        if good:
            entries = (await self.link.call(m.DeleteGroups(groups=tuple(good)), retry=False)).groups
        return _results(entries, refused, order, raise_errors)

    # -- offsets ------------------------------------------------------------------------------------
    async def commit_offsets(self, group: str, offsets: dict) -> None:
        """Commit for ``group`` without a live consumer: ``{(topic,
        partition): offset or (offset, metadata)}``, offset = the next record
        to read. All valid entries are stored atomically; raises the first
        partition's error (unknown partition, negative offset)."""
        msg = m.CommitOffsets(group=validate.group(group), offsets=validate.commit_entries(offsets))
        resp = await self.link.call(msg)
        for topic, partition, err, message in resp.parts:
            if err:
                raise part_error(err, message, topic, partition)

    async def fetch_offsets(self, group: str, partitions=None) -> dict:
        """``{(topic, partition): OffsetAndMetadata(offset, metadata,
        commit_ms) or None}``; all committed partitions when ``partitions``
        is None."""
        resp = await self.link.call(m.FetchOffsets(
            group=validate.group(group),
            parts=None if partitions is None else tuple(validate.topic_partitions(partitions))))
        out = {}
        for topic, partition, off, meta, ms in resp.parts:
            out[(topic, partition)] = OffsetAndMetadata(off, meta, ms) if off >= 0 else None
        return out

    async def partitions_of(self, topics: Iterable[str]) -> list:
        counts = await partition_counts(self.link, list(topics), wait=False,
                                        timeout=self.link.options.request_timeout)
        return [(t, p) for t, n in counts.items() for p in range(n)]

    async def list_offsets(self, partitions, spec="latest") -> dict:
        """``{(topic, partition): OffsetAndTimestamp(offset, timestamp)}``.

        ``partitions``: ``(topic, partition)`` pairs and/or topic names (all
        their partitions), with one ``spec`` for all — ``"earliest"`` (log
        start), ``"latest"`` (high watermark: the next offset to be written
        and readable) or a timestamp in ms (the earliest record at or after
        it; offset -1 if none) — or a dict ``{(topic, partition): spec}``."""
        if isinstance(partitions, dict):
            specs = {validate.topic_partition(tp): validate.offset_spec(s)
                     for tp, s in partitions.items()}
        else:
            items = [partitions] if isinstance(partitions, str) \
                else list(validate.iterable(partitions, "partitions"))
            topics = [validate.topic(t) for t in items if isinstance(t, str)]
            tps = [validate.topic_partition(tp) for tp in items if not isinstance(tp, str)]
            wire_spec = validate.offset_spec(spec)
            if topics:
                tps += await self.partitions_of(topics)
            specs = {tp: wire_spec for tp in tps}
        resp = await self.link.call(m.ListOffsets(parts=tuple(
            (t, p, s) for (t, p), s in specs.items())))
        out = {}
        for topic, partition, err, message, offset, ts in resp.parts:
            if err:
                raise part_error(err, message, topic, partition)
            out[(topic, partition)] = OffsetAndTimestamp(offset, ts)
        return out

    async def aclose(self) -> None:
        self.closed = True
        await self.link.aclose()
