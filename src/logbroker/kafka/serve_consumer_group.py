"""Kafka's consumer group protocol (KIP-848), answered through our
coordinator: ConsumerGroupHeartbeat (v0-1) and ConsumerGroupDescribe (v0)
(docs/kafka.md "Consumer groups of Kafka 4").

Kafka names assigned partitions by topic id; ours by name. The translator
maps them with the topic ids of the moment (topic_ids.py): owned partitions
of a topic id no longer known are dropped (the member learns the topic is
gone from Metadata, UNKNOWN_TOPIC_ID), as Kafka's coordinator ignores them.
A v0 heartbeat has no regex; a v1 member gives its own member id (KIP-1082)
and a v0 member gets one with its first answer.
"""

from __future__ import annotations

from ..protocol import messages as m
from ..protocol.consumer_group_messages import TopicPartitions
from .plan import KafkaSite, Plan
from .topic_ids import NO_TOPIC_ID, ids_by_name, names_by_id
from .wire_errors import kafka_group_code, kafka_message


def consumer_group_heartbeat(site: KafkaSite, header, body) -> Plan:
    owned = None
    if body.topic_partitions is not None:
        names = names_by_id(site)
        owned = tuple(TopicPartitions(names[tp.topic_id], tuple(tp.partitions))
                      for tp in body.topic_partitions if tp.topic_id in names)
    req = m.ConsumerGroupHeartbeat(
        group=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        topic_names=None if body.subscribed_topic_names is None
        else tuple(body.subscribed_topic_names),
        topic_regex=body.subscribed_topic_regex, assignor=body.server_assignor, owned=owned,
        client_id=header.client_id or "")

    def answer(resp: m.ConsumerGroupHeartbeatResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_group_code(resp.error),
                    "error_message": kafka_message(resp.message), "member_epoch": -1}
        assignment = None
        if resp.assignment is not None:
            ids = ids_by_name(site, [tp.topic for tp in resp.assignment])
            assignment = {"topic_partitions": [
                {"topic_id": ids[tp.topic], "partitions": list(tp.partitions)}
                for tp in resp.assignment if tp.topic in ids]}
        return {"error_code": 0, "member_id": resp.member_id, "member_epoch": resp.member_epoch,
                "heartbeat_interval_ms": resp.heartbeat_interval_ms, "assignment": assignment}
    return Plan(req, answer)


def consumer_group_describe(site: KafkaSite, header, body) -> Plan:
    req = m.ConsumerGroupDescribe(groups=tuple(body.group_ids))

    def answer(resp: m.ConsumerGroupDescribeResponse) -> dict:
        if resp.error:
            return {"groups": [{"error_code": kafka_group_code(resp.error),
                                "error_message": kafka_message(resp.message), "group_id": g}
                               for g in body.group_ids]}
        ids = ids_by_name(site, {tp.topic for g in resp.groups for mb in g.members
                                 for tp in (*mb.assigned, *mb.target)})

        def parts(rows) -> dict:
            return {"topic_partitions": [
                {"topic_id": ids.get(tp.topic, NO_TOPIC_ID), "topic_name": tp.topic,
                 "partitions": list(tp.partitions)} for tp in rows]}
        return {"groups": [{
            "error_code": kafka_group_code(g.error), "error_message": kafka_message(g.message),
            "group_id": g.group, "group_state": g.state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor,
            "members": [{"member_id": mb.member_id, "instance_id": mb.instance_id,
                         "rack_id": mb.rack_id, "member_epoch": mb.member_epoch,
                         "client_id": mb.client_id, "client_host": mb.host,
                         "subscribed_topic_names": list(mb.topic_names),
                         "subscribed_topic_regex": mb.topic_regex,
                         "assignment": parts(mb.assigned), "target_assignment": parts(mb.target)}
                        for mb in g.members]} for g in resp.groups]}
    return Plan(req, answer)
