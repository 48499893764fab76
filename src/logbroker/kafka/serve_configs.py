"""Kafka's DescribeConfigs, answered through our handlers (docs/kafka.md
§4.9): a topic's settings from our DescribeTopics, in Kafka's names
(topic_configs.py); a broker's topic defaults under Kafka's broker names,
from this broker's settings. Every entry is read-only (topic settings are
given at creation; nothing alters them yet) and not sensitive.

A topic entry's source is DYNAMIC_TOPIC_CONFIG when its value differs from
the broker's default, else the broker's: STATIC_BROKER_CONFIG when the
broker's ``[log]`` sets it, DEFAULT_CONFIG otherwise (a topic created with
exactly the default value reads as the default). Synonyms (v1+, when
asked) list the topic's value and the broker's, as Kafka does.

ACLs as our requests': topic resources are one DescribeTopics (describe on
each topic; one denied topic denies the request), broker resources a
DescribeCluster of no topics (describe on the cluster). Kafka's admin
clients send the two kinds in separate requests (broker resources to that
broker); a request mixing them gets INVALID_REQUEST for its broker
resources. A broker resource naming another broker is INVALID_REQUEST
(Kafka's "Unexpected broker id"); "" is the cluster-wide default.
"""

from __future__ import annotations

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
    req = m.DescribeTopics(topics=topics) if topics else \
        m.DescribeCluster(topics=()) if brokers else None
    defaults = _broker_defaults(site)
    synonyms = body.include_synonyms

    def answer(resp) -> dict:
        found = {}
        if resp.__class__ is m.DescribeTopicsResponse and not resp.error:
            found = {name: (error, message, configs)
                     for name, error, message, configs, _parts in resp.topics}
        results = []
        for r in body.resources:
            if resp is not None and resp.error:
                error, message, entries = resp.error, resp.message, []
            elif r.resource_type == TOPIC:
                error, message, configs = found.get(r.resource_name) or (
                    InvalidRequestError.code, "no answer for this topic", {})
                entries = [] if error else _topic_entries(configs, defaults, synonyms)
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
    """Kafka topic name -> (broker name, value, source) of this broker's defaults."""
    ours = site.config.storage.log.to_dict()
    stock = {name: value for name, value, _t in tc.to_kafka(LogConfig().to_dict())}
    out = {}
    for name, value, kind in tc.to_kafka(ours):
        source = DEFAULT if stock.get(name) == value else STATIC_BROKER
        out[name] = (BROKER_NAMES.get(name, name), value, source, kind)
    return out


def _entry(name: str, value: str, source: int, kind: int, synonyms: list) -> dict:
    return {"name": name, "value": value, "read_only": True, "is_default": source == DEFAULT,
            "config_source": source, "is_sensitive": False, "synonyms": synonyms,
            "config_type": kind, "documentation": None}


def _topic_entries(configs: dict, defaults: dict, with_synonyms: bool) -> list:
    out = []
    for name, value, kind in tc.to_kafka(configs):
        broker = defaults.get(name)
        source = DYNAMIC_TOPIC if broker is None or broker[1] != value else broker[2]
        synonyms = []
        if with_synonyms:
            if source == DYNAMIC_TOPIC:
                synonyms.append({"name": name, "value": value, "source": DYNAMIC_TOPIC})
            if broker is not None:
                synonyms.append({"name": broker[0], "value": broker[1], "source": broker[2]})
        out.append(_entry(name, value, source, kind, synonyms))
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
    rows += [("num.partitions", str(site.config.default_partitions), STATIC_BROKER, tc.INT),
             ("auto.create.topics.enable", "true" if site.config.auto_create_topics else "false",
              STATIC_BROKER, tc.BOOLEAN),
             ("broker.id", str(site.broker_id), STATIC_BROKER, tc.INT)]
    return 0, "", [_entry(n, v, s, k, [{"name": n, "value": v, "source": s}]
                          if with_synonyms else []) for n, v, s, k in sorted(rows)]
