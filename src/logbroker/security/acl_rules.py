"""What every request kind needs from the ACLs (docs/security.md,
"Authorization"): one entry per request class of ``m.REQUESTS``, checked
by tests/security/test_acl.py, so a new request cannot go unchecked.

``RULES[cls](msg, known)`` lists the ``(operation, resource_type, name)``
the principal needs for ``msg``, every one of them (``known(topic)``: the
topic exists; a request that would create a missing one needs create on
it too). ``NO_CHECK`` names the request kinds that need nothing, with the
reason. ``LISTING``: requests whose ``topics`` None means "every topic";
the broker answers those with the topics the principal may describe.
``PER_PART``: requests whose answer has an error per part (every need is
of a topic): a denied topic's parts get the error, the others are served
(``Partial``).
A create on a topic is also allowed by create on the cluster (Kafka's rule).
``NARROWED``: listings a session may serve narrowed instead of refusing
them when their rule is denied (the Kafka listener asks for it: Kafka's
ListGroups lists every group with describe on the cluster, else the groups
the principal may describe); our listener refuses them (docs/security.md).
``FILTERED``: requests allowed whole whose answer is then narrowed to the
topics the principal may describe (``keep_topics``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ..errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError,
                      TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError)
from ..protocol import messages as m
from ..protocol.parts import FetchedPart, OffsetFound, ProducedPart
from ..protocol.partition_messages import RecordsCutResult
from .acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID

NO_CHECK: dict[type, str] = {
    m.Handshake: "the version check comes before authentication",
    m.SaslHandshake: "authentication itself",
    m.SaslAuthenticate: "authentication itself",
    m.PeerChallenge: "a broker's proof of identity (api/peer.py), checked by the cluster's secret",
    m.PeerProof: "a broker's proof of identity (api/peer.py), checked by the cluster's secret",
}
LISTING = frozenset({m.Metadata, m.DescribeTopics})
# request class -> a denied part's entry in the answer, from (topic, partition, code, message)
PER_PART: dict[type, Callable] = {
    m.Produce: lambda t, p, code, msg: ProducedPart(t, p, code, msg, -1, -1),
    m.Fetch: lambda t, p, code, msg: FetchedPart(t, p, code, msg, -1, -1, 0),
    m.ListOffsets: lambda t, p, code, msg: OffsetFound(t, p, code, msg, -1, -1),
    m.DeleteRecords: lambda t, p, code, msg: RecordsCutResult(t, p, code, msg, -1),
}
# request class -> (operation, resource type) each name of its answer needs, when narrowed
NARROWED: dict[type, tuple] = {m.ListGroups: ("describe", GROUP)}
# requests whose allowed answer may name topics the request did not (a FetchOffsets of every
# topic, parts None; DescribeGroups' committed offsets): answered with those the principal
# may describe (Kafka's OffsetFetch rule), whatever its rights on the group
FILTERED = frozenset({m.FetchOffsets, m.DescribeGroups})
ERRORS = {TOPIC: TopicAuthorizationFailedError, GROUP: GroupAuthorizationFailedError,
          CLUSTER: ClusterAuthorizationFailedError,
          TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError}


def _cluster(operation: str) -> Callable:
    return lambda msg, known: [(operation, CLUSTER, CLUSTER_NAME)]


def _topics_of(operation: str, entries: Callable) -> Callable:
    """``operation`` on every topic ``entries(msg)`` names (each once, in order)."""
    return lambda msg, known: [(operation, TOPIC, t) for t in dict.fromkeys(entries(msg))]


def _produce(msg: m.Produce, known) -> list:
    """Write (and create) on each topic; with a transactional id, write on
    it first (Kafka's rule; a transactional batch needs one: api/produce.py)."""
    names = dict.fromkeys(part.topic for part in msg.parts)
    txn = [("write", TRANSACTIONAL_ID, msg.transactional_id)] if msg.transactional_id else []
    return txn + [(op, TOPIC, t) for t in names
                  for op in (("write",) if known(t) else ("write", "create"))]


def _metadata(msg: m.Metadata, known) -> list:
    names = dict.fromkeys(msg.topics or ())
    return [(op, TOPIC, t) for t in names
            for op in (("describe", "create") if msg.auto_create and not known(t)
                       else ("describe",))]


def _group(operation: str, *topic_ops: str) -> Callable:
    """``operation`` on the group, and ``topic_ops`` on each topic of ``offsets``/``parts``."""
    def needs(msg, known):
        out = [(operation, GROUP, msg.group)]
        entries = getattr(msg, "offsets", None) or getattr(msg, "parts", None) or ()
        for t in dict.fromkeys(e.topic for e in entries):
            out += [(op, TOPIC, t) for op in topic_ops]
        return out
    return needs


def _epoch_query(msg: m.OffsetForLeaderEpoch, known) -> list:
    """A follower's (replica id >= 0) is cluster action, as ReplicaFetch; a
    consumer's (-1, KIP-320: checking its position) describe on each topic."""
    if msg.replica_id >= 0:
        return [("cluster_action", CLUSTER, CLUSTER_NAME)]
    return [("describe", TOPIC, t) for t in dict.fromkeys(p.topic for p in msg.parts)]


def _groups(operation: str) -> Callable:
    return lambda msg, known: [(operation, GROUP, g) for g in dict.fromkeys(msg.groups)]


def _txn(operation: str) -> Callable:
    return lambda msg, known: [(operation, TRANSACTIONAL_ID, msg.transactional_id)]


def _init_producer_id(msg: m.InitProducerId, known) -> list:
    """With a transactional id: write on it (Kafka's rule). Without: nothing
    (an idempotent producer's id; each Produce that uses it is checked)."""
    return [("write", TRANSACTIONAL_ID, msg.transactional_id)] if msg.transactional_id else []


RULES: dict[type, Callable] = {
    m.Metadata: _metadata,
    m.CreateTopics: _topics_of("create", lambda r: (t.name for t in r.topics)),
    m.DeleteTopics: _topics_of("delete", lambda r: r.topics),
    m.DescribeTopics: _topics_of("describe", lambda r: r.topics or ()),
    m.Produce: _produce,
    m.Fetch: _topics_of("read", lambda r: (p.topic for p in r.parts)),
    m.ListOffsets: _topics_of("describe", lambda r: (p.topic for p in r.parts)),
    m.CommitOffsets: _group("read", "read"),
    m.FetchOffsets: _group("describe", "describe"),
    m.ListGroups: _cluster("describe"),
    m.DescribeGroups: _groups("describe"),
    m.DeleteGroups: _groups("delete"),
    m.DeleteOffsets: _group("delete", "read"),  # Kafka's OffsetDelete rule
    m.FindCoordinator: lambda msg, known: [("describe", TRANSACTIONAL_ID if msg.key_type == 1
                                             else GROUP, msg.group)],
    m.JoinGroup: _group("read"), m.SyncGroup: _group("read"), m.Heartbeat: _group("read"),
    m.LeaveGroup: _group("read"),
    m.ConsumerGroupHeartbeat: _group("read"), m.ConsumerGroupDescribe: _groups("describe"),
    m.ReplicaFetch: _cluster("cluster_action"), m.OffsetForLeaderEpoch: _epoch_query,
    m.DescribeCluster: _cluster("describe"), m.ElectLeaders: _cluster("alter"),
    m.CreateUser: _cluster("alter"), m.DeleteUser: _cluster("alter"),
    m.ListUsers: _cluster("describe"),
    m.CreateAcls: _cluster("alter"), m.DeleteAcls: _cluster("alter"),
    m.DescribeAcls: _cluster("describe"),
    m.DescribeConfigs: _topics_of("describe_configs", lambda r: r.topics),
    m.AlterConfigs: _topics_of("alter_configs", lambda r: (t[0] for t in r.topics)),
    m.CreatePartitions: _topics_of("alter", lambda r: (t.name for t in r.topics)),
    m.DeleteRecords: _topics_of("delete", lambda r: (p.topic for p in r.parts)),
    m.AlterReassignments: _cluster("alter"), m.ListReassignments: _cluster("describe"),
    # transactions (Kafka's rules): write on the transactional id; AddPartitionsToTxn write on
    # each topic too, AddOffsetsToTxn read on the group; describe to see them
    m.InitProducerId: _init_producer_id,
    m.AddPartitionsToTxn: lambda msg, known: [("write", TRANSACTIONAL_ID, msg.transactional_id)] + [
        ("write", TOPIC, t) for t in dict.fromkeys(p.topic for p in msg.parts)],
    m.AddOffsetsToTxn: lambda msg, known: [("write", TRANSACTIONAL_ID, msg.transactional_id),
                                           ("read", GROUP, msg.group)],
    m.EndTxn: _txn("write"),
    m.DescribeTransactions: lambda msg, known: [("describe", TRANSACTIONAL_ID, t)
                                                for t in dict.fromkeys(msg.transactional_ids)],
    m.ListTransactions: _cluster("describe"),
    # transactions, the partition leader's side: markers are a broker's (cluster action, as
    # Kafka's WriteTxnMarkers; the handler also wants the peer proof, api/markers.py);
    # TxnOffsetCommit: write on the transactional id, read on the group and each topic (Kafka's)
    m.WriteTxnMarkers: _cluster("cluster_action"),
    m.VerifyTxnPartitions: _cluster("cluster_action"),  # brokers only (api/txn_verify.py)
    # an operator's tools (api/txn_admin.py): read on each topic (Kafka's DescribeProducers);
    # aborting another's transaction: alter on the cluster
    m.DescribeProducers: _topics_of("read", lambda r: (p.topic for p in r.parts)),
    m.AbortTxnPartition: _cluster("alter"),
    m.TxnOffsetCommit: lambda msg, known: [("write", TRANSACTIONAL_ID, msg.transactional_id)]
    + _group("read", "read")(msg, known),
}


class Partial:
    """A request some of whose parts were denied: ``request`` holds the
    others, to dispatch; ``answer(dispatched)`` is the answer to the whole,
    the denied parts' ``entries`` (request index -> entry) put back in order."""

    __slots__ = ("request", "entries")

    def __init__(self, msg: m.Message, denied: dict[str, str], code: int) -> None:
        """``denied``: topic -> the message of its denial."""
        make = PER_PART[msg.__class__]
        keep = [i for i, part in enumerate(msg.parts) if part.topic not in denied]
        self.entries = {i: make(part.topic, part.partition, code, denied[part.topic])
                        for i, part in enumerate(msg.parts) if part.topic in denied}
        narrowed = {"parts": tuple(msg.parts[i] for i in keep)}
        if msg.HAS_PAYLOAD:
            narrowed["payload"] = tuple(msg.payload[i] for i in keep)
        self.request = dataclasses.replace(msg, **narrowed)

    async def answer(self, dispatched):
        out = await dispatched
        if not isinstance(out, m.Response) or out.error:
            return out  # acks=0 (no answer), or the whole request failed
        served = iter(out.parts)
        payload = iter(out.payload) if out.HAS_PAYLOAD else None
        parts, data = [], []
        for i in range(len(self.entries) + len(out.parts)):
            entry = self.entries.get(i)
            parts.append(entry if entry is not None else next(served))
            if payload is not None:
                data.append(b"" if entry is not None else next(payload))
        extra = {"payload": tuple(data)} if payload is not None else {}
        return dataclasses.replace(out, parts=tuple(parts), **extra)


class Narrowed:
    """A request served with its answer filtered: ``request`` is dispatched
    as it is; ``answer(dispatched)`` is its answer edited by ``edit`` (an
    error stays as is). ``keep_groups``: a listing served although its rule
    was denied (``NARROWED``); ``keep_topics``: an answer naming topics the
    request did not (``FILTERED``), kept to those the principal may describe."""

    __slots__ = ("request", "edit")

    def __init__(self, msg: m.Message, edit: Callable) -> None:
        self.request, self.edit = msg, edit

    async def answer(self, dispatched):
        out = await dispatched
        if not isinstance(out, m.Response) or out.error:
            return out
        return self.edit(out)


def keep_groups(msg: m.Message, keep: Callable) -> Narrowed:
    """``msg`` (a ListGroups) answered with the groups ``keep(name)`` allows."""
    def narrowed(out):
        kept = [(g, k) for g, k in zip(out.groups, out.kinds or ("classic",) * len(out.groups))
                if keep(g)]
        return dataclasses.replace(out, groups=tuple(g for g, _ in kept),
                                   kinds=tuple(k for _, k in kept))
    return Narrowed(msg, narrowed)


def keep_topics(msg: m.Message, keep: Callable, dropped: Callable) -> Narrowed:
    """``msg`` (``FILTERED``) answered with the entries of topics ``keep(topic)``
    allows: a FetchOffsets' committed offsets, each DescribeGroups group's
    offset rows. ``dropped(topics)`` is told what was left out (a log line)."""
    def parts(entries: tuple) -> tuple:
        kept = tuple(e for e in entries if keep(e.topic))
        if len(kept) != len(entries):
            dropped(sorted({e.topic for e in entries} - {e.topic for e in kept}))
        return kept

    if msg.__class__ is m.DescribeGroups:
        return Narrowed(msg, lambda out: dataclasses.replace(out, groups=tuple(
            g._replace(parts=parts(g.parts)) for g in out.groups)))
    return Narrowed(msg, lambda out: dataclasses.replace(out, parts=parts(out.parts)))
