"""Kafka's transaction APIs, answered through our transaction messages
(protocol/txn_messages.py, docs/kafka.md §4.14): InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions, ListTransactions. Each function takes the
``KafkaSite``, the request header and body, and returns a ``Plan``.

Errors are our codes, which are Kafka's (wire_errors.py), with Kafka's
two rules for older clients (KafkaApis): PRODUCER_FENCED (90, KIP-588)
goes out as INVALID_PRODUCER_EPOCH (47) below the first version whose
clients know it (InitProducerId v4; AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn and TxnOffsetCommit v2), and TxnOffsetCommit below v2 answers
COORDINATOR_LOAD_IN_PROGRESS as COORDINATOR_NOT_AVAILABLE (clients before
KAFKA-7296 failed on it). A coordinator-wide refusal (a broker that cannot
reach the cluster) is COORDINATOR_NOT_AVAILABLE, as for groups
(``kafka_group_code``): the client finds its coordinator again.

A request naming more than ``limits.MAX_PARTITIONS`` entries (partitions,
offsets, ids, filters) closes the connection before its entries are
built: the handlers refuse far fewer, and an answer per entry would cost
the loop about a second per million.
"""

from __future__ import annotations

from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      InvalidProducerEpochError, InvalidRequestError,
                      ProducerFencedError, TransactionalIdNotFoundError)
from ..limits import MAX_PARTITIONS
from ..protocol import messages as m
from ..protocol.parts import OffsetCommit, TopicPartition
from .plan import KafkaSite, Plan, by_topic
from .wire_errors import kafka_code, kafka_group_code

# the first version of each API whose clients know PRODUCER_FENCED (KIP-588)
FENCED_FROM = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2,
               "EndTxn": 2, "TxnOffsetCommit": 2}
# Kafka's names of a transaction's states (DescribeTransactions, ListTransactions)
STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                    "CompleteAbort", "PrepareEpochFence", "Dead"})


def _at_most(n: int, what: str, limit: int = MAX_PARTITIONS) -> None:
    """Refuse, before anything is built per entry, a request naming more
    than ``limit`` entries (the handlers refuse far fewer: this bounds what
    an answer per entry would cost the loop); the connection closes, the
    reason logged (net/kafka_connection.py)."""
    if n > limit:
        raise InvalidRequestError(f"{n} {what} in one request (at most {limit})")


def txn_code(code: int, api: str, version: int, *, group_level: bool = False) -> int:
    """Our error ``code`` as a transaction API's ``version`` answers it
    (the module docstring's rules). ``group_level``: a top-level refusal."""
    code = kafka_group_code(code) if group_level else kafka_code(code)
    if code == ProducerFencedError.code and version < FENCED_FROM.get(api, 0):
        return InvalidProducerEpochError.code
    if api == "TxnOffsetCommit" and version < 2 and code == CoordinatorLoadInProgressError.code:
        return CoordinatorNotAvailableError.code
    return code


def init_producer_id(site: KafkaSite, header, body) -> Plan:
    """A producer id and epoch. Without a transactional id: a new idempotent
    producer id, from the allocator our Producer uses. With one: the id its
    transaction coordinator keeps for it, the epoch bumped (an older producer
    of the id is fenced; its open transaction aborted first:
    CONCURRENT_TRANSACTIONS until then). v3+ may name the id and epoch the
    producer holds (KIP-360); naming one of the two without the other, or an
    empty transactional id, is INVALID_REQUEST, as Kafka answers them."""
    version = header.api_version
    if (body.producer_id == -1) != (body.producer_epoch == -1) or body.transactional_id == "":
        return Plan(None, lambda _r: {"error_code": InvalidRequestError.code,
                                      "producer_id": -1, "producer_epoch": -1})
    if body.transactional_id is None:
        req = m.InitProducerId()
    else:
        req = m.InitProducerId(transactional_id=body.transactional_id,
                               transaction_timeout_ms=body.transaction_timeout_ms,
                               producer_id=body.producer_id, producer_epoch=body.producer_epoch)

    def answer(resp: m.InitProducerIdResponse) -> dict:
        if resp.error:
            return {"error_code": txn_code(resp.error, "InitProducerId", version,
                                           group_level=True),
                    "producer_id": -1, "producer_epoch": -1, "throttle_time_ms": 0}
        return {"error_code": 0, "producer_id": resp.producer_id,
                "producer_epoch": resp.producer_epoch, "throttle_time_ms": 0}
    return Plan(req, answer)


