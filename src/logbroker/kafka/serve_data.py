"""Kafka data requests, answered through our handlers: Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch (docs/kafka.md, "Listener"). Each function takes the
``KafkaSite``, the request header and body, and returns a ``Plan`` (plan.py).

Partition answers go out grouped by topic, in the order of the request.
A whole-request refusal of ours (a top-level error, e.g. INVALID_REQUEST
for a timeout out of range) becomes every partition's error.
"""

from __future__ import annotations

import time
from functools import partial

from ..errors import (CorruptRecordError, InvalidProducerEpochError, InvalidRequestError,
                      LogbrokerError, OffsetOutOfRangeError, ProducerFencedError)
from ..protocol import messages as m
from ..protocol.parts import EpochQuery, FetchPart, OffsetQuery, ProducePart
from ..records.compression import READ_LIMIT
from ..storage.incoming import Convert
from .fetch_records import kafka_records
from .legacy_messages import Budget, is_legacy, up_convert
from .plan import CLOSE, NO_ANSWER, KafkaSite, Plan, by_topic
from .wire_errors import kafka_code, kafka_message

_NO_RECORDS = (CorruptRecordError.code, "a partition's records are null")
_ISOLATION = (InvalidRequestError.code, "isolation_level must be 0 (read_uncommitted) "
              "or 1 (read_committed)")


def produce(site: KafkaSite, header, body) -> Plan:
    """Each partition's records (Kafka batches v2, a view of the frame) are
    appended as they arrived; acks as ours (0: no answer, 1, -1 all). In
    Produce v0-2, a legacy message set (magic 0/1) is first up-converted
    to one v2 batch (legacy_messages.py), in the broker's inflation thread
    (a ``Convert`` part, api/inflation.py); its errors are its partition's.
    A transactional producer's ``transactional_id`` (v3+) goes with the
    request (ACLs: WRITE on the TransactionalId); its batches carry the
    producer id and epoch. A fenced producer's batches are answered
    INVALID_PRODUCER_EPOCH (47), Kafka's answer to a Produce (clients then
    learn of the fencing from the coordinator), never PRODUCER_FENCED."""
    parts, payload, refused, append_ms = [], [], {}, {}
    legacy = Budget() if header.api_version < 3 else None
    for topic in body.topic_data:
        for p in topic.partition_data:
            key, records = (topic.name, p.index), p.records
            if records is None:
                refused[key] = _NO_RECORDS
                continue
            if legacy is not None and is_legacy(records):
                records = Convert(records, partial(_up_convert, records, int(time.time() * 1000),
                                                   legacy, append_ms, key))
            parts.append(ProducePart(topic.name, p.index, len(records)))
            payload.append(records)
    req = m.Produce(acks=body.acks, timeout_ms=body.timeout_ms, parts=tuple(parts),
                    payload=tuple(payload),
                    transactional_id=body.transactional_id) if parts else None

    def answer(resp):
        if resp is m.CLOSE_CONNECTION:
            return CLOSE
        if body.acks == 0:
            return NO_ANSWER
        rows = {}
        if resp is not None:
            for topic, index, error, message, base, start in resp.parts:
                rows[(topic, index)] = (error, message, base, start)
            top = (resp.error, resp.message) if resp.error else None
        else:
            top = None
        responses = []
        for topic in body.topic_data:
            out = []
            for p in topic.partition_data:
                key = (topic.name, p.index)
                error, message, base, start = rows.get(key) or (*(refused.get(key) or top
                                                                   or _NO_RECORDS), -1, -1)
                code = kafka_code(error)
                if code == ProducerFencedError.code:
                    code = InvalidProducerEpochError.code
                out.append({"index": p.index, "error_code": code,
                            "base_offset": base, "log_start_offset": start,
                            "log_append_time_ms": append_ms.get(key, -1) if not error else -1,
                            "error_message": kafka_message(message)})
            responses.append({"name": topic.name, "partition_responses": out})
        throttle = resp.throttle_ms if resp.__class__ is m.ProduceResponse else 0
        return {"responses": responses, "throttle_time_ms": throttle}
    return Plan(req, answer)


def _up_convert(records, now_ms: int, budget: Budget, append_ms: dict, key) -> bytes:
    """A legacy message set as one v2 batch (in the broker's inflation
    thread: it inflates and walks every message), its log-append time
    noted for the answer."""
    converted = up_convert(records, now_ms=now_ms, limit=READ_LIMIT, budget=budget)
    append_ms[key] = converted.log_append_ms
    return converted.batch


