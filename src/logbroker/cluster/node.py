"""ClusterNode: a broker's membership in a cluster, wired together.

``start()`` connects to etcd, registers the broker under its lease, loads
the metadata and applies it (opening the logs of the partitions this
broker is a replica of), then runs, until ``close()``:

- the lease keepalive (session.py);
- the watch of the cluster's keys, applied in revision order; a broken
  watch is replaced by a full reload, whose differences are applied (the
  users and ACL bindings among them go to ``access``, access_view.py);
- the controller campaign (controller.py);
- the ISR check of the partitions it leads (replicas.py);
- one fetcher per leader it follows (follower.py);
- the deletion of its copy of a partition a reassignment moved away
  (reassignment.py), also of one moved while it was down (at load).

Every loop logs its errors and goes on. Requests reach the node through
the broker's handlers (metadata/cluster.py). ``connect_to`` dials a
peer: TLS when ours is on, then SCRAM as ``inter_broker_user`` when set
(peer_auth.py), then the proof that we are broker ``me`` with the
cluster's secret (peer_proof.py, always: the leader binds the connection
to our id). The secret is read (or created in etcd) before registering.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import replace

from ..errors import BrokerUnavailableError, ClusterUnavailableError, for_code
from ..protocol import messages as m
from ..storage.log import Log
from ..tls import peer_context
from ..storage.store import Store
from .access_view import AccessView
from .controller import Controller
from .etcd import Etcd
from .etcd_access import etcd_access
from .follower import LeaderFetcher
from .peer_auth import authenticate_peer, inter_broker_credentials
from .peer_proof import PeerKey, configured_secret, prove, shared_secret
from .replicas import ReplicaManager
from .replication_throttle import Throttle
from .session import Session
from .state import BrokerInfo, Keys, PartitionState, pack, partition_value, unpack
from .view import ClusterView

log = logging.getLogger("logbroker.cluster")
PID_BLOCK = 1000
CLOSE_STEP_S = 3.0
OPEN_AT_ONCE = 16  # new replicas of one topic made on the loop; more go in slices
OPEN_SLICE = 250  # replicas made per slice in the I/O threads (two LMDB commits)
ETCD_START_WAIT_S = 20.0  # how long a starting broker waits for etcd (Kafka: 18 s for ZooKeeper)


class ClusterNode:
    def __init__(self, config, store: Store, notify, executor) -> None:
        """``config``: the BrokerConfig (etcd, cluster, broker_id, timings);
        ``notify(log)``: wake consumers of a log whose HW moved."""
        self.config, self.store, self.executor = config, store, executor
        self.me = config.broker_id
        self.keys = Keys(config.cluster_name)
        self.view = ClusterView(self.keys)
        self.access = AccessView(self.keys)  # users and ACLs (security/auth.py reads them)
        self.etcd = Etcd(config.etcd, timeout=config.etcd_timeout_ms / 1000,
                         access=etcd_access(config))
        self.request_timeout = config.replica_timeout_ms / 1000
        self.peer_tls = peer_context(config)  # TLS to the other brokers when ours is on
        self.peer_credentials = inter_broker_credentials(config)  # SCRAM to them, when set
        self._secret = configured_secret(config)  # else etcd's, read at start
        self.peer_key: "PeerKey | None" = None  # the cluster's secret (peer_proof.py)
        self.replica_fetch_bytes = config.replica_fetch_max_bytes
        self.throttle = Throttle(config.reassignment_throttle_bytes_per_s)  # reassignments' fetches
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.replicas = ReplicaManager(self.me, config.replica_lag_time_max_ms / 1000, notify,
                                       self._propose_isr, _Fetchers(self))
        self.controller = Controller(self)
        self.controller_changes = 0  # changes of the controller key this broker saw (metrics)
        self.session: "Session | None" = None
        self._tasks: list[asyncio.Task] = []
        self._pids: "list[int] | None" = None  # [next, end) of our producer id block
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._background: set[asyncio.Task] = set()
        self._opening: set[tuple[str, int]] = set()  # replicas whose logs are being made
        self._configuring = asyncio.Lock()  # topic config changes applied one at a time
        self._dropping: set[tuple[str, int]] = set()  # replicas whose files are being deleted

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        me = BrokerInfo(self.me, host, port, int(time.time() * 1000))
        self.session = Session(self.etcd, self.keys, me, max(1, -(-self.config.session_timeout_ms
                                                                    // 1000)))
        self.replicas.fenced = lambda: self.session.fenced
        self.replicas.registered = self._registered
        await self._first_registration()
        await self._reload()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.session.run()), loop.create_task(self._watch()),
                       loop.create_task(self.controller.run()),
                       loop.create_task(self._every(0.25, self.replicas.check_isr))]

    async def _first_registration(self) -> None:
        """Register, retrying while etcd cannot be reached for up to
        ``ETCD_START_WAIT_S`` (a broker started beside etcd, or while etcd
        is slow, waits for it, as Kafka's waits for ZooKeeper up to
        zookeeper.connection.timeout.ms); then ClusterUnavailableError."""
        deadline = time.monotonic() + ETCD_START_WAIT_S
        while True:
            try:
                if self.peer_key is None:
                    secret = self._secret or await shared_secret(self.etcd, self.keys.secret)
                    self.peer_key = PeerKey(secret, self.config.cluster_name, self.me)
                return await self.session.register()
            except ClusterUnavailableError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("etcd not reachable yet, retrying: %s", exc)
                await asyncio.sleep(0.5)

    async def advertise_kafka(self, host: str, port: int, listeners: tuple = ()) -> None:
        """Add our Kafka listener's advertised address (and our named
        listeners', ``listeners``: (name, host, port) each) to our registration
        (in place: no leave, no join); Kafka clients learn it from any
        broker's Metadata once its watch brings the change. Raises
        ClusterUnavailableError when etcd cannot take it."""
        await self.session.advertise(replace(self.session.me, kafka=(host, port),
                                             kafka_listeners=tuple(listeners)))

    async def leave(self) -> None:
        """Controlled shutdown: give up our lease now (etcd drops our
        registration; the controller moves our leaderships to in-sync
        replicas) and fail the acks=all producers waiting on us with
        NOT_LEADER_OR_FOLLOWER so they retry at the new leader."""
        for task in self._tasks:  # no keepalive (it would register again), watch, controller
            task.cancel()
        if self.session is not None:
            await _bounded(self.session.close())
        self.replicas.resign()

    async def close(self) -> None:
        """Stop every loop and leave the cluster (lease revoked: the controller
        moves our leaderships at once). Each step is bounded: a shutdown never
        hangs on etcd or a peer."""
        for task in (*self._tasks, *self._background):
            task.cancel()
        steps = [asyncio.gather(*self._tasks, *self._background, return_exceptions=True),
                 *(f.close() for f in list(self.fetchers.values()))]
        if self.session is not None:
            steps.append(self.session.close())
        for step in steps:
            await _bounded(step)
        await _bounded(self.etcd.close())

    async def _every(self, period: float, fn) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                fn()
            except Exception:  # noqa: BLE001
                log.exception("%s failed", getattr(fn, "__name__", fn))

    # -- metadata ---------------------------------------------------------------------------
    async def _reload(self) -> None:
        items, revision = await self.etcd.load(self.keys.root)
        self.access.reset(items, revision)
        for change in self.view.reset(items, revision):
            self._react(change)
        # partitions of ours whose state did not change still need a role (first load)
        for st in list(self.view.partitions.values()):
            if self.me in st.replicas and st.key not in self.replicas.replicas:
                self._react(("partition", st.key))
        # copies a reassignment removed from us while we were down
        for lg in self.store.logs():
            st = self.view.partitions.get((lg.topic, lg.partition))
            if st is not None and lg.topic in self.view.topics and self.me not in st.replicas:
                log.info("%s: no longer a replica here (reassigned): deleting it", lg.name)
                self._drop(st.key)

    async def _watch(self) -> None:
        while True:
            try:
                async for ev in self.etcd.watch(self.keys.root, self.view.revision + 1):
                    self.access.apply(ev.key, ev.value, ev.version)  # users, ACLs; else nothing
                    change = self.view.apply(ev)
                    if change is not None:
                        self._react(change)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reload and watch again
                log.warning("etcd watch broke (%s): reloading", exc)
            await asyncio.sleep(0.2)
            try:
                await self._reload()
            except Exception as exc:  # noqa: BLE001
                log.warning("reload failed: %s", exc)

    def _react(self, change: tuple[str, object]) -> None:
        kind, ident = change
        try:
            if kind == "partition":
                self._partition_changed(ident)
                st = self.view.partitions.get(ident)
                if st is not None and st.reassigning:  # its next step may be due (controller.py)
                    self.controller.wake.set()
            elif kind == "topic":
                bad = self.view.bad_of("topic", ident)
                if bad is not None:  # refused (view.py): served as unavailable, data kept
                    for key in [k for k in self.replicas.replicas if k[0] == ident]:
                        self.replicas.suspend(key, f"topic {ident}'s metadata in etcd is "
                                                   f"invalid ({bad.why})")
                elif ident not in self.view.topics:
                    for key in [k for k in self.replicas.replicas if k[0] == ident]:
                        self._drop(key)
                else:
                    self._topic_changed(ident)
            else:  # a broker came or went, or the controller changed
                if kind == "controller":
                    self.controller_changes += 1
                self.controller.wake.set()
                if kind == "broker" and ident == self.me:  # we registered (again), or lost it
                    for key in list(self.replicas.replicas):
                        self._partition_changed(key)
        except Exception:  # noqa: BLE001 - one bad partition must not stop the watch
            log.exception("applying %s %s failed", kind, ident)

    def _topic_changed(self, topic: str) -> None:
        """Apply every partition of ``topic``; more than ``OPEN_AT_ONCE`` new
        logs of ours are made in slices in the I/O threads first
        (``_open_in_slices``), so a topic of thousands of partitions never
        holds the loop."""
        new = [st.key for st in self.view.partitions_of(topic)
               if self.me in st.replicas and not self.store.hosts(*st.key)
               and st.key not in self._opening]
        if len(new) > OPEN_AT_ONCE:
            self._opening.update(new)
            self._spawn(self._open_in_slices(topic, new))
        for st in self.view.partitions_of(topic):
            self._partition_changed(st.key)
        self._configs_changed(topic)

    def _configs_changed(self, topic: str) -> None:
        """An AlterConfigs of ``topic`` (etcd's value changed): its logs hosted
        here take the new settings live (``Store.alter_topic``, in the I/O
        threads, one change at a time, each applying the view's newest)."""
        st, record = self.view.topics.get(topic), self.store.topics.get(topic)
        if st is None or record is None or record.overrides == st.log_overrides():
            return

        async def apply() -> None:
            async with self._configuring:
                now = self.view.topics.get(topic)
                if now is not None and self.store.topics.get(topic) is not None:
                    await self.run_io(self.store.alter_topic, topic, now.log_overrides())
                    log.info("topic %s: settings changed to %s", topic, now.log_overrides())

        self._spawn(apply())

    async def _open_in_slices(self, topic: str, keys: list) -> None:
        """Make the logs of ``keys`` (new replicas of ours), ``OPEN_SLICE`` at
        a time off the loop; each slice's partitions are then applied with
        their state as the view has it by then (a partition deleted
        meanwhile is dropped again)."""
        try:
            for i in range(0, len(keys), OPEN_SLICE):
                chunk = keys[i:i + OPEN_SLICE]
                st = self.view.topics.get(topic)
                if st is not None:
                    await self.run_io(self.store.ensure_partitions, topic,
                                      [p for _, p in chunk], st.log_overrides(),
                                      self._leading(chunk))
                for key in chunk:
                    self._opening.discard(key)
                    if self.view.partitions.get(key) is None and self.store.hosts(*key):
                        self._drop(key)
                    else:
                        self._react(("partition", key))
        finally:
            self._opening.difference_update(keys)

    def _leading(self, keys: list) -> dict:
        """partition -> leader epoch of ``keys`` this broker is to lead (as
        ReplicaManager.apply will decide: a state written after our
        registration), so their new logs take the epoch off the loop."""
        out = {}
        for key in keys:
            st = self.view.partitions.get(key)
            if st is not None and st.leader == self.me and st.version > self._registered():
                out[key[1]] = st.leader_epoch
        return out

    def _partition_changed(self, key: tuple[str, int]) -> None:
        if key in self._opening or key in self._dropping:  # applied once made / deleted
            return
        st = self.view.partitions.get(key)
        topic = self.view.topics.get(key[0])
        bad = self.view.bad_of("partition", key) or self.view.bad_of("topic", key[0])
        if bad is not None:  # refused (view.py): served as unavailable, data kept
            self.replicas.suspend(key, f"{key[0]}-{key[1]}'s metadata in etcd is invalid "
                                       f"({bad.why})")
            return
        if topic is not None and key[1] >= topic.partitions:
            return  # a stray key beyond the topic's count: not a partition of it
        if st is None or topic is None:
            if key in self.replicas.replicas:
                self._drop(key)
            return
        if self.me not in st.replicas:
            if self.store.hosts(*key):  # a reassignment removed us: our copy goes
                log.info("%s-%d: no longer a replica here (replicas %s): deleting it", *key,
                         list(st.replicas))
                self._drop(key)
            else:
                self.replicas.remove(key)
            return
        lg = self.store.ensure_partition(key[0], key[1], topic.log_overrides())
        self.replicas.apply(st, lg, topic.min_insync_replicas)

    def adding_here(self, key: tuple[str, int]) -> bool:
        """Whether a reassignment is adding this broker's replica of ``key``
        and it has not caught up yet (its fetches are throttled,
        replication_throttle.py; once in the ISR it keeps up unthrottled)."""
        st = self.view.partitions.get(key)
        return st is not None and self.me in st.adding and self.me not in st.isr

    def _registered(self) -> float:
        """The etcd revision of our registration as the view shows it
        (infinite while it shows none: an unregistered broker leads nothing)."""
        b = self.view.brokers.get(self.me)
        return float("inf") if b is None else b.registered

    def _drop(self, key: tuple[str, int]) -> None:
        """The topic was deleted: stop serving the partition now, remove its
        files once no follower I/O on it is under way."""
        self.replicas.remove(key)
        if key in self._dropping:
            return
        self._dropping.add(key)

        async def drop() -> None:
            try:
                async with self.partition_lock(key):
                    if key not in self.replicas.replicas:  # not re-created meanwhile
                        await self.run_io(self.store.drop_partition, *key)
            finally:
                self._dropping.discard(key)
                st = self.view.partitions.get(key)
                if st is not None and self.me in st.replicas:  # ours again meanwhile (a move)
                    self._react(("partition", key))

        self._spawn(drop())

    def _propose_isr(self, r, isr: tuple[int, ...]) -> None:
        st = r.state
        new = st.with_(isr=isr)
        key = self.keys.partition(st.topic, st.partition)

        async def go() -> None:
            try:
                ok = await self.etcd.cas({key: partition_value(new)}, {key: st.version})
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: ISR change failed: %s", r.log.name, exc)
                ok = False
            if ok:
                log.info("%s: ISR %s -> %s", r.log.name, list(st.isr), list(isr))
            else:
                self.replicas.isr_change_failed(r)

        self._spawn(go())

    def _spawn(self, coro) -> None:
        """A short background task, referenced until done, its failure logged."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._reaped)

    def _reaped(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed: %r", task.exception())

    async def cas_partition(self, old: PartitionState, new: PartitionState) -> bool:
        key = self.keys.partition(old.topic, old.partition)
        return await self.etcd.cas({key: partition_value(new)}, {key: old.version})

    async def new_producer_id(self) -> int:
        """A producer id unique in the cluster: taken from a block of
        ``PID_BLOCK`` reserved in etcd by compare-and-set (Kafka's producer
        id blocks)."""
        if self._pids is None or self._pids[0] >= self._pids[1]:
            key = self.keys.producer_ids
            while True:
                self.check_available()
                got = await self.etcd.get(key)
                start = unpack(got.value)["next"] if got else 1
                if await self.etcd.cas({key: pack({"next": start + PID_BLOCK})},
                                       {key: got.version if got else 0}):
                    self._pids = [start, start + PID_BLOCK]
                    break
        pid = self._pids[0]
        self._pids[0] += 1
        return pid

    # -- peers ------------------------------------------------------------------------------
    async def connect_to(self, broker_id: int):
        from ..client.net.connection import BrokerConnection

        b = self.view.brokers.get(broker_id)
        if b is None:
            raise BrokerUnavailableError(f"broker {broker_id} is not registered")
        conn = await BrokerConnection.open(b.host, b.port, timeout=self.request_timeout,
                                           max_frame_bytes=self.config.max_frame_bytes,
                                           tls=self.peer_tls)
        try:
            resp = await conn.request(m.Handshake(client_id=f"broker-{self.me}"),
                                      self.request_timeout)
            if resp.error:
                raise for_code(resp.error)(resp.message)
            await authenticate_peer(conn, self.peer_credentials, self.request_timeout)
            await prove(conn, self.require_peer_key(), broker_id, self.request_timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    def partition_lock(self, key: tuple[str, int]) -> asyncio.Lock:
        """Serialises the followers' log changes of one partition."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def run_io(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, functools.partial(fn, *args, **kwargs))

    def require_peer_key(self) -> PeerKey:
        if self.peer_key is None:
            raise ClusterUnavailableError(f"broker {self.me} has not read its cluster's secret yet")
        return self.peer_key

    def check_available(self) -> None:
        if self.session is None or self.session.fenced:
            raise ClusterUnavailableError(f"broker {self.me} has no live etcd session")


async def _bounded(aw, seconds: float = CLOSE_STEP_S) -> None:
    try:
        await asyncio.wait_for(aw, seconds)
    except Exception as exc:  # noqa: BLE001 - closing goes on
        log.warning("shutdown step %s did not finish: %r", getattr(aw, "__name__", aw), exc)


class _Fetchers:
    """The ReplicaManager's handle on the fetchers: one per leader broker."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self.where: dict[tuple[str, int], int] = {}

    def add(self, key, lg: Log, leader: int, epoch: int) -> None:
        self.remove(key)
        f = self.node.fetchers.get(leader)
        if f is None:
            f = self.node.fetchers[leader] = LeaderFetcher(self.node, leader)
        f.add(key, lg, epoch)
        self.where[key] = leader

    def remove(self, key) -> None:
        leader = self.where.pop(key, None)
        if leader is not None and leader in self.node.fetchers:
            self.node.fetchers[leader].remove(key)
