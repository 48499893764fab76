"""Every value read from etcd checked against its schema (docs/cluster.md,
"Metadata from etcd is checked").

etcd is shared, and whoever can write to it could otherwise make every
broker serve what no client can decode (an epoch beyond int32), a topic
name no client accepts, or a partition count that costs the loop seconds
to walk. The decoders of state.py call these checks on the decoded map and
raise ``BadValue`` (a ValueError) naming the rule; the view (view.py)
leaves such a value out, logs it once and the controller repairs it where
it can (controller.py).

The rules, as the brokers themselves write the values:

- a topic: its name passes ``limits.check_topic_name``; ``partitions``
  1..limits.MAX_PARTITIONS; ``replication_factor`` 1..64; ``configs`` a
  map of known settings in range (``limits.check_topic_configs``), its
  ``min_insync_replicas`` at most the replication factor;
- a partition state: a valid topic name and partition number; ``replicas``
  1..64 distinct broker ids (0..2^31-1); ``leader`` -1 or one of them;
  ``isr`` distinct members of ``replicas``; ``leader_epoch`` 0..2^31-1
  (Kafka's int32); ``adding`` and ``removing`` (a reassignment in
  progress, both absent otherwise) disjoint lists of distinct replicas,
  leaving at least one replica that stays;
- a broker's registration: its id 0..2^31-1, ``host`` 1..255 characters,
  ``port`` 1..65535, ``started_ms`` >= 0, ``kafka`` absent or [host, port],
  ``kafka_listeners`` absent or at most 16 [name, host, port];
- the controller: ``broker_id`` a broker id.
"""

from __future__ import annotations

from .. import limits
from ..errors import LogbrokerError

MAX_REPLICAS = 64  # limits.TOPIC_CONFIGS' replication_factor bound
MAX_HOST_CHARS = 255
MAX_KAFKA_LISTENERS = 16  # broker/kafka_listeners.MAX_LISTENERS


class BadValue(ValueError):
    """A value from etcd that breaks its schema (the message names the rule)."""


def _int(value: object, what: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise BadValue(f"{what} must be an integer in {low}..{high}, got {str(value)[:40]!r}")
    return value


def _rule(check, *args):
    try:
        return check(*args)
    except LogbrokerError as exc:
        raise BadValue(exc.message) from None


def broker_id(value: object, what: str = "broker id") -> int:
    return _int(value, what, 0, limits.MAX_INT32)


def topic_name(name: object) -> str:
    return _rule(limits.check_topic_name, name)


def topic(name: str, v: dict) -> tuple[int, int, dict]:
    """(partitions, replication_factor, configs) of a topic's value."""
    topic_name(name)
    partitions = _int(v.get("partitions"), "partitions", 1, limits.MAX_PARTITIONS)
    rf = _int(v.get("replication_factor"), "replication_factor", 1, MAX_REPLICAS)
    configs = v.get("configs") or {}
    if not isinstance(configs, dict):
        raise BadValue("configs must be a map")
    checked = dict(configs)
    if checked.get("unclean_leader_election") in (True, False, 0, 1):
        checked["unclean_leader_election"] = str(bool(checked["unclean_leader_election"])).lower()
    _rule(limits.check_topic_configs, checked)
    if checked.get("min_insync_replicas", 1) > rf:
        raise BadValue(f"min_insync_replicas {checked['min_insync_replicas']} exceeds the "
                       f"replication factor {rf}")
    return partitions, rf, dict(configs)


def partition(topic_: str, index: object, v: dict) -> tuple:
    """(replicas, leader, isr, leader_epoch) of a partition state's value."""
    topic_name(topic_)
    _int(index, "partition", 0, limits.MAX_PARTITIONS - 1)
    replicas = v.get("replicas")
    if not isinstance(replicas, list) or not 1 <= len(replicas) <= MAX_REPLICAS:
        raise BadValue(f"replicas must be a list of 1..{MAX_REPLICAS} broker ids")
    replicas = tuple(broker_id(r, "a replica") for r in replicas)
    if len(set(replicas)) != len(replicas):
        raise BadValue(f"replicas {list(replicas)} repeat a broker")
    leader = _int(v.get("leader"), "leader", -1, limits.MAX_INT32)
    if leader != -1 and leader not in replicas:
        raise BadValue(f"leader {leader} is not one of the replicas {list(replicas)}")
    isr = v.get("isr")
    if not isinstance(isr, list) or len(isr) > len(replicas):
        raise BadValue("isr must be a list of replicas")
    isr = tuple(broker_id(r, "an ISR member") for r in isr)
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise BadValue(f"isr {list(isr)} must be distinct members of the replicas")
    epoch = _int(v.get("leader_epoch"), "leader_epoch", 0, limits.MAX_INT32)
    return replicas, leader, isr, epoch


def reassignment(replicas: tuple, v: dict) -> tuple:
    """(adding, removing) of a partition state's value (() and () when absent)."""
    out = []
    for name in ("adding", "removing"):
        got = v.get(name) or []
        if not isinstance(got, list) or len(got) > len(replicas):
            raise BadValue(f"{name} must be a list of replicas")
        got = tuple(broker_id(r, f"a replica {name}") for r in got)
        if len(set(got)) != len(got) or not set(got) <= set(replicas):
            raise BadValue(f"{name} {list(got)} must be distinct members of the replicas")
        out.append(got)
    if set(out[0]) & set(out[1]) or len(out[1]) >= len(replicas):
        raise BadValue(f"adding {list(out[0])} and removing {list(out[1])} must be disjoint and "
                       "leave a replica")
    return out[0], out[1]


def broker(v: dict) -> None:
    """A registration's fields (its id is checked from the key)."""
    host = v.get("host")
    if not isinstance(host, str) or not 1 <= len(host) <= MAX_HOST_CHARS or not host.isprintable():
        raise BadValue(f"host must be 1..{MAX_HOST_CHARS} printable characters")
    _int(v.get("port"), "port", 1, 65535)
    _int(v.get("started_ms", 0), "started_ms", 0, limits.MAX_MS)
    kafka = v.get("kafka")
    if kafka is not None:
        if not isinstance(kafka, list) or len(kafka) != 2 or not isinstance(kafka[0], str) \
                or not 1 <= len(kafka[0]) <= MAX_HOST_CHARS:
            raise BadValue("kafka must be [host, port]")
        _int(kafka[1], "kafka port", 1, 65535)
    named = v.get("kafka_listeners", [])
    if not isinstance(named, list) or len(named) > MAX_KAFKA_LISTENERS:
        raise BadValue(f"kafka_listeners must be a list of at most {MAX_KAFKA_LISTENERS}")
    for row in named:
        if not isinstance(row, list) or len(row) != 3 or not isinstance(row[0], str) \
                or not 1 <= len(row[0]) <= 64 or not isinstance(row[1], str) \
                or not 1 <= len(row[1]) <= MAX_HOST_CHARS:
            raise BadValue("each of kafka_listeners must be [name, host, port]")
        _int(row[2], "kafka listener port", 1, 65535)