def add_partitions_to_txn(site: KafkaSite, header, body) -> Plan:
    """The partitions the producer is about to write join its transaction;
    answered per partition. Kafka's rule, the coordinator's: one refused
    partition fails the whole request, and the others are answered
    OPERATION_NOT_ATTEMPTED (55, our coordinator's code too), which clients
    skip. A partition named twice is added and answered once."""
    version = header.api_version
    _at_most(sum(len(t.partitions) for t in body.v3_and_below_topics), "partitions")
    parts = tuple(dict.fromkeys(TopicPartition(t.name, p) for t in body.v3_and_below_topics
                                for p in t.partitions))
    req = m.AddPartitionsToTxn(transactional_id=body.v3_and_below_transactional_id,
                               producer_id=body.v3_and_below_producer_id,
                               producer_epoch=body.v3_and_below_producer_epoch, parts=parts)

    def answer(resp: m.AddPartitionsToTxnResponse) -> dict:
        if resp.error:
            code = txn_code(resp.error, "AddPartitionsToTxn", version, group_level=True)
            errors = dict.fromkeys(parts, code)
        else:
            errors = {TopicPartition(t, p): txn_code(e, "AddPartitionsToTxn", version)
                      for t, p, e, _msg in resp.parts}
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": topic, "results_by_partition": [
                {"partition_index": p, "partition_error_code": errors.get((t, p), 0)}
                for t, p in group]}
            for topic, group in by_topic(parts)]}
    return Plan(req, answer)


def add_offsets_to_txn(site: KafkaSite, header, body) -> Plan:
    """The group's offsets join the transaction (its partition of the offsets
    topic gets the transaction's marker); TxnOffsetCommit to the group's
    coordinator follows."""
    version = header.api_version
    req = m.AddOffsetsToTxn(transactional_id=body.transactional_id,
                            producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                            group=body.group_id)

    def answer(resp: m.AddOffsetsToTxnResponse) -> dict:
        return {"throttle_time_ms": 0,
                "error_code": txn_code(resp.error, "AddOffsetsToTxn", version, group_level=True)}
    return Plan(req, answer)


def end_txn(site: KafkaSite, header, body) -> Plan:
    """Commit or abort: answered once the coordinator's decision is durable;
    the markers follow (the id's next transaction waits for them:
    CONCURRENT_TRANSACTIONS)."""
    version = header.api_version
    req = m.EndTxn(transactional_id=body.transactional_id, producer_id=body.producer_id,
                   producer_epoch=body.producer_epoch, commit=bool(body.committed))

    def answer(resp: m.EndTxnResponse) -> dict:
        return {"throttle_time_ms": 0,
                "error_code": txn_code(resp.error, "EndTxn", version, group_level=True)}
    return Plan(req, answer)


