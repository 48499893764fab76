"""Routing without a broker: backoff, the metadata cache (leaders, epochs,
staleness), grouping by leader, the router's address lists, and the
producer's sender routing batches per leader with stub connections."""

from __future__ import annotations

import asyncio
import time
from functools import partial

import pytest

from logbroker.client.producer.accumulator import Accumulator
from logbroker.client.net.backoff import Backoff
from logbroker.client.net.cluster_meta import MetadataCache, reroutes
from logbroker.client.producer.handles import ThreadSignal
from logbroker.client.net.link import ClientOptions
from logbroker.client.net.routing import Router
from logbroker.client.producer.sender import Sender
from logbroker.client.settings import ProducerSettings
from logbroker.errors import (BrokerUnavailableError, ClusterUnavailableError,
                              FencedLeaderEpochError, InvalidTopicError,
                              NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                              NotLeaderError, OutOfOrderSequenceError, RecordTooLargeError,
                              RequestTimedOutError)
from logbroker.protocol import messages as m
from logbroker.protocol.parts import BrokerAddress, PartitionLeaders, TopicCount


def meta(parts, brokers=(0, 1, 2), topics=None) -> m.MetadataResponse:
    """A MetadataResponse: parts are (topic, partition, leader, epoch)."""
    counts: dict = {}
    for t, p, *_ in parts:
        counts[t] = max(counts.get(t, 0), p + 1)
    return m.MetadataResponse(
        brokers=tuple(BrokerAddress(b, "127.0.0.1", 9000 + b) for b in brokers),
        topics=topics if topics is not None
        else tuple(TopicCount(t, 0, "", n) for t, n in counts.items()),
        controller=0,
        partitions=tuple(PartitionLeaders(t, p, leader, epoch, (0, 1, 2), (0, 1, 2))
                         for t, p, leader, epoch in parts))