def fetch(site: KafkaSite, header, body) -> Plan:
    """A long poll through our Fetch (max_wait_ms, min_bytes, max_bytes);
    no fetch sessions (session id 0 answered: the client sends full
    fetches). ``isolation_level`` 1 (read_committed) reads up to each
    partition's last stable offset and answers it with the aborted
    transactions of the returned range (producer id, first offset: the
    client drops their records); 0 reads up to the high watermark and
    answers each log's last stable offset too, as Kafka does at every level
    (read from the log when the answer is built: O(1), the records read
    unchanged; capped by the answer's high watermark), aborted_transactions
    null; any other level is INVALID_REQUEST for every partition. Records go out as Kafka
    batches (fetch_records.py): a partition's segment file slice as it lies
    when it holds Kafka batches only (sendfile, as our Fetch), else read and
    its batches of ours converted; control batches (markers) go out with
    the records, as Kafka's do (clients skip them)."""
    parts = tuple(FetchPart(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
                  for t in body.topics for p in t.partitions)
    committed = body.isolation_level == 1
    if body.isolation_level not in (0, 1):
        return Plan(None, lambda _r: _fetch_answer(
            [(t, p, _ISOLATION[0], -1, -1, b"") for t, p, _o, _b in parts], {}, False))
    # a negative fetch offset is OFFSET_OUT_OF_RANGE to Kafka; ours reads -2 / -1
    # as the log's ends (api/fetch.py), so those parts never reach it
    negative = [i for i, part in enumerate(parts) if part.offset < 0]
    read = tuple(part for part in parts if part.offset >= 0) if negative else parts
    req = m.Fetch(max_wait_ms=body.max_wait_ms, min_bytes=body.min_bytes,
                  max_bytes=body.max_bytes, parts=read, isolation=1 if committed else 0)

    def answer(resp: m.FetchResponse) -> dict:
        if resp.error:
            rows = [(t, p, resp.error, -1, -1, b"") for t, p, _o, _b in parts]
        else:
            rows = [(t, p, error, hw, start, data) for (t, p, error, _msg, hw, start, _n), data
                    in zip(resp.parts, resp.payload)]
            for i in negative:
                rows.insert(i, (parts[i].topic, parts[i].partition, OffsetOutOfRangeError.code,
                                -1, -1, b""))
        txn = {(t, p): (lso, aborted) for t, p, lso, aborted in resp.txn} if committed \
            else _stable_offsets(site.meta, rows)
        out = _fetch_answer(rows, txn, committed)
        out["throttle_time_ms"] = resp.throttle_ms
        return out
    return Plan(req, answer)


def _fetch_answer(rows, txn: dict, committed: bool) -> dict:
    """The Fetch response of ``rows`` (topic, partition, error, hw, log
    start, data); ``txn``: (topic, partition) -> (lso, aborted) of a
    read_committed fetch (a partition without one: its high watermark, no
    aborted transaction)."""
    responses = []
    for topic, group in by_topic(rows):
        out = []
        for _t, index, error, hw, start, data in group:
            records, problem = kafka_records(data) if len(data) else (b"", 0)
            lso, aborted = txn.get((topic, index), (hw, ()))
            out.append({"partition_index": index, "error_code": kafka_code(error or problem),
                        "high_watermark": hw, "log_start_offset": start,
                        "last_stable_offset": -1 if error else lso,
                        "aborted_transactions": None if error or not committed else [
                            {"producer_id": pid, "first_offset": first}
                            for pid, first in aborted],
                        "records": records})
        responses.append({"topic": topic, "partitions": out})
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


def _stable_offsets(meta, rows) -> dict:
    """A read_uncommitted answer's ``txn`` map: (topic, partition) -> (the
    log's last stable offset, no aborted transaction) for each row read
    without error, the LSO capped by the row's high watermark (the log may
    have moved on since the read). A row whose log is not at hand (it left
    this broker meanwhile, or no metadata) keeps its high watermark."""
    out = {}
    if meta is None:
        return out
    for topic, partition, error, hw, _start, _data in rows:
        if error or hw < 0:
            continue
        try:
            lso = meta.log_for(topic, partition).last_stable_offset
        except LogbrokerError:
            continue
        out[(topic, partition)] = (min(lso, hw), ())
    return out


def list_offsets(site: KafkaSite, header, body) -> Plan:
    """Earliest (-2), latest (-1) or the first offset whose timestamp is at
    or after a time; the answer's leader epoch is -1. ``isolation_level``
    (v2+) 1 (read_committed): latest is the last stable offset and no
    answer lies past it; 0: the high watermark; any other level is
    INVALID_REQUEST for every partition."""
    parts = tuple(OffsetQuery(t.name, p.partition_index, p.timestamp) for t in body.topics
                  for p in t.partitions)
    bad = body.isolation_level not in (0, 1)
    req = None if bad else m.ListOffsets(parts=parts, isolation=body.isolation_level)

    def answer(resp) -> dict:
        if resp is None or resp.error:
            error = _ISOLATION[0] if resp is None else resp.error
            rows = [(t, p, error, -1, -1) for t, p, _s in parts]
        else:
            rows = [(t, p, error, offset, ts) for t, p, error, _msg, offset, ts in resp.parts]
        return {"topics": [{"name": topic, "partitions": [
            {"partition_index": index, "error_code": kafka_code(error), "timestamp": ts,
             "offset": offset} for _t, index, error, offset, ts in group]}
            for topic, group in by_topic(rows)]}
    return Plan(req, answer)


def offset_for_leader_epoch(site: KafkaSite, header, body) -> Plan:
    """KIP-320's check of a consumer's position: for each partition the
    largest epoch <= the one asked for in the leader's history and where
    it ends (the next epoch's first offset, or the log end), through our
    OffsetForLeaderEpoch (the one replicas use). ``current_leader_epoch``
    (v2+) is checked when given: older than the leader's is
    FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1 (v0-1) is not
    checked. A consumer's replica id is -1 whatever it sent (v3 lets a
    client send -2, "debugging")."""
    parts = tuple(EpochQuery(t.topic, p.partition, p.current_leader_epoch, p.leader_epoch)
                  for t in body.topics for p in t.partitions)
    req = m.OffsetForLeaderEpoch(replica_id=-1, parts=parts)

    def answer(resp: m.OffsetForLeaderEpochResponse) -> dict:
        if resp.error:
            rows = [(t, p, resp.error, -1, -1) for t, p, _c, _e in parts]
        else:
            rows = [(t, p, error, epoch, end) for t, p, error, _msg, epoch, end in resp.parts]
        return {"throttle_time_ms": 0, "topics": [{"topic": topic, "partitions": [
            {"error_code": kafka_code(error), "partition": index, "leader_epoch": epoch,
             "end_offset": end} for _t, index, error, epoch, end in group]}
            for topic, group in by_topic(rows)]}
    return Plan(req, answer)
