"""Kafka's DescribeConfigs, answered through our handlers (docs/kafka.md
§4.9): a topic's settings from our DescribeConfigs (api/configs.py), in
Kafka's names (topic_configs.py); a broker's settings under Kafka's
broker names, from this broker's configuration.

A topic entry is DYNAMIC_TOPIC_CONFIG when set on the topic (CreateTopics
or an AlterConfigs), else the broker's: STATIC_BROKER_CONFIG when the
broker's ``[log]`` sets it, DEFAULT_CONFIG otherwise. Topic entries are
writable (read_only false: AlterConfigs changes them, serve_alter_configs.py);
broker entries are read-only (we change none live). None is sensitive.
Kafka topic configs the topic has no value of ours for are shown at
Kafka's default (topic_configs.defaults_missing). Synonyms (v1+, when
asked) list the topic's value and the broker's, as Kafka does. v3's
documentation is null.

ACLs as our requests': topic resources are one DescribeConfigs
(describe_configs on each topic; one denied topic denies the request),
broker resources a DescribeCluster of no topics (describe on the
cluster). Kafka's admin clients send the two kinds in separate requests
(broker resources to that broker); a request mixing them gets
INVALID_REQUEST for its broker resources. A broker resource naming
another broker is INVALID_REQUEST (Kafka's "Unexpected broker id"); "" is
the cluster-wide default.
"""

from __future__ import annotations

import functools

from ..errors import InvalidRequestError
from ..protocol import messages as m
from ..storage.config import LogConfig
from . import topic_configs as tc
from .apis_configs import BROKER, TOPIC
from .plan import KafkaSite, Plan
from .wire_errors import kafka_code, kafka_message

DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5
# a topic config's broker-wide name (Kafka's synonyms); others share the topic's name
BROKER_NAMES = {"retention.ms": "log.retention.ms", "retention.bytes": "log.retention.bytes",
                "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms",
                "index.interval.bytes": "log.index.interval.bytes",
                "max.message.bytes": "message.max.bytes",
                "file.delete.delay.ms": "log.segment.delete.delay.ms",
                "cleanup.policy": "log.cleanup.policy",
                "delete.retention.ms": "log.cleaner.delete.retention.ms",
                "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
                "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
                "message.timestamp.type": "log.message.timestamp.type"}
_MIXED = "describe broker and topic configs in separate requests"


def describe_configs(site: KafkaSite, header, body) -> Plan:
    """One result per resource, in the request's order; ``configuration_keys``
    (when not null) keeps only the entries named."""
    topics = tuple(dict.fromkeys(r.resource_name for r in body.resources
                                 if r.resource_type == TOPIC))
    brokers = any(r.resource_type == BROKER for r in body.resources)
    req = m.DescribeConfigs(topics=topics) if topics else \
        m.DescribeCluster(topics=()) if brokers else None
    defaults = _broker_defaults(site)
    synonyms = body.include_synonyms

    def answer(resp) -> dict:
        found = {}
        if resp.__class__ is m.DescribeConfigsResponse and not resp.error:
            found = {name: (error, message, (configs, overrides))
                     for name, error, message, configs, overrides in resp.topics}
        results = []
        for r in body.resources:
            if resp is not None and resp.error:
                error, message, entries = resp.error, resp.message, []
            elif r.resource_type == TOPIC:
                error, message, configs = found.get(r.resource_name) or (
                    InvalidRequestError.code, "no answer for this topic", ({}, {}))
                entries = [] if error else _topic_entries(*configs, defaults, synonyms)
            elif r.resource_type == BROKER:
                error, message, entries = _broker_result(site, r.resource_name, defaults,
                                                         synonyms, mixed=bool(topics))
            else:
                error, message, entries = (InvalidRequestError.code, f"resource type "
                                           f"{r.resource_type} is not served (2 topic, 4 broker)",
                                           [])
            keys = r.configuration_keys
            if keys is not None:
                entries = [e for e in entries if e["name"] in keys]
            results.append({"error_code": kafka_code(error), "error_message":
                            kafka_message(message), "resource_type": r.resource_type,
                            "resource_name": r.resource_name, "configs": entries})
        throttle = getattr(resp, "throttle_ms", 0) if resp is not None else 0
        return {"throttle_time_ms": throttle, "results": results}
    return Plan(req, answer)


def _broker_defaults(site: KafkaSite) -> dict:
    """Kafka topic name -> (broker name, value, source, type) of this broker's defaults."""
    ours = site.config.storage.log.to_dict()
    stock = {name: value for name, value, _t in tc.to_kafka(LogConfig().to_dict())}
    out = {}
    for name, value, kind in tc.to_kafka(ours):
        source = DEFAULT if stock.get(name) == value else STATIC_BROKER
        out[name] = (BROKER_NAMES.get(name, name), value, source, kind)
    return out


