"""Kafka's partition and records administration through our handlers
(docs/kafka.md): CreatePartitions (our CreatePartitions), DeleteRecords
(our DeleteRecords, asked of each partition's leader as Kafka clients do)
and DescribeLogDirs (our DescribeTopics: the data dir is the broker's one
log dir). Each function takes the ``KafkaSite``, the request header and
body, and returns a ``Plan`` (plan.py).
"""

from __future__ import annotations

import logging
import os
from collections import Counter

from ..errors import InvalidRequestError
from ..protocol import messages as m
from ..protocol.partition_messages import PartitionsIncrease, RecordsCut
from .plan import KafkaSite, Plan, by_topic
from .wire_errors import kafka_code, kafka_message

log = logging.getLogger("logbroker.kafka")


def create_partitions(site: KafkaSite, header, body) -> Plan:
    """Each topic's new total count and, when given, the new partitions'
    replicas (one broker list each); ``validate_only`` checks only. A topic
    named twice is INVALID_REQUEST for each of its entries (Kafka's rule)."""
    names = [t.name for t in body.topics]
    twice = {n for n, k in Counter(names).items() if k > 1}
    asked = tuple(PartitionsIncrease(t.name, t.count, tuple(
        tuple(a.broker_ids) for a in t.assignments or ())) for t in body.topics
        if t.name not in twice)
    if twice:
        log.debug("CreatePartitions: topic(s) %s named twice", sorted(twice))
    req = m.CreatePartitions(topics=asked, validate_only=bool(body.validate_only)) if asked \
        else None

    def answer(resp) -> dict:
        results = {}
        if resp is not None and resp.error:
            results = {t.name: (resp.error, resp.message) for t in asked}
        elif resp is not None:
            results = {name: (error, message) for name, error, message in resp.topics}
        out = []
        for name in names:
            if name in twice:
                error, message = InvalidRequestError.code, f"topic {name!r} is named twice"
            else:
                error, message = results.get(name, (0, ""))
            out.append({"name": name, "error_code": kafka_code(error),
                        "error_message": kafka_message(message)})
        return {"throttle_time_ms": 0, "results": out}
    return Plan(req, answer)


def delete_records(site: KafkaSite, header, body) -> Plan:
    """Each partition's log start moved to its offset (-1: the high
    watermark); the answer's low watermark is the log start after it."""
    parts = tuple(RecordsCut(t.name, p.partition_index, p.offset) for t in body.topics
                  for p in t.partitions)

    def answer(resp: m.DeleteRecordsResponse) -> dict:
        if resp.error:
            rows = [(t, p, resp.error, -1) for t, p, _o in parts]
        else:
            rows = [(t, p, error, low) for t, p, error, _msg, low in resp.parts]
        return {"throttle_time_ms": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": index, "low_watermark": low, "error_code": kafka_code(error)}
            for _t, index, error, low in group]} for topic, group in by_topic(rows)]}
    return Plan(m.DeleteRecords(parts=parts), answer)


def describe_log_dirs(site: KafkaSite, header, body) -> Plan:
    """The data dir as the one log dir, with every partition this broker
    hosts (a leader's or a follower's replica) of the named topics (null:
    every topic): its size and offset lag (how far its log end is behind
    the high watermark it knows: 0 on a leader); never a future log."""
    wanted = None if body.topics is None else {t.topic: set(t.partitions) for t in body.topics}
    known = site.meta.topic_counts() if wanted is not None else {}  # one read, not one per name
    req = m.DescribeTopics(topics=None if wanted is None else tuple(t for t in wanted if t in known))
    log_dir = os.path.abspath(site.config.data_dir)

    def answer(resp: m.DescribeTopicsResponse) -> dict:
        if resp.error:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": kafka_code(resp.error), "log_dir": log_dir, "topics": []}]}
        topics = []
        for name, error, _msg, _configs, parts in resp.topics:
            keep = None if wanted is None else wanted.get(name, set())
            rows = [{"partition_index": p.partition, "partition_size": p.size_bytes,
                     "offset_lag": max(0, p.high_watermark - p.log_end), "is_future_key": False}
                    for p in parts if not p.error and (keep is None or p.partition in keep)]
            if not error and rows:
                topics.append({"name": name, "partitions": rows})
        return {"throttle_time_ms": 0, "results": [
            {"error_code": 0, "log_dir": log_dir, "topics": topics}]}
    return Plan(req, answer)
