"""The clients' edge: every argument of ``Producer``, ``Consumer`` and ``Admin``
checked before it reaches the accumulator, the batch encoder or the wire.

A wrong *type* raises ``TypeError`` (as Python does, and as a ``str`` value
always has); a wrong *value* raises the registry's error through
``logbroker.limits`` (``InvalidTopicError``, ``InvalidGroupError``,
``InvalidRequestError``, ``InvalidConfigError``), one line naming the value
and the rule. Nothing here does I/O or keeps state, so a refused call leaves
the client as it was. Integers may be any ``__index__`` type except ``bool``.
"""

from __future__ import annotations

import math
import operator

from .. import limits
from ..errors import InvalidConfigError, InvalidReplicaAssignmentError, InvalidRequestError
from ..limits import _short
from ..protocol import messages as m

MAX_INT32 = (1 << 31) - 1
SPECS = {"earliest": m.EARLIEST, "latest": m.LATEST}  # offset specs by name
MAX_WAIT_S = 365 * 24 * 3600.0  # a year: longer waits are a mistake, and overflow timers


def as_int(value: object, what: str) -> int:
    """``value`` as a plain int; ``TypeError`` for a bool, float, str..."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return operator.index(value)


def as_bytes(data, what: str) -> "bytes | None":
    """``bytes`` (or a subclass) / ``bytearray`` / ``memoryview`` -> bytes; ``str``
    is refused (encode it yourself: the broker stores bytes)."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, "
                    f"not {type(data).__name__}")


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value


def topic(name: object) -> str:
    return limits.check_topic_name(_str(name, "topic"))


def topics(names) -> list[str]:
    """One name or an iterable of names."""
    return _names(names, topic, "topics")


def group(name: object) -> str:
    return limits.check_group_name(_str(name, "group"))


def groups(names) -> list[str]:
    return _names(names, group, "groups")


def _names(names, check, what: str) -> list[str]:
    return [check(names)] if isinstance(names, str) else [check(n) for n in iterable(names, what)]


def partition(value: object) -> int:
    return limits.check_partition(as_int(value, "partition"))


def topic_partition(item) -> tuple[str, int]:
    """A ``(topic, partition)`` pair (tuple or list)."""
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise TypeError(f"a partition must be a (topic, partition) pair, not {_short(item)}")
    return topic(item[0]), partition(item[1])


def topic_partitions(items) -> list[tuple[str, int]]:
    """``topic_partition`` of each item: a topic's name is checked once a
    call, and a ``(str, int)`` pair of a name already checked and a
    partition in range is taken as it is (an assignment of 10,000
    partitions of one topic: ~7 -> ~1.4 ms)."""
    names: set = set()
    out = []
    for item in iterable(items, "partitions"):
        if item.__class__ is tuple and len(item) == 2:
            name, number = item
            if name.__class__ is str and name in names and number.__class__ is int \
                    and 0 <= number < limits.MAX_PARTITIONS:
                out.append(item)
                continue
        pair = topic_partition(item)
        names.add(pair[0])
        out.append(pair)
    return out


def offset(value: object, what: str = "offset") -> int:
    return limits.check_offset(as_int(value, what), what)


def timestamp(value: object, what: str = "timestamp") -> int:
    return limits.check_timestamp(as_int(value, what), what)


def count(value: object, what: str, low: int = 1, high: int = MAX_INT32) -> int:
    return limits.check_int(as_int(value, what), what, low, high)


