"""Kafka's AlterConfigs (key 33) and IncrementalAlterConfigs (key 44),
planned as one AlterConfigs of ours (api/configs.py; docs/kafka.md §4.9).

Topic resources only: each config's Kafka name and value become ours
(topic_configs.to_ours: an unknown name or a bad value is INVALID_CONFIG
naming it, for that resource only). AlterConfigs replaces the topic's
whole set of its own settings with the given ones (Kafka's semantics: a
setting left out returns to the broker's default); IncrementalAlterConfigs
applies SET / DELETE / APPEND / SUBTRACT to the settings the topic has.
``validate_only`` checks without changing anything.

Broker resources are refused (INVALID_REQUEST, "broker configs are
read-only here"): this broker changes none of its settings live. Other
resource types are INVALID_REQUEST. A topic named twice in one request is
INVALID_REQUEST for both, as Kafka answers. A request changing more than
``MAX_CONFIGS`` configs in all is refused whole (each parsed config costs
the loop a few microseconds). Every refusal made here is logged at debug
level.
"""

from __future__ import annotations

import logging

from ..errors import InvalidRequestError, LogbrokerError
from ..protocol import messages as m
from ..protocol.config_messages import APPEND, DELETE, SET, SUBTRACT, ConfigChange
from ..protocol.config_messages import TopicConfigChange
from . import apis_configs as api
from .apis_configs import BROKER, TOPIC
from .plan import KafkaSite, Plan
from .topic_configs import to_ours
from .wire_errors import kafka_code, kafka_message

log = logging.getLogger("logbroker.kafka")
MAX_CONFIGS = 1000  # configs one request may change, over all its resources (a few ms to parse)
OPS = {api.SET: SET, api.DELETE: DELETE, api.APPEND: APPEND, api.SUBTRACT: SUBTRACT}


def alter_configs(site: KafkaSite, header, body) -> Plan:
    return _plan(body, lambda c: (c.name, SET, c.value), replace=True)


def incremental_alter_configs(site: KafkaSite, header, body) -> Plan:
    return _plan(body, lambda c: (c.name, OPS.get(c.config_operation), c.value), replace=False)


def _plan(body, change, replace: bool) -> Plan:
    """``change(config)``: (Kafka name, our operation or None, Kafka value).
    A request changing more than MAX_CONFIGS configs in all is refused
    whole (INVALID_REQUEST on every resource), before any is parsed."""
    asked_configs = sum(len(r.configs) for r in body.resources)
    if asked_configs > MAX_CONFIGS:
        message = f"the request changes {asked_configs} configs; at most {MAX_CONFIGS}"
        log.debug("altering configs refused: %s", message)
        return Plan(None, lambda _resp: {"throttle_time_ms": 0, "responses": [
            {"error_code": InvalidRequestError.code, "error_message": message,
             "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in body.resources]})
    counts: dict = {}
    for r in body.resources:
        counts[(r.resource_type, r.resource_name)] = counts.get(
            (r.resource_type, r.resource_name), 0) + 1
    refused, asked = {}, []
    for i, r in enumerate(body.resources):
        try:
            if counts[(r.resource_type, r.resource_name)] > 1:
                raise InvalidRequestError(f"resource {r.resource_name[:80]!r} is named twice "
                                          "in one request")
            if r.resource_type == BROKER:
                raise InvalidRequestError("broker configs are read-only here: set them in the "
                                          "broker's configuration and restart it")
            if r.resource_type != TOPIC:
                raise InvalidRequestError(f"resource type {r.resource_type} is not served "
                                          "(2 topic)")
            changes = tuple(_ours(*change(c)) for c in r.configs)
            asked.append((i, TopicConfigChange(r.resource_name, changes, replace)))
        except LogbrokerError as exc:
            log.debug("altering configs of %r refused: %s", r.resource_name[:80], exc.message)
            refused[i] = (exc.code, exc.message)
    req = m.AlterConfigs(topics=tuple(t for _i, t in asked),
                         validate_only=body.validate_only) if asked else None

    def answer(resp) -> dict:
        results = dict(refused)
        if resp is not None:
            for (i, _t), row in zip(asked, resp.topics or ()):
                results[i] = (row.error, row.message)
            if resp.error:
                results.update({i: (resp.error, resp.message) for i, _t in asked})
        out = []
        for i, r in enumerate(body.resources):
            error, message = results.get(i, (InvalidRequestError.code, "no answer"))
            out.append({"error_code": kafka_code(error), "error_message": kafka_message(message),
                        "resource_type": r.resource_type, "resource_name": r.resource_name})
        throttle = getattr(resp, "throttle_ms", 0) if resp is not None else 0
        return {"throttle_time_ms": throttle, "responses": out}
    return Plan(req, answer)


def _ours(name: str, op: "str | None", value: "str | None") -> ConfigChange:
    if op is None:
        raise InvalidRequestError(f"config {name[:80]!r}: operation must be 0 set, 1 delete, "
                                  "2 append or 3 subtract")
    if op in (APPEND, SUBTRACT):  # list items, checked against the list by the handler
        ours, _value = to_ours(name, None)
        return ConfigChange(ours, op, value)
    ours, parsed = to_ours(name, None if op == DELETE else value)
    return ConfigChange(ours, op, parsed)
