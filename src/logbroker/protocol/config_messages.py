"""Protocol messages of topic configs (docs/protocol.md, "Topic configs";
api/configs.py answers them).

Registered in the same tables as messages.py (which re-exports them).
Settings travel under our names with our values (``retention_ms``: an
integer; ``cleanup_policy``: "compact,delete"); the Kafka listener
translates Kafka's (kafka/topic_configs.py).

- ``DescribeConfigs``: per topic its effective settings (the broker's
  defaults under the topic's own) and the ones set on the topic itself.
- ``AlterConfigs``: per topic a list of changes, each ``set``, ``delete``,
  ``append`` or ``subtract`` (the last two for list settings such as
  ``cleanup_policy``); ``replace`` makes the topic's settings exactly the
  ``set`` changes (Kafka's AlterConfigs), else the changes apply to the
  settings it has (Kafka's IncrementalAlterConfigs). ``validate_only``
  checks without changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import TopicResult
from .schema import part

SET, DELETE, APPEND, SUBTRACT = "set", "delete", "append", "subtract"
OPERATIONS = (SET, DELETE, APPEND, SUBTRACT)


@part
class ConfigChange(NamedTuple):
    """One change of a topic's settings (``value`` None for a delete)."""

    name: str
    op: str
    value: object


@part
class TopicConfigChange(NamedTuple):
    topic: str
    changes: tuple[ConfigChange, ...]
    replace: bool


@part
class TopicConfigs(NamedTuple):
    """A topic's effective settings and those set on it (our names)."""

    name: str
    error: int
    message: str
    configs: dict
    overrides: dict


@_register
@dataclass(frozen=True)
class DescribeConfigs(Message):
    API, SCHEMA = 50, {"topics": [str]}
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeConfigsResponse(Response):
    """topics: (name, error, message, configs, overrides), in the request's order."""

    API, SCHEMA = 50, {**_RESP, "topics": [TopicConfigs]}
    error: int = 0
    message: str = ""
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class AlterConfigs(Message):
    """topics: (topic, changes, replace)."""

    API, SCHEMA = 51, {"topics": [TopicConfigChange], "validate_only": bool}
    topics: tuple = ()
    validate_only: bool = False


@_register
@dataclass(frozen=True)
class AlterConfigsResponse(Response):
    """topics: (name, error, message), in the request's order."""

    API, SCHEMA = 51, {**_RESP, "topics": [TopicResult]}
    error: int = 0
    message: str = ""
    topics: tuple = ()