def seconds(value: object, what: str) -> "float | None":
    """A wait in seconds: None (no bound where allowed), or a real number up
    to a year (not NaN); a negative one means "do not wait"."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    return max(limits.check_seconds(value, what, -math.inf, MAX_WAIT_S), 0.0)


def metadata(value: object) -> str:
    """Offset-commit metadata: a str of valid UTF-8, at most
    ``MAX_COMMIT_METADATA`` characters (the broker's limit)."""
    _str(value, "commit metadata")
    if len(value) > limits.MAX_COMMIT_METADATA:
        raise InvalidRequestError(f"commit metadata of {len(value)} characters is longer than "
                                  f"{limits.MAX_COMMIT_METADATA}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(f"commit metadata {_short(value)} is not valid UTF-8") from None
    return value


def commit_entries(offsets) -> tuple:
    """``{(topic, partition): offset or (offset, metadata)}`` -> wire entries
    ``(topic, partition, offset, metadata)``."""
    if not isinstance(offsets, dict):
        raise TypeError(f"offsets must be a dict, not {type(offsets).__name__}")
    out = []
    for tp, value in offsets.items():
        t, p = topic_partition(tp)
        if isinstance(value, tuple):
            if len(value) != 2:
                raise TypeError(f"{t}[{p}]: want offset or (offset, metadata), not {_short(value)}")
            off, meta = offset(value[0]), metadata(value[1])
        else:
            off, meta = offset(value), ""
        out.append((t, p, off, meta))
    return tuple(out)


def headers(items) -> tuple[tuple, int]:
    """Record headers: ``[(str, bytes | None), ...]`` or a dict -> (a tuple of
    pairs with bytes values, their size in bytes as encoded). Keys must be
    valid UTF-8 (the encoder's format)."""
    out, size = [], 0
    for item in items.items() if isinstance(items, dict) else iterable(items, "headers"):
        if item.__class__ is not tuple and not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"headers must be (str, bytes | None) pairs or a dict, not {_short(item)}")
        key, value = item
        if key.__class__ is not str:
            raise TypeError(f"a header key must be a str, not {type(key).__name__}")
        try:
            size += len(key.encode())
        except UnicodeEncodeError:
            raise InvalidRequestError(f"header key {_short(key)} is not valid UTF-8") from None
        if value is not None and value.__class__ is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(f"a header value must be bytes or None, not {type(value).__name__}")
            value = bytes(value)
        if value is not None:
            size += len(value)
        out.append((key, value))
    return tuple(out), size


def configs(values) -> dict:
    """Topic config overrides ``{name: value}``, checked by the broker's rules
    (``limits.check_topic_configs``: known names, values in range)."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise TypeError(f"configs must be a dict, not {type(values).__name__}")
    return dict(limits.check_topic_configs(values))


def new_topic_configs(name: str, values, replication_factor) -> dict:
    """A new topic's configs (``configs``' rules) with ``replication_factor``
    (None: the cluster's default) as the config of that name; it may not
    contradict a ``replication_factor`` in ``values`` (``InvalidConfigError``)."""
    out = configs(values)
    if replication_factor is None:
        return out
    rf = as_int(replication_factor, "replication_factor")
    if out.get("replication_factor", rf) != rf:
        raise InvalidConfigError(f"{name}: replication_factor {rf} and the config "
                                 f"replication_factor {out['replication_factor']} differ")
    return configs({**out, "replication_factor": rf})


def replica_assignment(name: str, value) -> str:
    """A new topic's replica lists, ``{partition: [broker, ...]}`` with the
    partitions 0..n-1 (or a list of lists in partition order), as the
    ``replica_assignment`` config's text (``limits.parse_replica_assignment``
    checks its form; INVALID_REPLICA_ASSIGNMENT else)."""
    if isinstance(value, dict):
        if sorted(value, key=str) != sorted(range(len(value)), key=str):
            raise InvalidReplicaAssignmentError(f"{name}: replica_assignment must map the "
                                                "partitions 0..n-1, each once")
        value = [value[p] for p in range(len(value))]
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(rs, (list, tuple)) and all(limits._is_int(b) for b in rs) for rs in value):
        raise InvalidReplicaAssignmentError(f"{name}: replica_assignment is one list of broker "
                                            "ids per partition")
    text = limits.format_replica_assignment(value)
    limits.parse_replica_assignment(text)
    return text


def iterable(items, what: str):
    if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{what} must be a list or another iterable, not {type(items).__name__}")
    return items


def offset_spec(spec) -> int:
    """``"earliest"``, ``"latest"`` or a timestamp in ms -> the wire's spec."""
    if isinstance(spec, str):
        if spec not in SPECS:
            raise InvalidRequestError(f"offset spec {_short(spec)} is not 'earliest', "
                                      "'latest' or a timestamp in ms")
        return SPECS[spec]
    return timestamp(spec, "offset spec")
