"""Every name, size and number a user or a peer can give, checked in one place.

The CLI, the clients and the broker call these at their edges, so storage
and the encoders never see a value they cannot hold. Each check returns the
value unchanged or raises the registry's error for it (a stable code and a
message naming the value and the rule); none raises anything else.
"""

from __future__ import annotations

import ipaddress

import re
from datetime import datetime, timezone

from .errors import (InvalidConfigError, InvalidGroupError, InvalidReplicaAssignmentError,
                     InvalidRequestError, InvalidTopicError, PolicyViolationError)

EARLIEST, LATEST = -2, -1  # ListOffsets specs (protocol/messages.py exports them)

MAX_NAME_CHARS = 249  # Kafka's topic-name limit; groups share it (LMDB keys hold <= 511 bytes)
MAX_PARTITIONS = 10_000
MAX_OFFSET = (1 << 63) - 1
MIN_TIMESTAMP = 0  # ms since the epoch; -1 means "now" where an API allows it
MAX_TIMESTAMP = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: what datetime can show
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,%d}\Z" % MAX_NAME_CHARS)
_VALID_TOPICS: set = set()  # names found valid (a request names one per part: 10,000 parts)
_VALID_MAX = 4096  # names kept at most (cleared when full: memory bounded whatever is sent)


def check_topic_name(name: object) -> str:
    """Kafka's rule: 1-249 of ``[A-Za-z0-9._-]``, and not ``.`` or ``..``."""
    if name.__class__ is str and name in _VALID_TOPICS:
        return name
    if not isinstance(name, str) or not _TOPIC.match(name) or name in (".", ".."):
        raise InvalidTopicError(f"invalid topic name {name!r}: use 1-{MAX_NAME_CHARS} of "
                                "[A-Za-z0-9._-]")
    if len(_VALID_TOPICS) >= _VALID_MAX:
        _VALID_TOPICS.clear()
    _VALID_TOPICS.add(name)
    return name


def check_new_topic(name: object, partitions: object, configs: object) -> tuple[str, int, dict]:
    """What CreateTopics checks of one topic before creating it, on both
    listeners and for Kafka's ``validate_only``: its name, that it is not an
    internal topic, its partition count and settings."""
    check_not_internal((check_topic_name(name),))
    return name, check_partition_count(partitions), check_topic_configs(configs)


def check_request_partitions(topics, limit: int) -> int:
    """The partitions CreateTopics ``topics`` ((name, partitions, ...) rows)
    ask for in all; POLICY_VIOLATION above ``limit`` (the broker's
    ``max_partitions_per_request``). A count outside 1..MAX_PARTITIONS is
    left to its topic's own check (INVALID_CONFIG)."""
    asked = sum(t[1] for t in topics if _is_int(t[1]) and 0 < t[1] <= MAX_PARTITIONS)
    if asked > limit:
        raise PolicyViolationError(f"CreateTopics asks for {asked} partitions in all; "
                                   f"max_partitions_per_request is {limit}")
    return asked


def check_not_internal(names) -> None:
    """Clients read the internal topics (offsets, transaction state) but
    never write, create or delete them."""
    for name in INTERNAL_TOPICS:
        if name in names:
            raise InvalidTopicError(f"{name} is a brokers' internal topic: clients may only "
                                    "read it")