def _entry(name: str, value: str, source: int, kind: int, synonyms: list,
           read_only: bool) -> dict:
    return {"name": name, "value": value, "read_only": read_only,
            "is_default": source == DEFAULT, "config_source": source, "is_sensitive": False,
            "synonyms": synonyms, "config_type": kind, "documentation": None}


def _topic_entries(configs: dict, overrides: dict, defaults: dict, with_synonyms: bool) -> list:
    """A topic's entries; topics with the same settings share one computed
    list (``_entries_of``: a DescribeConfigs of many topics costs the loop
    one computation per distinct set of settings). The entries are never
    mutated (``configuration_keys`` filters into a new list)."""
    try:
        return _entries_of(tuple(configs.items()), frozenset(overrides),
                           tuple(defaults.items()), with_synonyms)
    except TypeError:  # an unhashable value (none of ours): computed uncached
        return _entries_of.__wrapped__(tuple(configs.items()), frozenset(overrides),
                                       tuple(defaults.items()), with_synonyms)


@functools.lru_cache(maxsize=256)
def _entries_of(configs: tuple, overrides: frozenset, defaults: tuple,
                with_synonyms: bool) -> list:
    configs, defaults = dict(configs), dict(defaults)
    out = []
    for name, ours, kind, default in tc.BY_NAME:  # Kafka's names, sorted
        if ours in configs:
            value = tc.value_text(ours, configs[ours])
        elif default is not None:
            value = default
        else:
            continue
        broker = defaults.get(name)
        source = DYNAMIC_TOPIC if ours in overrides else \
            broker[2] if broker is not None else DEFAULT
        synonyms = []
        if with_synonyms:
            if source == DYNAMIC_TOPIC:
                synonyms.append({"name": name, "value": value, "source": DYNAMIC_TOPIC})
            if broker is not None:
                synonyms.append({"name": broker[0], "value": broker[1], "source": broker[2]})
        out.append(_entry(name, value, source, kind, synonyms, read_only=False))
    return out


def _broker_result(site: KafkaSite, name: str, defaults: dict, with_synonyms: bool,
                   mixed: bool) -> tuple:
    if mixed:
        return InvalidRequestError.code, _MIXED, []
    if name not in ("", str(site.broker_id)):
        return (InvalidRequestError.code, f"unexpected broker id {name!r}: this is broker "
                f"{site.broker_id}", [])
    rows = [(broker_name, value, source, kind) for broker_name, value, source, kind
            in defaults.values()]
    rows += broker_settings(site)
    return 0, "", [_entry(n, v, s, k, [{"name": n, "value": v, "source": s}]
                          if with_synonyms else [], read_only=True) for n, v, s, k in sorted(rows)]


def broker_settings(site: KafkaSite) -> list:
    """The broker configs Kafka clients read that are not topic defaults:
    (Kafka name, value, source, type), from this broker's configuration."""
    c = site.config
    cluster = c.etcd is not None
    rf = c.default_replication_factor or (3 if cluster else 1)
    return [("num.partitions", str(c.default_partitions), STATIC_BROKER, tc.INT),
            ("auto.create.topics.enable", "true" if c.auto_create_topics else "false",
             STATIC_BROKER, tc.BOOLEAN),
            ("broker.id", str(site.broker_id), STATIC_BROKER, tc.INT),
            ("node.id", str(site.broker_id), STATIC_BROKER, tc.INT),
            ("default.replication.factor", str(rf), STATIC_BROKER, tc.INT),
            ("min.insync.replicas", "1", DEFAULT, tc.INT),
            ("unclean.leader.election.enable", "false", DEFAULT, tc.BOOLEAN),
            ("offsets.topic.num.partitions", str(c.offsets_topic_num_partitions),
             STATIC_BROKER, tc.INT),
            ("offsets.topic.replication.factor",
             str(c.offsets_topic_replication_factor if cluster else 1), STATIC_BROKER, tc.INT),
            ("offsets.topic.segment.bytes", str(c.offsets_topic_segment_bytes), STATIC_BROKER,
             tc.INT),
            ("group.min.session.timeout.ms", str(c.group_min_session_timeout_ms),
             STATIC_BROKER, tc.INT),
            ("group.max.session.timeout.ms", str(c.group_max_session_timeout_ms),
             STATIC_BROKER, tc.INT),
            ("group.max.size", str(c.group_max_size), STATIC_BROKER, tc.INT),
            ("group.initial.rebalance.delay.ms", str(c.group_initial_rebalance_delay_ms),
             STATIC_BROKER, tc.INT),
            ("replica.lag.time.max.ms", str(c.replica_lag_time_max_ms), STATIC_BROKER, tc.LONG),
            ("socket.request.max.bytes", str(c.max_frame_bytes), STATIC_BROKER, tc.INT),
            ("compression.type", "producer", DEFAULT, tc.STRING),
            ("log.message.timestamp.type", "CreateTime", DEFAULT, tc.STRING)]
