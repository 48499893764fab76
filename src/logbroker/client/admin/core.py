"""The admin client's one core: operations as coroutines over a ``Router``
(the sync ``Admin`` runs them on its I/O thread, ``logbroker.aio.Admin``
awaits them); their results are the value objects of results.py. Each
operation's contract is the docstring of ``logbroker.Admin``'s method of the
same name (admin/sync.py).

Requests that name no partition go to any broker (the router's control
link: the live brokers it knows, then the bootstrap list), except a group's
(describe, delete, commit and fetch offsets), which go to its coordinator
(group/coordinator.py), and ListGroups, asked of every broker; ListOffsets goes
to each partition's leader and follows leader changes until the request's
deadline (``request_timeout_ms``).

Every argument is checked before anything is sent (``client/validate.py``):
a wrong type raises ``TypeError`` at once; a bad name, partition count,
config or offset raises the registry's error at once — except in
``create_topics`` / ``delete_topics`` / ``delete_groups``, which report it
as that item's result (the valid items are still sent) and raise the first
error only with ``raise_errors``.
"""

from __future__ import annotations

import asyncio
from typing import Iterable

from ... import limits
from ...errors import (ClientClosedError, LogbrokerError, TopicAlreadyExistsError,
                       UnknownTopicOrPartitionError, for_code)
from ...protocol import messages as m
from ...protocol.consumer_protocol import Assignment
from ...protocol.partition_messages import PartitionsIncrease, RecordsCut
from .. import validate
from ..group import offsets as group_offsets
from ..group.coordinator import Coordinators
from ..settings import ISOLATION_LEVELS
from . import transactions
from ..net.metadata import list_offsets, part_error, partition_counts
from ..net.routing import Router
from ..settings import TlsSettings, client_options
from . import reassign
from .results import (Acl, BrokerInfo, ClusterDescription, ClusterPartition, ElectionResult,
                      GroupDescription, GroupPartition, MemberDescription, NewTopic,
                      OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo, TopicDescription,
                      TopicSettings, UserInfo)


def _results(entries, refused: dict, order: list, raise_errors: bool) -> dict:
    """``{name: None or error}`` in ``order``: the broker's answers, and the
    errors of items refused before sending."""
    out = dict(refused)
    for name, err, message in entries:
        out[name] = for_code(err)(f"{name}: {message}" if message else name) if err else None
    out = {name: out.get(name) for name in order}
    first = next((exc for exc in out.values() if exc is not None), None)
    if raise_errors and first is not None:
        raise first
    return out


def _split(items, check) -> tuple[list, dict, list]:
    """``check`` each item: (accepted values, {name: error} refused, names in order)."""
    good, refused, order = [], {}, []
    for item in items:
        name = item[0] if isinstance(item, (tuple, list)) and item else item
        try:
            good.append(check(item))
            order.append(good[-1][0] if isinstance(good[-1], tuple) else good[-1])
        except LogbrokerError as exc:
            if not isinstance(name, str):
                raise
            refused[name] = exc
            order.append(name)
    return good, refused, order


def _new_topic(item) -> tuple:
    if isinstance(item, str):
        item = NewTopic(item)
    elif not isinstance(item, NewTopic):
        if not isinstance(item, (tuple, list)) or not 1 <= len(item) <= 5:
            raise TypeError("a new topic is a name, a NewTopic or (name, partitions[, configs"
                            f"[, replication_factor[, replica_assignment]]]), not "
                            f"{limits._short(item)}")
        item = NewTopic(*item)
    name = validate.topic(item.name)
    partitions = validate.as_int(item.partitions, "partitions")
    if item.replica_assignment is None:
        return (name, limits.check_partition_count(partitions),
                validate.new_topic_configs(name, item.configs, item.replication_factor))
    configs = validate.new_topic_configs(name, item.configs, item.replication_factor)
    configs[limits.REPLICA_ASSIGNMENT] = text = validate.replica_assignment(
        name, item.replica_assignment)
    if partitions == 1:  # the default: the lists give the count
        partitions = text.count(",") + 1
    return name, limits.check_partition_count(partitions), configs


def _group_description(row) -> GroupDescription:
    """A DescribeGroups answer's group row as a GroupDescription (raises its error)."""
    g, err, message, parts, state, protocol, generation, members, kind = row
    if err:
        raise for_code(err)(message or g)
    return GroupDescription(g, tuple(GroupPartition(*p) for p in sorted(parts)), state, protocol,
                            generation, tuple(_member(*mb) for mb in members), kind)