def check_group_name(name: object) -> str:
    """1-249 printable characters (no control characters)."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS \
            or not name.isprintable() or len(name.encode("utf-8", "surrogatepass")) > 2 * MAX_NAME_CHARS:
        raise InvalidGroupError(f"invalid group name {_short(name)}: use 1-{MAX_NAME_CHARS} "
                                "printable characters")
    return name


def check_partition(partition: object, count: "int | None" = None) -> int:
    """A partition number: 0 <= partition < count (or < MAX_PARTITIONS)."""
    limit = MAX_PARTITIONS if count is None else count
    if not _is_int(partition) or not 0 <= partition < limit:
        raise InvalidRequestError(f"partition {_short(partition)} is not in 0..{limit - 1}")
    return partition


def check_partition_count(count: object) -> int:
    if not _is_int(count) or not 1 <= count <= MAX_PARTITIONS:
        raise InvalidConfigError(f"partitions must be 1..{MAX_PARTITIONS}, got {_short(count)}")
    return count


def check_offset(offset: object, what: str = "offset") -> int:
    """An offset: 0 <= offset <= 2**63 - 1."""
    if not _is_int(offset) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidRequestError(f"{what} {_short(offset)} is not in 0..{MAX_OFFSET}")
    return offset


def check_timestamp(ts: object, what: str = "timestamp") -> int:
    """A record timestamp in ms since the epoch, 0 up to the end of year 9999."""
    if not _is_int(ts) or not MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
        raise InvalidRequestError(f"{what} {_short(ts)} is not in {MIN_TIMESTAMP}..{MAX_TIMESTAMP} "
                                  "(ms since 1970, up to year 9999)")
    return ts


def iso_ms(text: str, error: str) -> int:
    """ms since the epoch of an ISO 8601 time (``Z`` allowed; UTC unless it
    names its zone); ``InvalidRequestError(error)`` if ``text`` is not one.
    The range is the caller's to check (``check_timestamp``)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequestError(error) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def check_int(value: object, what: str, low: int, high: int) -> int:
    """Any other bounded integer setting or field."""
    if not _is_int(value) or not low <= value <= high:
        raise InvalidRequestError(f"{what} {_short(value)} is not in {low}..{high}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the broker's request fields (helper of issue 9, broker edge) ----------------------------
MAX_INT32 = (1 << 31) - 1
MAX_TIMEOUT_MS = MAX_INT32  # ~24.8 days: produce timeout_ms, fetch max_wait_ms
MAX_FETCH_BYTES = MAX_INT32  # fetch min_bytes / max_bytes, per request and per part
MAX_COMMIT_METADATA = 4096  # characters of a committed offset's metadata (Kafka's default)
MAX_MS = MAX_OFFSET
# topic settings a CreateTopics may give: (lowest, highest) or the allowed strings
TOPIC_CONFIGS: dict = {
    "segment_bytes": (128, MAX_INT32),  # segment positions are u32 in the index
    "segment_ms": (1, MAX_MS),
    "retention_ms": (-1, MAX_MS),  # -1: no time limit
    "retention_bytes": (-1, MAX_OFFSET),  # -1: no size limit
    "index_interval_bytes": (1, MAX_INT32),
    "max_batch_bytes": (64, MAX_INT32),
    "file_delete_delay_ms": (0, MAX_MS),
    "flush": ("fsync", "lazy"),
    "cleanup_policy": ("delete", "compact", "compact,delete", "delete,compact"),
    "delete_retention_ms": (0, MAX_MS),  # how long tombstones survive compaction
    "min_cleanable_dirty_percent": (0, 100),  # Kafka's min.cleanable.dirty.ratio, in percent
    "min_compaction_lag_ms": (0, MAX_MS),
    # cluster settings (a single node accepts replication_factor 1 and ignores the others)
    "replication_factor": (1, 64),
    "min_insync_replicas": (1, 64),
    "unclean_leader_election": ("false", "true"),
    # Kafka's topic configs we store and show but do not act on (kafka/topic_configs.py)
    "compression_type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression_gzip_level": (-1, 9),
    "compression_lz4_level": (1, 17),
    "compression_zstd_level": (-131072, 22),
    "flush_messages": (1, MAX_MS),
    "flush_ms": (0, MAX_MS),
    "follower_replication_throttled_replicas": str,
    "leader_replication_throttled_replicas": str,
    "max_compaction_lag_ms": (1, MAX_MS),
    "message_downconversion_enable": ("false", "true"),
    "message_timestamp_after_max_ms": (0, MAX_MS),
    "message_timestamp_before_max_ms": (0, MAX_MS),
    "message_timestamp_difference_max_ms": (0, MAX_MS),
    "message_timestamp_type": ("CreateTime", "LogAppendTime"),
    "preallocate": ("false", "true"),
    "segment_index_bytes": (4, MAX_INT32),
    "segment_jitter_ms": (0, MAX_MS),
}
MAX_CONFIG_TEXT = 4096  # characters of a free-text topic setting (a throttled-replicas list)


def check_topic_configs(configs: object) -> dict:
    """Topic settings by name: known names only, each an integer in its
    range, one of its strings, or (rule ``str``) a string of at most
    ``MAX_CONFIG_TEXT`` characters (``INVALID_CONFIG`` otherwise)."""
    if not isinstance(configs, dict):
        raise InvalidConfigError(f"topic settings must be a map, got {_short(configs)}")
    for key, value in configs.items():
        if key == REPLICA_ASSIGNMENT:  # not a setting: where a new topic's replicas go
            parse_replica_assignment(value)
            continue
        rule = TOPIC_CONFIGS.get(key)
        if rule is None:
            raise InvalidConfigError(f"unknown topic setting {_short(key)} (known: "
                                     f"{', '.join(sorted(TOPIC_CONFIGS))})")
        if rule is str:
            if not isinstance(value, str) or len(value) > MAX_CONFIG_TEXT:
                raise InvalidConfigError(f"{key} must be a string of at most {MAX_CONFIG_TEXT} "
                                         f"characters, got {_short(value)}")
        elif isinstance(rule[0], str):
            if value not in rule:
                raise InvalidConfigError(f"{key} must be one of {', '.join(rule)}, got {_short(value)}")
        elif not _is_int(value) or not rule[0] <= value <= rule[1]:
            raise InvalidConfigError(f"{key} must be an integer in {rule[0]}..{rule[1]}, "
                                     f"got {_short(value)}")
    return configs


# A new topic's replicas as its creator gives them (CreateTopics' manual
# assignment): a config of this name, never stored, in kafka-topics'
# --replica-assignment form "1:2,2:3" (one list per partition, in partition
# order; a list's first broker is the partition's preferred leader).
REPLICA_ASSIGNMENT = "replica_assignment"
MAX_REPLICAS = 64  # brokers in one replica list: the replication_factor bound
MAX_ASSIGNMENT_TEXT = 256 * 1024  # characters: 10,000 partitions of 3 five-digit ids fit
MAX_BROKER_ID = MAX_INT32
_ASSIGNMENT = re.compile(r"\d{1,10}(?::\d{1,10}){0,%d}(?:,\d{1,10}(?::\d{1,10}){0,%d})*"
                         % (MAX_REPLICAS - 1, MAX_REPLICAS - 1), re.ASCII)


def parse_replica_assignment(text: object) -> "tuple[tuple[int, ...], ...]":
    """The replica lists of a ``REPLICA_ASSIGNMENT`` text, checked for form
    only (1..MAX_PARTITIONS lists of 1..MAX_REPLICAS broker ids, each id
    0..MAX_BROKER_ID); INVALID_REPLICA_ASSIGNMENT naming the rule else. The
    cluster checks the rest (placement.given). Linear in the text, which is
    bounded by MAX_ASSIGNMENT_TEXT."""
    if not isinstance(text, str) or not text or len(text) > MAX_ASSIGNMENT_TEXT:
        raise InvalidReplicaAssignmentError(
            f"a replica assignment is a text of 1..{MAX_ASSIGNMENT_TEXT} characters such as "
            f"'1:2,2:3', got {_short(text)}")
    lists = text.split(",")
    if len(lists) > MAX_PARTITIONS:
        raise InvalidReplicaAssignmentError(f"a replica assignment names {len(lists)} partitions; "
                                            f"at most {MAX_PARTITIONS}")
    if _ASSIGNMENT.fullmatch(text):  # the common case in one pass of the regex engine
        out = tuple(tuple(map(int, item.split(":"))) for item in lists)
        if max(map(max, out)) <= MAX_BROKER_ID:
            return out
    for index, item in enumerate(lists):  # which list is wrong, for the message
        ids = item.split(":")
        if len(ids) > MAX_REPLICAS or not all(
                0 < len(s) <= 10 and s.isascii() and s.isdigit() and int(s) <= MAX_BROKER_ID
                for s in ids):
            raise InvalidReplicaAssignmentError(
                f"partition {index}'s replicas {_short(item)} are not 1..{MAX_REPLICAS} broker ids "
                f"(0..{MAX_BROKER_ID}) separated by ':'")
    raise InvalidReplicaAssignmentError(f"a replica assignment such as '1:2,2:3', got "
                                        f"{_short(text)}")  # not reached: both check the same


def format_replica_assignment(lists) -> str:
    """``lists`` (one replica list per partition, in order) as the
    ``REPLICA_ASSIGNMENT`` text."""
    return ",".join([":".join(map(str, replicas)) for replicas in lists])


def check_offset_spec(spec: object) -> int:
    """A ListOffsets spec: -2 (earliest), -1 (latest) or a timestamp."""
    if _is_int(spec) and spec in (EARLIEST, LATEST):
        return spec
    return check_timestamp(spec, "offset spec (-2 earliest, -1 latest, or a timestamp)")


def check_seconds(value: object, what: str, low: float, high: float) -> float:
    """A duration in seconds: a finite real number in low..high (no NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not low <= value <= high:  # NaN fails every comparison
        raise InvalidRequestError(f"{what} {_short(value)} is not a number of seconds "
                                  f"in {low:g}..{high:g}")
    return float(value)


def is_loopback_host(host: str) -> bool:
    """``host`` (a listener's address setting) is ``localhost`` or a loopback IP."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


OFFSETS_TOPIC = "__consumer_offsets"  # the brokers' internal offsets topic (coordinator/records.py)
# the transaction coordinators' state (coordinator/txn_records.py)
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


def listed(names) -> list[str]:
    """Topic names for an answer about "every topic": sorted, without the
    internal topics (named explicitly, they are answered like any other)."""
    return sorted(n for n in names if n not in INTERNAL_TOPICS)


def canonical_ip(host: str) -> str:
    """An IP address as the broker counts it: canonical text, an IPv6
    scope dropped, an IPv4-mapped IPv6 address as IPv4. ValueError if
    ``host`` is not an address."""
    ip = ipaddress.ip_address(host.partition("%")[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); INVALID_CONFIG otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidConfigError(f"address must be HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)
