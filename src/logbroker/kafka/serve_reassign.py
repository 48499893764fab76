"""AlterPartitionReassignments and ListPartitionReassignments through our
AlterReassignments and ListReassignments (api/reassign.py; docs/kafka.md).

Any broker answers (Kafka sends these to the controller; ours all write
etcd, and Metadata names the controller, so clients that insist on it
reach it too). ``timeout_ms`` is not waited on: the answer comes once
every move has started, as Kafka's does. A refusal of the whole request
(CLUSTER_UNAVAILABLE, too many partitions, a partition twice) goes out as
the top-level error, each partition's as its own.
"""

from __future__ import annotations

from ..protocol import messages as m
from ..protocol.reassign_messages import Reassignment, WantedTopic
from .plan import KafkaSite, Plan, by_topic
from .wire_errors import kafka_code, kafka_message


def alter_partition_reassignments(site: KafkaSite, header, body) -> Plan:
    req = m.AlterReassignments(parts=tuple(
        Reassignment(t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
        for t in body.topics for p in t.partitions))

    def answer(resp: m.AlterReassignmentsResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error),
                    "error_message": kafka_message(resp.message), "responses": []}
        return {"error_code": 0, "error_message": None, "responses": [
            {"name": topic, "partitions": [
                {"partition_index": p.partition, "error_code": kafka_code(p.error),
                 "error_message": kafka_message(p.message)} for p in parts]}
            for topic, parts in by_topic(resp.parts)]}
    return Plan(req, answer)


def list_partition_reassignments(site: KafkaSite, header, body) -> Plan:
    topics = None if body.topics is None else tuple(
        WantedTopic(t.name, tuple(t.partition_indexes)) for t in body.topics)
    req = m.ListReassignments(topics=topics)

    def answer(resp: m.ListReassignmentsResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error),
                    "error_message": kafka_message(resp.message), "topics": []}
        return {"error_code": 0, "error_message": None, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": p.partition, "replicas": list(p.replicas),
                 "adding_replicas": list(p.adding), "removing_replicas": list(p.removing)}
                for p in parts]}
            for topic, parts in by_topic(resp.parts)]}
    return Plan(req, answer)