# -- backoff ------------------------------------------------------------------------------------------
def test_backoff_doubles_up_to_the_cap_within_its_jitter():
    exact = Backoff(0.05, 1.0, jitter=0.0)
    assert [exact.delay(a) for a in range(1, 8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert exact.delay(0) == 0.0 and exact.delay(10_000) == 1.0
    low, high = Backoff(0.1, 1.0, 0.2, rng=lambda: 0.0), Backoff(0.1, 1.0, 0.2, rng=lambda: 1.0)
    assert low.delay(1) == pytest.approx(0.08) and high.delay(1) == pytest.approx(0.12)
    assert high.delay(20) == 1.0  # jitter never exceeds the cap
    assert Backoff(0.0, 1.0).delay(5) == 0.0
    b = Backoff(0.05, 1.0, jitter=0.0)
    assert [b.next(), b.next(), b.next()] == [0.05, 0.1, 0.2]
    b.reset()
    assert b.next() == 0.05
    with pytest.raises(ValueError):
        Backoff(-1.0)


# -- the metadata cache ---------------------------------------------------------------------------------
def test_cache_routes_partitions_whose_leader_is_live():
    c = MetadataCache()
    assert c.stale and c.leader(("t", 0)) is None
    assert c.update(meta([("t", 0, 1, 0), ("t", 1, 2, 0), ("t", 2, -1, 0)], brokers=(0, 1)))
    assert c.leaders == {("t", 0): 1}  # 2 is not live, partition 2 has no leader
    assert c.stale and c.counts == {"t": 3} and c.address(1) == ("127.0.0.1", 9001)
    assert c.partitions[("t", 1)].replicas == (0, 1, 2)
    version = c.version
    assert c.update(meta([("t", 0, 1, 0), ("t", 1, 2, 0), ("t", 2, 0, 1)]))
    assert not c.stale and c.version == version + 1
    assert not c.update(meta([("t", 0, 1, 0), ("t", 1, 2, 0), ("t", 2, 0, 1)]))
    assert c.version == version + 1  # nothing changed


def test_group_by_leader_keeps_the_order_given():
    c = MetadataCache()
    c.update(meta([("a", 0, 1, 0), ("a", 1, 0, 0), ("b", 0, 1, 0)]))
    groups, unrouted = c.group_by_leader([("b", 0, "x"), ("a", 0, "y"), ("a", 1, "z"),
                                          ("c", 0, "w")])
    assert groups == {1: [("b", 0, "x"), ("a", 0, "y")], 0: [("a", 1, "z")]}
    assert unrouted == [("c", 0, "w")]


def test_epochs_do_not_go_back_unless_the_partition_was_invalidated():
    c = MetadataCache()
    c.update(meta([("t", 0, 1, 5), ("t", 1, 1, 5)]))
    c.update(meta([("t", 0, 2, 4), ("t", 1, 2, 4)]))  # a broker whose view lags
    assert c.leaders == {("t", 0): 1, ("t", 1): 1}
    c.invalidate([("t", 0)])  # a routing error for partition 0 only
    assert c.stale
    c.update(meta([("t", 0, 2, 0), ("t", 1, 2, 0)]))  # e.g. the topic was deleted and re-made
    assert c.leaders == {("t", 0): 2, ("t", 1): 1}
    c.invalidate(broker=1)  # a lost connection: whatever it led
    c.update(meta([("t", 0, 2, 0), ("t", 1, 2, 0)]))
    assert c.leaders == {("t", 0): 2, ("t", 1): 2} and not c.stale


def test_a_full_invalidation_stays_stale_until_every_tracked_topic_is_answered():
    c = MetadataCache()
    c.track(["a", "b"])
    c.update(meta([("a", 0, 1, 3), ("b", 0, 1, 3)]))
    c.invalidate()
    c.update(meta([("a", 0, 2, 0)]))  # an answer about "a" alone
    assert c.stale and c.leaders[("a", 0)] == 2
    c.update(meta([("a", 0, 2, 0), ("b", 0, 0, 0)]))
    assert not c.stale and c.leaders[("b", 0)] == 0


def test_unknown_and_forgotten_topics_leave_the_cache():
    c = MetadataCache()
    c.track(["t", "u"])
    c.update(meta([("t", 0, 1, 0), ("u", 0, 1, 0)]))
    c.update(meta([("u", 0, 1, 0)], topics=(TopicCount("t", 3, "unknown topic 't'", 0),
                                               TopicCount("u", 0, "", 1))))
    assert ("t", 0) not in c.partitions and "t" not in c.counts and c.leaders == {("u", 0): 1}
    c.forget(["u"])
    assert c.leaders == {} and c.counts == {} and c.tracked == frozenset({"t"})
    c.update(meta([("t", 0, 1, 0), ("t", 1, 1, 0)]))
    c.update(meta([("t", 0, 1, 0)]))  # shrank to 1 partition
    assert list(c.partitions) == [("t", 0)]


def test_which_errors_reroute():
    for exc in (NotLeaderError(), FencedLeaderEpochError(), ClusterUnavailableError(),
                BrokerUnavailableError()):
        assert reroutes(exc)
    for exc in (RecordTooLargeError(), InvalidTopicError(), RequestTimedOutError(),
                OutOfOrderSequenceError()):
        assert not reroutes(exc)


# -- the router's addresses --------------------------------------------------------------------------------
def test_control_link_tries_known_live_brokers_then_the_bootstrap_list():
    r = Router(ClientOptions.make("127.0.0.1:9001,127.0.0.1:7000"))
    assert r._control_addresses() == [("127.0.0.1", 9001), ("127.0.0.1", 7000)]
    r.cache.update(meta([("t", 0, 1, 0)], brokers=(2, 1)))
    assert r._control_addresses() == [("127.0.0.1", 9001), ("127.0.0.1", 9002),
                                      ("127.0.0.1", 7000)]
    assert r._broker_addresses(2) == [("127.0.0.1", 9002)] and r._broker_addresses(5) == []
    wild = m.MetadataResponse(brokers=(BrokerAddress(0, "0.0.0.0", 9555),), topics=(),
                              partitions=())
    r.cache.update(wild)  # serve --host 0.0.0.0: reached where the bootstrap is
    assert r._broker_addresses(0) == [("127.0.0.1", 9555)]


# -- the sender, with stub connections ---------------------------------------------------------------------
class StubConn:
    """Records requests; answers only when the test says so."""

    def __init__(self, broker: int, sent: list) -> None:
        self.broker, self.sent = broker, sent

    def request_cb(self, msg, timeout, callback) -> None:
        self.sent.append((self.broker, msg, callback))


@pytest.fixture
def routed():
    loop = asyncio.new_event_loop()
    sent: list = []

    def make(**kw) -> Sender:
        acc = Accumulator(ProducerSettings.make(**kw), ThreadSignal)
        router = Router(ClientOptions())
        router.cache.update(meta([("t", 0, 0, 0), ("t", 1, 1, 0), ("t", 2, 0, 0)]))
        router.current = partial(StubConn, sent=sent)
        s = Sender(acc, router, acc.settings, loop, in_loop=lambda: False, threadsafe=False)
        acc.wake = lambda seal_open: None
        s._need_pid, s.producer_id, s.producer_epoch = False, 9, 0
        return s

    yield make, sent
    loop.close()


def parts_of(msg) -> list:
    return [(t, p) for t, p, _ in msg.parts]


def answer(s: Sender, request, code: int = 0) -> None:
    broker, msg, callback = request
    callback(m.ProduceResponse(parts=tuple((t, p, code, "x" if code else "", 0 if not code else -1, 0)
                                           for t, p, _ in msg.parts)), None)


def test_one_request_per_leader_with_only_its_partitions(routed):
    make, sent = routed
    s = make()
    for p in (0, 1, 2):
        s.acc.append("t", p, b"v", None, None, None)
    s.acc.seal_all()
    s._send_ready(0.0, in_loop=False)
    assert sorted((b, parts_of(msg)) for b, msg, _ in sent) == [(0, [("t", 0), ("t", 2)]),
                                                               (1, [("t", 1)])]
    assert s._inflight == {0: 1, 1: 1} and s.acc.inflight == 2


def test_after_a_leader_change_nothing_goes_to_the_new_leader_before_the_old_answers(routed):
    make, sent = routed
    s = make(batch_size=100)
    for _ in range(3):
        s.acc.append("t", 0, b"x" * 80, None, None, None)  # a batch each
    s.acc.seal_all()
    s.acc.parts[("t", 0)].confirmed = True  # an earlier batch was acknowledged: all may go
    s._send_ready(0.0, in_loop=False)
    first = sent[:]
    assert [b for b, _, _ in first] == [0]  # the three batches in one request to broker 0
    s.router.cache.update(meta([("t", 0, 1, 1), ("t", 1, 1, 0), ("t", 2, 0, 0)]))
    s.acc.append("t", 0, b"y" * 80, None, None, None)
    s.acc.seal_all()
    s._send_ready(0.0, in_loop=False)
    assert sent == first  # partition 0 has batches in flight to broker 0: wait
    answer(s, sent[0], NotLeaderError.code)
    part = s.acc.parts[("t", 0)]
    assert [b.base_sequence for b in part.queue] == [0, 1, 2, -1] and not part.blocked
    assert s.router.cache.stale  # the refusal marked the metadata stale
    s._send_ready(part.retry_at, in_loop=False)
    broker, resent, _ = sent[-1]
    assert broker == 1 and len(resent.payload) == 4
    assert resent.payload[:3] == first[0][1].payload  # the same bytes: same id and sequences


def test_retries_back_off_exponentially_per_attempt(routed):
    make, sent = routed
    s = make(retry_backoff_ms=100, retry_backoff_max_ms=400)
    s.delivery.retry.jitter = 0.0
    s.acc.append("t", 1, b"v", None, None, None)
    s.acc.seal_all()
    part = s.acc.parts[("t", 1)]
    waits = []
    for attempt in range(4):
        s._send_ready(part.retry_at, in_loop=False)
        assert len(sent) == attempt + 1
        now = time.monotonic()
        answer(s, sent[-1], NotLeaderError.code)
        waits.append(round(part.retry_at - now, 2))
    assert waits == [0.1, 0.2, 0.4, 0.4]


@pytest.mark.parametrize("error", [NotEnoughReplicasAfterAppendError, NotEnoughReplicasError])
def test_a_refused_or_unacknowledged_batch_goes_to_the_new_leader_as_the_same_bytes(routed, error):
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND (the old leader wrote the batch, the
    ISR shrank before the HW covered it) cannot be made to happen at a given
    moment in a real cluster: the decision it triggers, tested here, is a
    metadata refresh and a resend of the same bytes (producer id, sequence)
    to whichever broker leads then, so that broker can recognise the batch.
    (tests/client/test_routing_cluster.py deduplicates a written but unacknowledged
    batch at a real new leader.)"""
    make, sent = routed
    s = make()
    handle = s.acc.append("t", 0, b"v", None, None, None)
    s.acc.seal_all()
    s._send_ready(0.0, in_loop=False)
    assert [b for b, _, _ in sent] == [0]
    first = sent[0][1]
    answer(s, sent[0], error.code)
    part = s.acc.parts[("t", 0)]
    assert not handle.done() and [b.base_sequence for b in part.queue] == [0]
    assert s.router.cache.stale and s.router.cache.doubts([("t", 0)])  # refreshed before the resend
    s.router.cache.update(meta([("t", 0, 1, 1), ("t", 1, 1, 0), ("t", 2, 0, 0)]))  # moved to 1
    s._send_ready(part.retry_at, in_loop=False)
    broker, resent, _ = sent[-1]
    assert broker == 1 and resent.payload == first.payload
    assert (resent.producer_id, resent.producer_epoch) == (first.producer_id, first.producer_epoch)
    answer(s, sent[-1])
    assert handle.result(0).offset == 0
