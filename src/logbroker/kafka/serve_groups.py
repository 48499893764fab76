"""Kafka's offset APIs, answered through our group coordinator:
FindCoordinator, OffsetCommit, OffsetFetch (docs/kafka.md §4); membership
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) is serve_membership.py. Each
function takes the ``KafkaSite``, the request header and body, and returns
a ``Plan``.
"""

from __future__ import annotations

from ..errors import CoordinatorNotAvailableError, InvalidRequestError, UnstableOffsetCommitError
from ..protocol import messages as m
from ..protocol.parts import OffsetCommit, TopicPartition
from .cluster_meta import kafka_address
from .plan import KafkaSite, Plan, by_topic
from .wire_errors import kafka_code, kafka_group_code, kafka_message

GROUP_KEY, TXN_KEY = 0, 1  # FindCoordinator key_type: a group, a transactional id


def find_coordinator(site: KafkaSite, header, body) -> Plan:
    """The coordinator of a group (key type 0) or of a transactional id (1)
    at its Kafka address: our FindCoordinator names the broker (this one on
    a single node; in a cluster the leader of the key's partition of the
    offsets or the transaction state topic), ``cluster_meta.kafka_address``
    its Kafka listener; COORDINATOR_NOT_AVAILABLE (retriable) when that
    broker has no Kafka listener or is not live in this broker's view. Any
    other key type (share groups, KIP-932) is INVALID_REQUEST, as Kafka
    answers an unknown one."""
    def refused(message: str, code: int = CoordinatorNotAvailableError.code) -> dict:
        return {"error_code": code, "node_id": -1, "host": "", "port": -1,
                "error_message": message}
    if body.key_type not in (GROUP_KEY, TXN_KEY):
        return Plan(None, lambda _r: refused(f"unknown coordinator key type {body.key_type}",
                                             InvalidRequestError.code))

    def answer(resp) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error), "error_message":
                    kafka_message(resp.message), "node_id": -1, "host": "", "port": -1}
        address = kafka_address(site, resp.broker_id)
        if address is None:
            return refused(f"the coordinator, broker {resp.broker_id}, has no Kafka listener")
        return {"error_code": 0, "node_id": resp.broker_id, "host": address[0],
                "port": address[1]}
    return Plan(m.FindCoordinator(group=body.key, key_type=body.key_type), answer)


def offset_commit(site: KafkaSite, header, body) -> Plan:
    """Offsets committed as ours are: fenced by the member's generation and
    member id (a stale one is refused whole: ILLEGAL_GENERATION,
    UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS while the group completes a
    rebalance), or without membership (generation -1, no member id:
    accepted while the group has no members); ``retention_time_ms`` and the
    leader epoch are ignored."""
    offsets = tuple(OffsetCommit(t.name, p.partition_index, p.committed_offset,
                                 p.committed_metadata or "")
                    for t in body.topics for p in t.partitions)
    req = m.CommitOffsets(group=body.group_id, offsets=offsets, generation=body.generation_id,
                          member_id=body.member_id, group_instance_id=body.group_instance_id)

    def answer(resp: m.CommitOffsetsResponse) -> dict:
        if resp.error:
            rows = [(t, p, resp.error) for t, p, _o, _m in offsets]
        else:
            rows = [(t, p, error) for t, p, error, _msg in resp.parts]
        return {"topics": [{"name": topic, "partitions": [
            {"partition_index": p, "error_code": kafka_code(error)} for _t, p, error in group]}
            for topic, group in by_topic(rows)]}
    return Plan(req, answer)


def offset_fetch(site: KafkaSite, header, body) -> Plan:
    """The group's committed offsets as stored (any int64, a negative one
    too: Kafka clients commit -1 / -2 to reset a group); offset -1 and
    metadata "" where none, as Kafka answers (its NO_METADATA: never null);
    null topics (v2+) asks for every partition the group committed.
    ``require_stable`` (v7, a read_committed consumer's): while a partition
    asked has offsets of an undecided transaction, our UNSTABLE_OFFSET_COMMIT
    (88) goes out as Kafka's does, on each partition asked (top-level 0:
    clients retry those); with null topics on the top-level error."""
    parts = None if body.topics is None else tuple(
        TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes)
    req = m.FetchOffsets(group=body.group_id, parts=parts,
                         require_stable=bool(body.require_stable))

    def answer(resp: m.FetchOffsetsResponse) -> dict:
        error = kafka_code(resp.error)
        if resp.error == UnstableOffsetCommitError.code and parts is not None:
            rows = [(t, p, -1, "", error) for t, p in parts]
            error = 0
        elif resp.error:
            rows = [(t, p, -1, "", error) for t, p in parts or ()]
        else:
            rows = [(t, p, offset, meta or "", 0) for t, p, offset, meta, _ms in resp.parts]
        return {"error_code": error, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": offset, "metadata": meta,
             "error_code": code} for _t, p, offset, meta, code in group]}
            for topic, group in by_topic(rows)]}
    return Plan(req, answer)


def offset_delete(site: KafkaSite, header, body) -> Plan:
    """OffsetDelete (v0) as our DeleteOffsets (api/groups.py: Kafka's
    rules); a group-wide refusal is the top-level error with no topics,
    as Kafka answers it."""
    parts = tuple(TopicPartition(t.name, p.partition_index) for t in body.topics
                  for p in t.partitions)

    def answer(resp: m.DeleteOffsetsResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_group_code(resp.error), "topics": []}
        return {"error_code": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "error_code": kafka_code(e)}
                                           for _t, p, e, _msg in group]}
            for topic, group in by_topic(resp.parts)]}
    return Plan(m.DeleteOffsets(group=body.group_id, parts=parts), answer)