def _member(member_id, instance_id, client_id, host, assignment: bytes,
            _metadata: bytes = b"") -> MemberDescription:
    try:
        partitions = Assignment.decode(assignment).partitions if assignment else ()
    except LogbrokerError:
        partitions = ()  # not an assignment this client encodes
    return MemberDescription(member_id, instance_id, client_id, host, partitions)


class AdminCore:
    def __init__(self, router: Router) -> None:
        self.router, self.options = router, router.options
        self.coordinators = Coordinators(router)
        self.txn_coordinators = Coordinators(router, 1)  # transactional ids' coordinators
        self.closed = False

    @classmethod
    def make(cls, bootstrap="127.0.0.1:9555", *, client_id: str = "logbroker-admin",
             request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000,
             tls_ca: "str | None" = None, tls_cert: "str | None" = None,
             tls_key: "str | None" = None, tls_check_hostname: bool = True,
             username: "str | None" = None, password: "str | None" = None,
             sasl_mechanism: str = "SCRAM-SHA-256") -> "AdminCore":
        """The core for ``Admin(bootstrap, **options)`` (both shells): the
        arguments checked into ``ClientOptions`` (settings.client_options)."""
        options = client_options(bootstrap, client_id, request_timeout_ms, connect_timeout_ms,
                                 TlsSettings(tls_ca, tls_cert, tls_key, tls_check_hostname,
                                             username, password, sasl_mechanism))
        return cls(Router(options))

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("the admin client is closed")

    def mark_closed(self) -> None:
        """Refuse every call from now on (any thread; the first step of closing)."""
        self.closed = True

    # -- topics -------------------------------------------------------------------------------------
    async def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        """``Admin.create_topics``: one CreateTopics, sent once."""
        good, refused, order = _split(validate.iterable(topics, "topics"), _new_topic)
        entries = ()
        if good:
            entries = (await self.router.call_any(m.CreateTopics(topics=tuple(good)),
                                                  retry=False)).topics
        return _results(entries, refused, order, raise_errors)

    async def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None,
                           *, replication_factor: "int | None" = None,
                           exist_ok: bool = False) -> bool:
        """``Admin.create_topic``."""
        try:
            await self.create_topics([NewTopic(name, partitions, configs or {},
                                               replication_factor)])
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
            return False
        return True

    async def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        """``Admin.delete_topics``: one DeleteTopics, sent once."""
        good, refused, order = _split(validate.iterable(names, "names"), validate.topic)
        entries = ()
        if good:
            entries = (await self.router.call_any(m.DeleteTopics(topics=tuple(good)),
                                                  retry=False)).topics
            self.router.cache.forget(name for name, err, _ in entries if not err)
        return _results(entries, refused, order, raise_errors)

    async def create_partitions(self, counts: dict, validate_only: bool = False,
                                raise_errors: bool = True) -> dict:
        """``Admin.create_partitions``: one CreatePartitions, sent once."""
        if not isinstance(counts, dict):
            raise TypeError(f"counts must be a dict {{topic: total partitions}}, not "
                            f"{limits._short(counts)}")
        asked = tuple(PartitionsIncrease(validate.topic(t), validate.count(
            n, "partitions", 1, limits.MAX_PARTITIONS), ()) for t, n in counts.items())
        entries = ()
        if asked:
            entries = (await self.router.call_any(m.CreatePartitions(
                topics=asked, validate_only=bool(validate_only)), retry=False)).topics
            self.router.invalidate()  # the counts changed: route by the new metadata
        return _results(entries, {}, [t.name for t in asked], raise_errors)

    async def delete_records(self, offsets: dict, raise_errors: bool = True) -> dict:
        """``Admin.delete_records``: DeleteRecords per leader (retried across
        leader changes: moving a log start twice to one offset is harmless)."""
        if not isinstance(offsets, dict):
            raise TypeError("offsets must be a dict {(topic, partition): offset}, not "
                            f"{limits._short(offsets)}")
        cuts = [RecordsCut(*validate.topic_partition(tp), validate.count(
            o, "offset (-1: the high watermark)", -1, limits.MAX_OFFSET)) for tp, o in offsets.items()]
        rows = await self.router.by_leader(cuts, lambda parts: m.DeleteRecords(parts=parts))
        out = {}
        for cut in cuts:
            row = rows[(cut.topic, cut.partition)]
            if not isinstance(row, LogbrokerError):
                row = part_error(row.error, row.message, row.topic, row.partition) \
                    if row.error else row.low_watermark
            if raise_errors and isinstance(row, LogbrokerError):
                raise row
            out[(cut.topic, cut.partition)] = row
        return out

    async def list_topics(self) -> dict[str, int]:
        """``Admin.list_topics``: one Metadata."""
        resp = await self.router.metadata(None)
        return {name: n for name, err, _, n in resp.topics if not err}

    async def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        """``Admin.describe_topics``: DescribeTopics and Metadata, then the leaders'."""
        wanted = None if names is None else tuple(validate.topics(names))
        resp, meta = await asyncio.gather(self.router.call_any(m.DescribeTopics(topics=wanted)),
                                          self.router.metadata(wanted))
        answered_by = self.router.control.broker_id
        leaders = {(p.topic, p.partition): (p.leader, tuple(p.replicas), tuple(p.isr))
                   for p in meta.partitions}
        rows = {}
        for name, err, message, configs, parts in resp.topics:
            if err:
                raise for_code(err)(f"{name}: {message}" if message else name)
            rows.update({(name, p.partition): p for p in parts})
        await self._rows_from_leaders(rows, leaders, answered_by)
        return {name: TopicDescription(name, dict(configs), tuple(
            PartitionInfo(*rows[(name, p.partition)],
                          *leaders.get((name, p.partition), (-1, (), ())))
            for p in sorted(parts))) for name, _, _, configs, parts in resp.topics}

    async def _rows_from_leaders(self, rows: dict, leaders: dict, answered_by: int) -> None:
        """Replace the DescribeTopics rows of partitions led by another broker
        than ``answered_by`` with their leader's."""
        asks: dict[int, set] = {}
        for (topic, p), (leader, _, _) in leaders.items():
            if (topic, p) in rows and leader >= 0 and leader != answered_by:
                asks.setdefault(leader, set()).add(topic)
        answers = await asyncio.gather(*(self.router.call(
            bid, m.DescribeTopics(topics=tuple(sorted(ts)))) for bid, ts in asks.items()),
            return_exceptions=True)
        for bid, answer in zip(asks, answers):
            if isinstance(answer, BaseException):
                if not isinstance(answer, LogbrokerError):
                    raise answer
                continue  # that leader is out of reach: the first answer stays
            for name, err, _, _, parts in answer.topics:
                for p in parts if not err else ():
                    if leaders.get((name, p.partition), (-1,))[0] == bid:
                        rows[(name, p.partition)] = p

    # -- the cluster --------------------------------------------------------------------------------
    async def describe_cluster(self, topics: "Iterable[str] | None" = None) -> ClusterDescription:
        """``Admin.describe_cluster``: one DescribeCluster."""
        wanted = None if topics is None else tuple(validate.topics(topics))
        resp = await self.router.call_any(m.DescribeCluster(topics=wanted))
        missing = set(wanted or ()) - {p.topic for p in resp.partitions}
        if missing:
            raise UnknownTopicOrPartitionError(f"unknown topic {min(missing)!r}")
        return ClusterDescription(
            resp.cluster, resp.controller,
            tuple(BrokerInfo(*b) for b in sorted(resp.brokers)),
            tuple(ClusterPartition(t, p, leader, epoch, tuple(replicas), tuple(isr), preferred)
                  for t, p, leader, epoch, replicas, isr, preferred in sorted(resp.partitions)),
            self.router.control.server)

    async def elect_leaders(self, topics: "Iterable[str] | None" = None) -> dict:
        """``Admin.elect_leaders``: one ElectLeaders, sent once."""
        wanted = None if topics is None else tuple(validate.topics(topics))
        resp = await self.router.call_any(m.ElectLeaders(topics=wanted), retry=False)
        self.router.invalidate()  # leaders moved: route by the new ones
        return {(t, p): ElectionResult(t, p, leader, None if not err else part_error(
            err, msg, t, p) if p >= 0 else for_code(err)(msg or t)) for t, p, err, msg, leader
                in resp.parts}

    async def reassign_partitions(self, moves: dict, raise_errors: bool = True) -> dict:
        """``Admin.reassign_partitions`` (admin/reassign.py): sent once."""
        return await reassign.reassign_partitions(self.router, moves, raise_errors)

    async def list_partition_reassignments(self, topics=None) -> dict:
        """``Admin.list_partition_reassignments`` (admin/reassign.py)."""
        return await reassign.list_partition_reassignments(self.router, topics)

    # -- groups -------------------------------------------------------------------------------------
    async def list_groups(self, kinds: bool = False) -> "list[str] | dict":
        """``Admin.list_groups``: ListGroups of every live broker."""
        brokers = (await self.router.metadata(())).brokers
        answers = await asyncio.gather(*(self.router.call(bid, m.ListGroups())
                                         for bid, _, _ in brokers), return_exceptions=True)
        found: dict = {}
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            found.update(zip(answer.groups, answer.kinds or ("classic",) * len(answer.groups)))
        return {g: found[g] for g in sorted(found)} if kinds else sorted(found)

    async def describe_groups(self, groups: Iterable[str]) -> dict:
        """``Admin.describe_groups``: DescribeGroups at each group's coordinator."""
        names = validate.groups(groups)
        out = {}
        for g in names:
            resp = await self.coordinators.call(g, m.DescribeGroups(groups=(g,)))
            for row in resp.groups:
                out[row.group] = _group_description(row)
        return {g: out[g] for g in names if g in out}

    async def describe_transactions(self, ids, raise_errors: bool = True) -> dict:
        """``Admin.describe_transactions``: admin/transactions.py."""
        return await transactions.describe(self.txn_coordinators, ids, raise_errors)

    async def list_transactions(self, states=()) -> list:
        """``Admin.list_transactions``: admin/transactions.py."""
        return await transactions.list_all(self.router, states)

    async def describe_producers(self, partitions) -> dict:
        """``Admin.describe_producers``: admin/transactions.py."""
        return await transactions.describe_producers(self.router, partitions)

    async def abort_transaction(self, topic: str, partition: int, producer_id: int,
                                producer_epoch: int = -1, coordinator_epoch: int = -1) -> None:
        """``Admin.abort_transaction``: admin/transactions.py."""
        await transactions.abort(self.router, topic, partition, producer_id, producer_epoch,
                                 coordinator_epoch)

    async def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        """``Admin.delete_groups``: DeleteGroups at each group's coordinator, sent once."""
        good, refused, order = _split(validate.iterable(groups, "groups"), validate.group)
        entries: list = []
        for g in good:
            resp = await self.coordinators.call(g, m.DeleteGroups(groups=(g,)), retry=False)
            entries += resp.groups
        return _results(entries, refused, order, raise_errors)

    # -- offsets ------------------------------------------------------------------------------------
    async def commit_offsets(self, group: str, offsets: dict) -> None:
        """``Admin.commit_offsets``: without membership (group/offsets.py)."""
        entries = validate.commit_entries(offsets)
        await group_offsets.commit(self.coordinators, validate.group(group), entries)

    async def fetch_offsets(self, group: str, partitions=None) -> dict:
        """``Admin.fetch_offsets``: FetchOffsets at the group's coordinator."""
        parts = None if partitions is None else tuple(validate.topic_partitions(partitions))
        found = await group_offsets.fetch(self.coordinators, validate.group(group), parts)
        return {tp: OffsetAndMetadata(*v) if v[0] >= 0 else None for tp, v in found.items()}

    async def delete_offsets(self, group: str, partitions, raise_errors: bool = True) -> dict:
        """``Admin.delete_offsets``: DeleteOffsets at the group's coordinator, sent once."""
        parts = tuple(validate.topic_partitions(partitions))
        resp = await self.coordinators.call(validate.group(group),
                                            m.DeleteOffsets(group=group, parts=parts), retry=False)
        entries = [((t, p), error, message) for t, p, error, message in resp.parts]
        return _results(entries, {}, list(dict.fromkeys(parts)), raise_errors)

    async def partitions_of(self, topics: Iterable[str]) -> list:
        """Every ``(topic, partition)`` of ``topics``."""
        counts = await partition_counts(self.router, list(topics), wait=False,
                                        timeout=self.router.options.request_timeout)
        return [(t, p) for t, n in counts.items() for p in range(n)]

    async def list_offsets(self, partitions, spec="latest", *, raise_errors: bool = True,
                           isolation_level: str = "read_uncommitted") -> dict:
        """``Admin.list_offsets``: ListOffsets per leader (net/metadata.py)."""
        if isinstance(partitions, dict):
            specs = {validate.topic_partition(tp): validate.offset_spec(s)
                     for tp, s in partitions.items()}
        else:
            items = [partitions] if isinstance(partitions, str) \
                else list(validate.iterable(partitions, "partitions"))
            topics = [validate.topic(t) for t in items if isinstance(t, str)]
            tps = [validate.topic_partition(tp) for tp in items if not isinstance(tp, str)]
            wire_spec = validate.offset_spec(spec)
            if topics:
                tps += await self.partitions_of(topics)
            specs = {tp: wire_spec for tp in tps}
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {tuple(ISOLATION_LEVELS)}, "
                             f"got {isolation_level!r}")
        found = await list_offsets(self.router, specs, raise_errors=raise_errors,
                                   isolation=ISOLATION_LEVELS[isolation_level])
        return {tp: v if isinstance(v, LogbrokerError) else OffsetAndTimestamp(*v)
                for tp, v in found.items()}

    # -- users (docs/security.md) ------------------------------------------------------------------
    async def create_user(self, name: str, password: str, iterations: int = 4096,
                          sha512_password: "str | None" = None) -> bool:
        """``Admin.create_user``: SCRAM-SHA-256 and SCRAM-SHA-512 credentials
        derived here (SCRAM-SHA-512's from ``sha512_password`` when given;
        the broker offers both, and PLAIN over SCRAM-SHA-256's), sent once."""
        from ...protocol.auth_messages import check_user_name
        from ..net.auth import user_credentials

        from ...protocol.auth_messages import SCRAM_SHA_512

        check_user_name(name)
        salt, stored, server, n = user_credentials(password, iterations)
        other = password if sha512_password is None else sha512_password
        more = ((SCRAM_SHA_512, *user_credentials(other, iterations, SCRAM_SHA_512)),)
        resp = await self.router.call_any(m.CreateUser(name=name, salt=salt, stored_key=stored,
                                                       server_key=server, iterations=n,
                                                       more=more), retry=False)
        return resp.created

    async def delete_user(self, name: str) -> None:
        """``Admin.delete_user``: sent once."""
        from ...protocol.auth_messages import check_user_name

        await self.router.call_any(m.DeleteUser(name=check_user_name(name)), retry=False)

    async def list_users(self) -> list:
        """``Admin.list_users``."""
        resp = await self.router.call_any(m.ListUsers())
        return [UserInfo(*row) for row in resp.users]

    # -- ACLs (docs/security.md, "Authorization") -------------------------------------------------
    async def create_acls(self, acls: Iterable) -> int:
        """``Admin.create_acls``: sent once."""
        rows = tuple(tuple(Acl(*a)) for a in acls)
        resp = await self.router.call_any(m.CreateAcls(acls=rows), retry=False)
        return resp.created

    async def delete_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                          pattern: str = "", operation: str = "", permission: str = "") -> list:
        """``Admin.delete_acls``: sent once."""
        resp = await self.router.call_any(m.DeleteAcls(principal, resource_type, name, pattern,
                                                       operation, permission), retry=False)
        return [Acl(*row) for row in resp.acls]

    async def describe_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                            pattern: str = "", operation: str = "", permission: str = "") -> list:
        """``Admin.describe_acls``."""
        resp = await self.router.call_any(m.DescribeAcls(principal, resource_type, name, pattern,
                                                         operation, permission))
        return [Acl(*row) for row in resp.acls]

    # -- topic configs (docs/client.md) -----------------------------------------------------------
    async def describe_configs(self, topic: str) -> TopicSettings:
        """``Admin.describe_configs``."""
        resp = await self.router.call_any(m.DescribeConfigs(topics=(validate.topic(topic),)))
        name, err, message, configs, overrides = resp.topics[0]
        if err:
            raise for_code(err)(f"{name}: {message}" if message else name)
        return TopicSettings(name, configs, overrides)

    async def alter_configs(self, topic: str, set: "dict | None" = None, delete: Iterable = (),
                            *, validate_only: bool = False) -> None:
        """``Admin.alter_configs``: sent once."""
        values = validate.configs(set)
        removed = tuple(validate.iterable(delete, "delete"))
        for name in removed:
            if not isinstance(name, str):
                raise TypeError(f"delete: setting names are str, not {type(name).__name__}")
        changes = tuple((k, "set", v) for k, v in values.items()) + \
            tuple((k, "delete", None) for k in removed)
        resp = await self.router.call_any(m.AlterConfigs(
            topics=((validate.topic(topic), changes, False),), validate_only=validate_only),
            retry=False)
        _results(resp.topics, {}, [topic], raise_errors=True)

    async def aclose(self) -> None:
        """Close the connections; every call is refused from now on."""
        self.mark_closed()
        await self.coordinators.aclose()
        await self.txn_coordinators.aclose()
        await self.router.aclose()
