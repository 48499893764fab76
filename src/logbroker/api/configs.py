"""Topic configs: DescribeConfigs and AlterConfigs (protocol/config_messages.py),
answered over the metadata interface (a single node's LMDB, or etcd in a
cluster, where every broker hosting the topic applies a change live).

An alteration is computed against the topic's current settings and
checked whole before anything is stored: each name known
(``limits.TOPIC_CONFIGS``; INVALID_CONFIG naming it otherwise), at most
once per topic (INVALID_REQUEST, as Kafka), ``append``/``subtract`` only
for list settings, and the result valid as a whole (its ranges, and a
LogConfig the broker can build: INVALID_CONFIG naming the rule). Every
refusal is logged at debug level with its reason.
"""

from __future__ import annotations

import logging

from .. import limits
from ..errors import InvalidConfigError, InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.config_messages import APPEND, DELETE, OPERATIONS, SET, SUBTRACT
from ..protocol.parts import TopicResult
from ..protocol.config_messages import TopicConfigs
from ..storage.config import log_settings

log = logging.getLogger("logbroker.topics")
MAX_TOPICS = 1000  # topics one DescribeConfigs or AlterConfigs may name
LIST_SETTINGS = frozenset({"cleanup_policy", "follower_replication_throttled_replicas",
                           "leader_replication_throttled_replicas"})
NOT_SETTINGS = frozenset({"replication_factor"})  # a topic fact, not alterable here


def _too_many(topics: tuple, what: str) -> "tuple | None":
    """(error, message) refusing a request naming over MAX_TOPICS topics
    (logged), or None."""
    if len(topics) <= MAX_TOPICS:
        return None
    message = f"{what} names {len(topics)} topics; at most {MAX_TOPICS} per request"
    log.debug("%s refused: %s", what, message)
    return InvalidRequestError.code, message


def describe_configs(svc, req: m.DescribeConfigs, session) -> m.DescribeConfigsResponse:
    """Per topic, in order: its effective settings and those set on it."""
    refused = _too_many(req.topics, "DescribeConfigs")
    if refused is not None:
        return m.DescribeConfigsResponse(*refused)
    out = []
    for name in req.topics:
        try:
            effective, overrides = svc.meta.topic_settings(limits.check_topic_name(name))
        except LogbrokerError as exc:
            out.append(TopicConfigs(name, *_err(exc), {}, {}))
            continue
        out.append(TopicConfigs(name, 0, "", effective, overrides))
    return m.DescribeConfigsResponse(topics=tuple(out))


async def alter_configs(svc, req: m.AlterConfigs, session) -> m.AlterConfigsResponse:
    """Each topic's changes checked, then (unless ``validate_only``) stored
    and applied; one topic's refusal does not stop the others."""
    refused = _too_many(req.topics, "AlterConfigs")
    if refused is not None:
        return m.AlterConfigsResponse(*refused)
    out = []
    for name, changes, replace in req.topics:
        try:
            effective, current = svc.meta.topic_settings(limits.check_topic_name(name))
            new = altered(current, effective, changes, replace)
            check_settings(svc.store.config.log, new)
            if not req.validate_only:
                await svc.meta.alter_topic_configs(name, new)
            out.append(TopicResult(name, 0, ""))
        except LogbrokerError as exc:
            log.debug("AlterConfigs of topic %r refused: %s", name, exc.message)
            out.append(TopicResult(name, *_err(exc)))
    return m.AlterConfigsResponse(topics=tuple(out))


def altered(current: dict, effective: dict, changes: tuple, replace: bool) -> dict:
    """The topic's settings after ``changes`` (pure). ``replace``: only the
    changes' ``set`` values remain (Kafka's AlterConfigs). An ``append`` or
    ``subtract`` starts from the effective value (the default when the
    topic sets none, as Kafka does)."""
    new = {} if replace else dict(current)
    seen = set()
    for name, op, value in changes:
        if name in seen:
            raise InvalidRequestError(f"setting {name!r} is changed twice in one request")
        seen.add(name)
        if op not in OPERATIONS:
            raise InvalidRequestError(f"change of {name!r}: operation must be one of "
                                      f"{', '.join(OPERATIONS)}, got {str(op)[:20]!r}")
        if name not in limits.TOPIC_CONFIGS or name in NOT_SETTINGS:
            raise InvalidConfigError(f"unknown topic setting {name[:80]!r}")
        if op == DELETE or (op == SET and value is None):
            new.pop(name, None)
        elif op == SET:
            new[name] = value
        else:
            if name not in LIST_SETTINGS:
                raise InvalidConfigError(f"{name} is not a list setting: {op} applies to "
                                         f"{', '.join(sorted(LIST_SETTINGS))}")
            if not isinstance(value, str):
                raise InvalidConfigError(f"{op} to {name} needs a string value")
            items = [i for i in str(new.get(name, effective.get(name, ""))).split(",") if i]
            given = [i.strip() for i in value.split(",") if i.strip()]
            if op == APPEND:
                items += [i for i in given if i not in items]
            else:
                assert op == SUBTRACT
                items = [i for i in items if i not in given]
            new[name] = ",".join(items)
    return new


def check_settings(base, settings: dict) -> None:
    """INVALID_CONFIG unless ``settings`` pass the topic rules and make a
    LogConfig over the broker's ``base``."""
    limits.check_topic_configs(settings)
    base.replace(**log_settings(settings))