def txn_offset_commit(site: KafkaSite, header, body) -> Plan:
    """Offsets committed in the producer's open transaction, to the group's
    coordinator: visible to the group once the transaction commits. v3
    carries the consumer's generation, member id and instance id (KIP-447),
    checked as OffsetCommit's; below v3 they are not checked. The leader
    epoch is not kept (as OffsetCommit's)."""
    version = header.api_version
    _at_most(sum(len(t.partitions) for t in body.topics), "offsets")
    offsets = tuple(OffsetCommit(t.name, p.partition_index, p.committed_offset,
                                 p.committed_metadata or "")
                    for t in body.topics for p in t.partitions)
    req = m.TxnOffsetCommit(transactional_id=body.transactional_id,
                            producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                            group=body.group_id, generation=body.generation_id,
                            member_id=body.member_id, group_instance_id=body.group_instance_id,
                            offsets=offsets)

    def answer(resp: m.TxnOffsetCommitResponse) -> dict:
        if resp.error:
            code = txn_code(resp.error, "TxnOffsetCommit", version, group_level=True)
            rows = [(t, p, code) for t, p, _o, _m in offsets]
        else:
            rows = [(t, p, txn_code(e, "TxnOffsetCommit", version))
                    for t, p, e, _msg in resp.parts]
        return {"throttle_time_ms": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "error_code": code} for _t, p, code in group]}
            for topic, group in by_topic(rows)]}
    return Plan(req, answer)


def describe_transactions(site: KafkaSite, header, body) -> Plan:
    """Each transactional id as its coordinator holds it, in the request's
    order (TRANSACTIONAL_ID_NOT_FOUND for one it does not know; NOT_COORDINATOR
    for one coordinated elsewhere): state, producer id and epoch, timeout,
    start time (-1 without an open transaction) and its partitions."""
    _at_most(len(body.transactional_ids), "transactional ids")
    ids = tuple(body.transactional_ids)
    if not ids:
        return Plan(None, lambda _r: {"throttle_time_ms": 0, "transaction_states": []})

    def answer(resp: m.DescribeTransactionsResponse) -> dict:
        if resp.error:
            code = kafka_group_code(resp.error)
            found = {}
        else:
            code = 0
            found = {d.transactional_id: d for d in resp.transactions}
        states = []
        for tid in ids:
            d = found.get(tid)
            if d is None:
                states.append({"error_code": code or TransactionalIdNotFoundError.code,
                               "transactional_id": tid, "transaction_state": "",
                               "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                               "producer_id": -1, "producer_epoch": -1, "topics": []})
                continue
            states.append({"error_code": kafka_group_code(d.error), "transactional_id": tid,
                           "transaction_state": d.state, "transaction_timeout_ms": d.timeout_ms,
                           "transaction_start_time_ms": d.start_ms,
                           "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                           "topics": [{"topic": topic, "partitions": [p for _t, p in group]}
                                      for topic, group in by_topic(d.parts)]})
        return {"throttle_time_ms": 0, "transaction_states": states}
    return Plan(m.DescribeTransactions(transactional_ids=ids), answer)


def list_transactions(site: KafkaSite, header, body) -> Plan:
    """The transactional ids this broker coordinates, in the states asked
    (none: all; a state Kafka does not name is answered in
    ``unknown_state_filters`` and matches nothing) and of the producer ids
    asked (none: all; filtered here). v1's duration filter (KIP-994: only
    transactions open longer than it) is refused, INVALID_REQUEST: our
    listing carries no start times (DescribeTransactions does)."""
    _at_most(len(body.state_filters) + len(body.producer_id_filters), "filters")
    asked = tuple(dict.fromkeys(body.state_filters))
    unknown = [s for s in asked if s not in STATES]
    known = tuple(s for s in asked if s in STATES)
    producers = frozenset(body.producer_id_filters)

    def empty(code: int = 0) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown,
                "transaction_states": []}
    if body.duration_filter >= 0:
        return Plan(None, lambda _r: empty(InvalidRequestError.code))
    if asked and not known:  # only unknown states: nothing matches
        return Plan(None, lambda _r: empty())

    def answer(resp: m.ListTransactionsResponse) -> dict:
        if resp.error:
            return empty(kafka_group_code(resp.error))
        out = empty()
        out["transaction_states"] = [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
             "transaction_state": t.state}
            for t in resp.transactions if not producers or t.producer_id in producers]
        return out
    return Plan(m.ListTransactions(states=known), answer)
