"""Kafka requests about the cluster and its topics, answered through our
handlers: ApiVersions, Metadata, CreateTopics, DeleteTopics (docs/kafka.md,
"Listener"; InitProducerId is serve_txn.py's). Each function takes the ``KafkaSite``, the
request header and body, and returns a ``Plan`` (plan.py).
"""

from __future__ import annotations

import logging

from ..cluster.placement import given
from ..errors import (InvalidReplicaAssignmentError, InvalidRequestError, LogbrokerError,
                      UnknownTopicIdError)
from ..limits import (MAX_ASSIGNMENT_TEXT, MAX_PARTITIONS, REPLICA_ASSIGNMENT, check_new_topic,
                      check_request_partitions, format_replica_assignment,
                      parse_replica_assignment)
from ..protocol import messages as m
from ..protocol.parts import NewTopic
from . import cluster_meta
from .api_versions import answer_api_versions
from .plan import KafkaSite, Plan
from .topic_configs import to_ours
from .topic_ids import NO_TOPIC_ID, ids_by_name, names_by_id
from .wire_errors import kafka_code, kafka_message

CLUSTER_ID = "logbroker"

_log = logging.getLogger("logbroker.kafka")
MAX_ASSIGNMENT_IDS = MAX_ASSIGNMENT_TEXT // 2  # the most a text of that size holds ("1:1,...")


def api_versions(site: KafkaSite, header, body) -> Plan:
    """The supported table, limited to the APIs served (a newer version
    was answered by the codec's rule; a v3 naming its client software
    wrongly is answered INVALID_REQUEST, as Kafka does)."""
    def answer(_r) -> dict:
        _, out = answer_api_versions(header, request=body)
        out["api_keys"] = [k for k in out["api_keys"] if k["api_key"] in site.served]
        return out
    return Plan(None, answer)


def metadata(site: KafkaSite, header, body) -> Plan:
    """Topics as our Metadata gives them (auto-created as ours are: when the
    client allows it and ``auto_create_topics``), brokers at their Kafka
    addresses, the controller and each partition's leader, replicas, ISR,
    offline replicas and epoch (cluster_meta.py: this broker alone on a
    single node; the cluster's view in a cluster, where a leader without a
    Kafka address is LEADER_NOT_AVAILABLE). v0 asks for every topic with an
    empty list, v1+ with null. v10+ answers each topic's id (topic_ids.py);
    a topic asked for by id (a null name) is looked up by it, an unknown id
    answered UNKNOWN_TOPIC_ID without a name, as Kafka does from v12."""
    version = header.api_version
    unknown_ids: list = []
    if body.topics is None:
        names = None
    elif version >= 10 and any(t.name is None for t in body.topics):
        known = names_by_id(site)
        names = tuple(t.name for t in body.topics if t.name is not None)
        for t in body.topics:
            if t.name is None:
                found = known.get(t.topic_id)
                if found is None:
                    unknown_ids.append(t.topic_id)
                else:
                    names += (found,)
    else:
        names = tuple(t.name for t in body.topics)
    if version == 0 and not names:
        names = None
    req = m.Metadata(topics=names, auto_create=bool(body.allow_auto_topic_creation))

    def answer(resp: m.MetadataResponse) -> dict:
        parts: dict = {}
        for topic, index, leader, epoch, replicas, isr in resp.partitions:
            parts.setdefault(topic, []).append(
                cluster_meta.partition(site, index, leader, epoch, replicas, isr))
        if resp.error:  # the whole request refused: every named topic carries it
            topics = [{"error_code": kafka_code(resp.error), "name": n} for n in names or ()]
        else:
            topics = [{"error_code": kafka_code(error), "name": name,
                       "partitions": parts.get(name, []) if not error else []}
                      for name, error, _msg, _count in resp.topics]
        if version >= 10:
            ids = ids_by_name(site, [t["name"] for t in topics if not t["error_code"]])
            for topic in topics:
                topic["topic_id"] = ids.get(topic["name"], NO_TOPIC_ID)
            topics += [{"error_code": UnknownTopicIdError.code, "topic_id": tid,
                        "name": None if version >= 12 else ""}
                       for tid in unknown_ids]
        return {"brokers": cluster_meta.brokers(site), "cluster_id": CLUSTER_ID,
                "controller_id": cluster_meta.controller_id(site), "topics": topics}
    return Plan(req, answer)


