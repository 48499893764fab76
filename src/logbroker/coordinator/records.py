"""The records of the internal offsets topic (sans-I/O).

Kafka's ``__consumer_offsets`` shape: a compacted topic partitioned by group
(``partition_for``), two kinds of record, both keyed so compaction keeps
only the newest of each:

- an offset commit: key ``[1, group, topic, partition]``, value
  ``[offset, metadata, commit_ms]``; a tombstone (null value) deletes it.
- a group's membership: key ``[2, group]``, value ``[generation, protocol_type,
  protocol, leader, members]`` with members ``[member_id, instance_id,
  client_id, host, session_timeout_ms, rebalance_timeout_ms, assignment, kafka]``
  (``kafka``: the member's bytes are Kafka's ConsumerProtocol; absent in
  records written before it, read as false); a tombstone deletes the group.
- a consumer-protocol group (KIP-848): key ``[3, group]``, consumer_records.py.

Keys and values are msgpack. ``read_batch`` turns one stored batch into
events; a record it cannot parse is skipped with a warning (the log is
ours, so that is a bug or damage, never a reason to stop loading).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import crc32c
import msgpack

from .. import limits
from ..records import format as fmt
from ..records.builder import build_batch
from ..records.decoder import decode_batch
from .consumer_records import CONSUMER_KIND, ConsumerGroupRecord, consumer_pair, consumer_parse

log = logging.getLogger("logbroker.coordinator")

TOPIC = limits.OFFSETS_TOPIC
_TRANSACTIONAL = getattr(fmt, "TRANSACTIONAL", 0x0800)  # records/format.py's (storage's)
_OFFSET, _GROUP = 1, 2


def partition_for(group: str, partitions: int) -> int:
    """The offsets partition that holds ``group`` (stable across versions)."""
    return crc32c.crc32c(group.encode("utf-8", "surrogatepass")) % partitions


@dataclass(frozen=True)
class OffsetRecord:
    """A committed offset; ``offset`` None: deleted (tombstone)."""

    group: str
    topic: str
    partition: int
    offset: "int | None"
    metadata: str = ""
    commit_ms: int = 0


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    instance_id: "str | None"
    client_id: str
    host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: bytes
    kafka: bool = False  # the assignment is Kafka's ConsumerProtocol bytes, else ours


@dataclass(frozen=True)
class GroupRecord:
    """A group's generation and members as of its last stable (or empty)
    state; ``generation`` None: the group was deleted (tombstone)."""

    group: str
    generation: "int | None"
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: tuple = ()  # StoredMember


def encode(records) -> bytes:
    """One batch holding ``records`` (OffsetRecord / GroupRecord)."""
    return build_batch([_pair(r) for r in records])


def encode_txn(records, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """One transactional batch of producer ``producer_id`` holding
    ``records`` (a TxnOffsetCommit's OffsetRecords): the partition's LSO
    and the producer's markers apply to it (pending_offsets.py)."""
    return mark_transactional(build_batch([_pair(r) for r in records], producer_id=producer_id,
                                          producer_epoch=producer_epoch,
                                          base_sequence=base_sequence))


def mark_transactional(batch: bytes) -> bytes:
    """``batch`` (ours, magic 1, unstamped) with its transactional bit set
    and its CRC recomputed."""
    buf = bytearray(batch)
    at = fmt.CRC_START  # the attributes open the CRC-covered bytes
    attrs = int.from_bytes(buf[at:at + 2], "big") | _TRANSACTIONAL
    buf[at:at + 2] = attrs.to_bytes(2, "big")
    buf[fmt.CRC_OFFSET:fmt.CRC_START] = fmt.compute_crc(buf, 0, len(buf)).to_bytes(4, "big")
    return bytes(buf)


def _pair(r) -> tuple:
    if isinstance(r, ConsumerGroupRecord):  # kind 3 (consumer_records.py)
        value, key = consumer_pair(r)
        return (None if value is None else msgpack.packb(value), msgpack.packb(key))
    if isinstance(r, OffsetRecord):
        key = [_OFFSET, r.group, r.topic, r.partition]
        value = None if r.offset is None else [r.offset, r.metadata, r.commit_ms]
    else:
        key = [_GROUP, r.group]
        value = None if r.generation is None else [
            r.generation, r.protocol_type, r.protocol, r.leader,
            [[mb.member_id, mb.instance_id, mb.client_id, mb.host, mb.session_timeout_ms,
              mb.rebalance_timeout_ms, mb.assignment, mb.kafka] for mb in r.members]]
    return (None if value is None else msgpack.packb(value), msgpack.packb(key))


def read_batch(data) -> list:
    """The records of one stored batch as OffsetRecord / GroupRecord, in order."""
    out = []
    for rec in decode_batch(data).records():
        try:
            out.append(_parse(rec.key, rec.value))
        except (ValueError, TypeError, IndexError, msgpack.UnpackException) as exc:
            log.warning("offsets log: skipping an unreadable record (%s)", exc)
    return out


def _parse(key: bytes, value: "bytes | None"):
    k = msgpack.unpackb(key)
    v = None if value is None else msgpack.unpackb(value)
    if k[0] == _OFFSET:
        _, group, topic, partition = k
        if v is None:
            return OffsetRecord(str(group), str(topic), int(partition), None)
        return OffsetRecord(str(group), str(topic), int(partition), int(v[0]), str(v[1]), int(v[2]))
    if k[0] == _GROUP:
        if v is None:
            return GroupRecord(str(k[1]), None)
        generation, ptype, protocol, leader, members = v
        return GroupRecord(str(k[1]), int(generation), str(ptype), str(protocol), str(leader),
                           tuple(_member(*mb) for mb in members))
    if k[0] == CONSUMER_KIND:
        return consumer_parse(k, v)
    raise ValueError(f"unknown record kind {k[0]!r}")


def _member(a, b, c, d, e, f, g, kafka=False) -> StoredMember:
    return StoredMember(str(a), None if b is None else str(b), str(c), str(d), int(e), int(f),
                        bytes(g), kafka is True)
