"""The client's view of the cluster: live brokers, and per partition its
leader, leader epoch, replicas and in-sync replicas (ISR).

Pure: no I/O, no clock. ``MetadataCache.update(response)`` takes what a
broker answered to a Metadata request; the routing layer (routing.py) asks
``leader()`` / ``group_by_leader()`` where to send a partition's request.

Contract:

- ``leaders`` maps ``(topic, partition)`` to the broker id to send to, and
  holds only partitions whose leader is known (>= 0) *and* among the live
  brokers of the last answer. Anything else is unroutable, and the cache is
  ``stale`` until an answer routes every partition it knows.
- ``invalidate(...)`` marks the cache stale after a routing error (a broker
  said "not the leader", a connection was lost): the next refresh is due.
- Leader epochs never go backwards for a partition nobody complained about:
  an answer with an older epoch than the cached one (a broker whose view
  lags) is ignored for it. A partition named in ``invalidate`` (or all,
  without arguments) takes whatever the next answer says, so a topic that
  was deleted and created again (epochs restart at 0) is routed again.
- Every mapping is replaced whole on update, never changed in place, so a
  thread that reads ``leaders`` (the sync producer's caller thread) sees
  one consistent snapshot.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from ...errors import (BrokerUnavailableError, ClusterUnavailableError, FencedLeaderEpochError,
                       LeaderNotAvailableError, NotEnoughReplicasAfterAppendError,
                       NotEnoughReplicasError, NotLeaderError, UnknownLeaderEpochError,
                       UnknownTopicOrPartitionError)
from ...protocol import gc_pause

# Errors after which the client refreshes its metadata and sends again
# (to the new leader): they say the request went to the wrong broker, at
# the wrong time, or that the broker could not be reached.
REROUTE = (NotLeaderError, LeaderNotAvailableError, UnknownTopicOrPartitionError,
           FencedLeaderEpochError, UnknownLeaderEpochError, NotEnoughReplicasError,
           NotEnoughReplicasAfterAppendError, ClusterUnavailableError, BrokerUnavailableError)
_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.code
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def reroutes(exc: BaseException) -> bool:
    """True for the errors after which a request is sent again once the
    metadata is refreshed (``REROUTE``)."""
    return isinstance(exc, REROUTE)


class PartitionMeta(NamedTuple):
    """One partition as the cluster last described it; ``leader`` -1: none
    right now (an election is under way)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}  # live broker id -> (host, port)
        self.controller = -1
        self.partitions: dict[tuple[str, int], PartitionMeta] = {}
        self.counts: dict[str, int] = {}  # topic -> partition count
        self.leaders: dict[tuple[str, int], int] = {}  # routable partitions -> leader id
        self.tracked: frozenset = frozenset()  # topics a refresh asks for
        self.stale = True  # nothing known yet
        self.version = 0  # bumped whenever brokers or leaders change
        self._suspect: "set | None" = set()  # None: every partition
        self.doubted = False  # some partition was invalidated and not answered for since

    # -- what the client uses ----------------------------------------------------------------
    def track(self, topics: Iterable[str]) -> None:
        """Topics a refresh must cover from now on."""
        new = self.tracked.union(topics)
        if len(new) != len(self.tracked):
            self.tracked = frozenset(new)

    def forget(self, topics: Iterable[str]) -> None:
        """Drop topics (deleted by this client): nothing is cached for them."""
        gone = set(topics)
        self.tracked = self.tracked - gone
        self._replace({tp: pm for tp, pm in self.partitions.items() if tp[0] not in gone},
                      {t: n for t, n in self.counts.items() if t not in gone}, self.brokers)

    def leader(self, tp: tuple[str, int]) -> "int | None":
        """The broker to send ``tp``'s requests to, or None (unroutable)."""
        return self.leaders.get(tp)

    def group_by_leader(self, keys: Iterable[tuple]) -> tuple[dict[int, list], list]:
        """``keys``: tuples that start with (topic, partition) -> ({leader id:
        [keys it leads], ...}, [keys without a routable leader]), in the
        order given."""
        groups: dict[int, list] = {}
        unrouted = []
        leaders = self.leaders
        for key in keys:
            bid = leaders.get((key[0], key[1]))
            if bid is None:
                unrouted.append(key)
            else:
                groups.setdefault(bid, []).append(key)
        return groups, unrouted

    def doubts(self, keys: Iterable[tuple]) -> bool:
        """Whether any of ``keys`` (tuples starting with topic, partition)
        was invalidated and not answered for since."""
        suspect = self._suspect
        return suspect is None or (bool(suspect) and any((k[0], k[1]) in suspect for k in keys))

    def address(self, broker_id: int) -> "tuple[str, int] | None":
        return self.brokers.get(broker_id)

    def invalidate(self, tps: "Iterable[tuple[str, int]] | None" = None,
                   broker: "int | None" = None) -> None:
        """A routing error: the cache is stale; ``tps`` (or the partitions
        ``broker`` leads; with neither, every partition) take the next
        answer's leader even if its epoch is older."""
        self.stale = True
        if self._suspect is None:
            return
        if tps is None and broker is None:
            self._suspect, self.doubted = None, True
            return
        if tps is not None:
            self._suspect.update(tps)
        if broker is not None:
            self._suspect.update(tp for tp, bid in self.leaders.items() if bid == broker)
        self.doubted = bool(self._suspect)

    # -- what a broker answered ----------------------------------------------------------------
    def update(self, resp) -> bool:
        """Apply a MetadataResponse; returns True if brokers or leaders changed.
        Topics answered with UNKNOWN_TOPIC_OR_PARTITION are dropped; a topic
        with another error keeps what was known of it. The cyclic GC is
        paused meanwhile (protocol/gc_pause.py): a row per partition."""
        gc_pause.pause()
        try:
            return self._update(resp)
        finally:
            gc_pause.resume()

    def _update(self, resp) -> bool:
        brokers = {bid: (host, port) for bid, host, port in resp.brokers}
        fresh: dict[str, list] = {}
        for p in resp.partitions:
            fresh.setdefault(p.topic, []).append(PartitionMeta(
                p.topic, p.partition, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)))
        partitions, counts = dict(self.partitions), dict(self.counts)
        suspect = self._suspect
        held: dict[str, list] = {}  # the partitions known of each topic (one pass, not one per topic)
        for tp in partitions:
            held.setdefault(tp[0], []).append(tp)
        for name, err, _, count in resp.topics:
            if err == _UNKNOWN_TOPIC or (not err and count == 0):
                counts.pop(name, None)
                for tp in held.get(name, ()):
                    del partitions[tp]
            elif not err:
                counts[name] = count
                for tp in held.get(name, ()):
                    if tp[1] >= count:
                        del partitions[tp]
                for pm in fresh.get(name, ()):
                    tp = (pm.topic, pm.partition)
                    old = partitions.get(tp)
                    if old is None or pm.leader_epoch >= old.leader_epoch \
                            or suspect is None or tp in suspect:
                        partitions[tp] = pm
        self.controller = resp.controller
        answered = {t.name for t in resp.topics}
        if suspect is None:  # everything was suspect: cleared once every tracked topic is answered
            self._suspect = None if not self.tracked <= answered else set()
        else:
            self._suspect = {tp for tp in suspect if tp[0] not in answered}
        changed = self._replace(partitions, counts, brokers)
        self.doubted = self._suspect is None or bool(self._suspect)
        self.stale = self.stale or self.doubted
        return changed

    def _replace(self, partitions: dict, counts: dict, brokers: dict) -> bool:
        leaders = {tp: pm.leader for tp, pm in partitions.items()
                   if pm.leader >= 0 and pm.leader in brokers}
        changed = leaders != self.leaders or brokers != self.brokers
        self.partitions, self.counts, self.brokers, self.leaders = \
            partitions, counts, brokers, leaders
        self.stale = len(leaders) < len(partitions)
        if changed:
            self.version += 1
        return changed