def create_topics(site: KafkaSite, header, body) -> Plan:
    """Kafka's topic settings are ours by topic_configs.py's table
    (``retention.ms`` is ``retention_ms``, ``max.message.bytes``
    ``max_batch_bytes``, ...), values as strings (parsed by their Kafka
    type; INVALID_CONFIG naming the config for an unknown name or a value
    we cannot take);
    -1 partitions is the broker's default, -1 replication factor ours (1 on
    a single node). A manual replica assignment (``_manual``) is the
    topic's placement: its partition count and replication factor.
    ``validate_only`` creates nothing: each topic's answer says whether it
    passes the handler's checks (``limits.check_new_topic``: name, not
    internal, partitions, settings; an assignment's brokers registered)."""
    topics, refused = [], {}
    for t in body.topics:
        try:
            configs = {k: v for k, v in (to_ours(c.name, c.value) for c in t.configs)
                       if v is not None}  # a null value: Kafka's "no value", the default
            if t.replication_factor != -1:
                configs["replication_factor"] = t.replication_factor
            parts = site.config.default_partitions if t.num_partitions == -1 else t.num_partitions
            if t.assignments:
                parts, configs[REPLICA_ASSIGNMENT] = _manual(t)
            if body.validate_only:  # what the handler would check, without creating
                check_new_topic(t.name, parts, configs)
                if t.assignments:  # the brokers too, as Kafka's validate_only does
                    given(parse_replica_assignment(configs[REPLICA_ASSIGNMENT]), parts, None,
                          [b.id for b in site.meta.brokers()])
            topics.append(NewTopic(t.name, parts, configs))
        except LogbrokerError as exc:
            _log.debug("CreateTopics of %r refused: %s", t.name[:80], exc.message)
            refused[t.name] = (exc.code, exc.message)
    if body.validate_only:
        try:
            check_request_partitions(topics, site.config.max_partitions_per_request)
        except LogbrokerError as exc:
            refused = {t.name: (exc.code, exc.message) for t in body.topics}
    req = None if body.validate_only else m.CreateTopics(topics=tuple(topics))

    def answer(resp) -> dict:
        results = {}
        if resp is not None and resp.error:  # the whole request refused: every topic says so
            results = {t.name: (resp.error, resp.message) for t in body.topics}
        elif resp is not None:
            results = {name: (error, message) for name, error, message in resp.topics}
        out = []
        for t in body.topics:
            error, message = refused.get(t.name) or results.get(t.name) or (0, "")
            out.append({"name": t.name, "error_code": kafka_code(error),
                        "error_message": kafka_message(message)})
        return {"topics": out}
    return Plan(req, answer)


def _manual(t) -> "tuple[int, str]":
    """A topic's manual assignment as Kafka takes it: (its partition count,
    its lists as our REPLICA_ASSIGNMENT text, checked by the handler).
    num_partitions and replication_factor must be -1 (INVALID_REQUEST); the
    lists number the partitions 0..n-1, each once, in any order
    (INVALID_REPLICA_ASSIGNMENT)."""
    if t.num_partitions != -1 or t.replication_factor != -1:
        raise InvalidRequestError("a manual replica assignment needs num_partitions and "
                                  "replication_factor -1: the lists give both")
    if len(t.assignments) > MAX_PARTITIONS:
        raise InvalidReplicaAssignmentError(f"{len(t.assignments)} replica lists: at most "
                                            f"{MAX_PARTITIONS} partitions")
    if sum(len(a.broker_ids) for a in t.assignments) > MAX_ASSIGNMENT_IDS:
        raise InvalidReplicaAssignmentError(f"the replica lists name over {MAX_ASSIGNMENT_IDS} "
                                            "brokers in all")
    rows = sorted(t.assignments, key=lambda a: a.partition_index)
    if [a.partition_index for a in rows] != list(range(len(rows))):
        raise InvalidReplicaAssignmentError("a manual replica assignment must number its "
                                            "partitions 0..n-1, each once")
    empty = [a.partition_index for a in rows if not a.broker_ids]
    if empty:
        raise InvalidReplicaAssignmentError(f"partition {empty[0]}'s replica list is empty")
    return len(rows), format_replica_assignment(a.broker_ids for a in rows)


def delete_topics(site: KafkaSite, header, body) -> Plan:
    req = m.DeleteTopics(topics=tuple(body.topic_names))

    def answer(resp: m.DeleteTopicsResponse) -> dict:
        if resp.error:
            return {"responses": [{"name": n, "error_code": kafka_code(resp.error)}
                                  for n in body.topic_names]}
        return {"responses": [{"name": name, "error_code": kafka_code(error)}
                              for name, error, _msg in resp.topics]}
    return Plan(req, answer)

