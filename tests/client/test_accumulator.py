"""Producer bookkeeping without a broker: batching by size and linger, buffer
memory, wake-ups, sequence numbers, retry order and error handling."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.client.producer.accumulator import Accumulator
from logbroker.client.net.link import ClientOptions
from logbroker.client.net.routing import Router
from logbroker.client.producer.handles import ThreadSignal
from logbroker.client.producer.sender import Sender
from logbroker.client.settings import ProducerSettings
from logbroker.errors import (BrokerUnavailableError, NotLeaderError, OutOfOrderSequenceError,
                              RecordTooLargeError, RequestTimedOutError)
from logbroker.api.produce_fence import ProduceFences
from logbroker.records.format import read_header
from logbroker.storage.producer_state import ProducerStates


def make_acc(**kw) -> tuple[Accumulator, list]:
    acc = Accumulator(ProducerSettings.make(**kw), ThreadSignal)
    wakes: list = []
    acc.wake = lambda seal_open: wakes.append(seal_open)
    return acc, wakes


@pytest.fixture
def sender():
    loop = asyncio.new_event_loop()
    made = []

    def make(**kw) -> Sender:
        acc, _ = make_acc(**kw)
        s = Sender(acc, Router(ClientOptions()), acc.settings, loop, in_loop=lambda: True,
                   threadsafe=False)
        acc.wake = lambda seal_open: None  # drive the sender by hand: no drains, no tasks
        made.append(s)
        return s

    yield make
    loop.close()


def collect(s: Sender, now: float = 0.0) -> list:
    """The batches of the next request to broker 0 (every partition's leader
    here), from partitions whose retry time has come."""
    return s._collect([p for p in s.acc.parts.values() if p.retry_at <= now], 0)


def test_a_batch_is_sealed_when_full_and_wakes_once_per_batch_not_per_record():
    acc, wakes = make_acc(batch_size=1000)
    for i in range(100):
        assert acc.append("t", 0, b"x" * 50, None, None, None) is not None
    queued = acc.parts[("t", 0)].queue
    assert len(queued) >= 5 and all(b.size <= 1000 for b in queued)
    assert sum(len(b) for b in queued) + len(acc.open[("t", 0)]) == 100
    assert len(wakes) == len(queued) + 1  # one per sealed batch + the first (idle) one


def test_a_window_goes_out_in_max_in_flight_parts_while_slots_are_free():
    """batch_size / max_in_flight (256 KiB here) fills a batch while a
    request slot is free, so a 1 MiB window is on the wire before its last
    record is appended; with every slot taken a batch grows to batch_size."""
    acc, wakes = make_acc(batch_size=1 << 20, max_in_flight=4)
    acc.idle, acc.inflight = False, 1  # the window's first record is in flight
    value = b"v" * 1000
    for _ in range(1000):
        acc.append("t", 0, value, None, None, None)
    sealed = list(acc.parts[("t", 0)].queue)
    assert len(sealed) == 3 and all(250_000 < b.size <= 256 << 10 for b in sealed)
    assert wakes == [False] * 3  # only sealed batches go: the open one keeps filling
    acc.inflight = 4
    for _ in range(700):
        acc.append("t", 0, value, None, None, None)
    assert len(acc.parts[("t", 0)].queue) == 3 and len(wakes) == 3
    assert acc.open[("t", 0)].size > 900_000


def test_no_wake_for_new_batches_while_the_sender_is_busy():
    acc, wakes = make_acc()
    acc.idle = False
    acc.inflight = 5  # max in flight: a full batch waits for a response
    acc.append("t", 0, b"v", None, None, None)
    acc.append("t", 1, b"v", None, None, None)
    assert wakes == []


def test_linger_seals_only_expired_batches_and_reports_the_next_deadline():
    acc, _ = make_acc(linger_ms=50)
    acc.append("a", 0, b"v", None, None, None)
    created = acc.open[("a", 0)].created
    assert acc.seal_due(created + 0.01) == pytest.approx(created + 0.05)
    assert ("a", 0) in acc.open
    assert acc.seal_due(created + 0.06) is None
    assert not acc.open and len(acc.parts[("a", 0)].queue) == 1



def test_a_due_batch_keeps_filling_while_its_leader_has_a_request_in_flight(sender):
    """Linger expired but a request to the leader in flight: the batch
    stays open and takes the records that come meanwhile (one batch, not
    one per linger), as with linger_ms=0; the response seals it."""
    s = sender(linger_ms=5, max_in_flight=2)
    acc = s.acc
    s.router.cache.leaders.update({("a", 0): 0, ("b", 0): 1})
    acc.append("a", 0, b"v", None, None, None)
    acc.append("b", 0, b"v", None, None, None)
    later = acc.open[("a", 0)].created + 1.0
    s._inflight.update({0: 1, 1: 0})  # broker 0 (a's leader) has a slot free but is busy
    assert acc.seal_due(later, False, s._seal_budget(True)) is None  # no timer for a held batch
    assert ("a", 0) in acc.open and ("b", 0) not in acc.open
    for _ in range(9):
        acc.append("a", 0, b"v", None, None, None)
    assert len(acc.open[("a", 0)]) == 10 and not acc.parts.get(("a", 0))
    s._inflight[0] = 0  # the response came back
    acc.seal_due(later, False, s._seal_budget(True))
    assert not acc.open and [len(b) for b in acc.parts[("a", 0)].queue] == [10]


@pytest.mark.parametrize("linger_ms", [0, 5])
def test_due_batches_are_sealed_only_as_far_as_the_free_requests_carry_them(sender, linger_ms):
    """Due batches beyond what the leader's free request slots take now
    stay open and keep filling (Kafka's accumulator appends to a ready
    batch until the sender drains it): sealed, they would wait queued while
    their partitions' next records started second batches."""
    size = make_acc()[0].append("x", 0, b"v" * 1000, None, None, None)[0].size
    s = sender(linger_ms=linger_ms, max_in_flight=2, max_request_size=2 * size + 10)
    acc = s.acc
    tps = [("t", q) for q in range(6)]
    s.router.cache.leaders.update({tp: 0 for tp in tps})
    for tp in tps:  # two requests of two batches each: four go now
        acc.append(*tp, b"v" * 1000, None, None, None)
    s._inflight[0] = 0
    later = acc.open[tps[-1]].created + 1.0
    acc.seal_due(later, linger_ms == 0, s._seal_budget(linger_ms > 0))
    sealed = [tp for tp in tps if acc.parts.get(tp) and acc.parts[tp].queue]
    assert sealed == tps[:4] and list(acc.open) == tps[4:]  # the oldest first
    acc.append(*tps[5], b"v", None, None, None)
    assert len(acc.open[tps[5]]) == 2  # still filling
    s._inflight[0] = 1  # a slot busy: lingering, nothing more is sealed; else one request's worth
    acc.seal_due(later, linger_ms == 0, s._seal_budget(linger_ms > 0))
    assert list(acc.open) == (tps[5:] if linger_ms == 0 else tps[4:])


def test_the_walk_of_due_batches_stops_once_every_broker_is_busy(sender):
    """A lingering producer's due batches are not walked one by one while
    every live broker has a request of ours in flight (nothing could be
    sealed): the walk stops at the first; with one broker idle its
    partitions' batches are still found behind the busy one's."""
    s = sender(linger_ms=5, max_in_flight=2)
    acc = s.acc
    s.router.cache.brokers.update({0: ("127.0.0.1", 1), 1: ("127.0.0.1", 2)})
    tps = [("a", q) for q in range(50)] + [("b", 0)]
    s.router.cache.leaders.update({tp: 0 for tp in tps})
    s.router.cache.leaders[("b", 0)] = 1
    for tp in tps:
        acc.append(*tp, b"v", None, None, None)
    later = acc.open[tps[-1]].created + 1.0
    asked = []

    def counting(budget):
        def can(tp, size):
            asked.append(tp)
            return budget(tp, size)
        return can

    s._inflight.update({0: 1, 1: 0})
    acc.seal_due(later, False, counting(s._seal_budget(True)))
    assert ("b", 0) not in acc.open and len(acc.open) == 50  # broker 1's batch found and sealed
    s._inflight.update({0: 1, 1: 1})
    acc.append("b", 0, b"v", None, None, None)  # the newest open batch: after a's 50
    asked.clear()
    acc.seal_due(later + 1.0, False, counting(s._seal_budget(True)))
    assert len(asked) == 51 and len(acc.open) == 51  # broker 1 busy too: nothing sealed
    one = sender(linger_ms=5, max_in_flight=2)  # one broker, busy: the walk stops at once
    one.router.cache.brokers[0] = ("127.0.0.1", 1)
    one.router.cache.leaders.update({tp: 0 for tp in tps[:50]})
    for tp in tps[:50]:
        one.acc.append(*tp, b"v", None, None, None)
    one._inflight[0] = 1
    asked.clear()
    assert one.acc.seal_due(later + 1.0, False, counting(one._seal_budget(True))) is None
    assert len(asked) == 1 and len(one.acc.open) == 50


def test_waiting_on_a_sealed_batch_seals_its_partitions_open_one():
    """A caller that waits for a record of a batch already sent has stopped
    appending: the partition's open batch (the window's last records) is
    sealed and the sender woken, not left for the acks of the parts before."""
    acc, wakes = make_acc(batch_size=1 << 20, max_in_flight=4)
    acc.idle, acc.inflight = False, 1
    for _ in range(300):  # one eager part of 256 KiB sealed, the rest open
        acc.append("t", 0, b"v" * 1000, None, None, None)
    acc.append("u", 0, b"v", None, None, None)
    sent = acc.parts[("t", 0)].queue[0]
    tail = acc.open[("t", 0)]
    wakes.clear()
    acc.hurry(sent)
    assert ("t", 0) not in acc.open and acc.parts[("t", 0)].queue[-1] is tail
    assert ("u", 0) in acc.open and wakes == [False]  # other partitions keep filling
    acc.hurry(sent)  # nothing open any more: no-op
    assert wakes == [False]


def test_buffer_memory_full_makes_append_return_none_until_space_frees():
    acc, _ = make_acc(batch_size=200, buffer_memory=300)  # 2 records of 53 B per batch
    handles = [acc.append("t", 0, b"x" * 40, None, None, None) for _ in range(4)]
    assert None not in handles
    assert acc.append("t", 0, b"x" * 40, None, None, None) is None  # 2 sealed: 366 B
    for b in list(acc.parts[("t", 0)].queue):
        b.complete(0, None)
        acc.resolved(b)
    assert acc.buffered == 0
    assert acc.append("t", 0, b"x" * 40, None, None, None) is not None


def test_a_far_explicit_timestamp_starts_a_new_batch():
    acc, _ = make_acc()
    acc.append("t", 0, b"v", None, None, 1_000)
    acc.append("t", 0, b"v", None, None, 1_000 + (1 << 31))
    assert len(acc.parts[("t", 0)].queue) == 1 and len(acc.open[("t", 0)]) == 1


def test_oversized_records_and_bad_headers_are_refused_at_once():
    acc, _ = make_acc(max_request_size=1000)
    with pytest.raises(RecordTooLargeError):
        acc.append("t", 0, b"x" * 1000, None, None, None)
    with pytest.raises(TypeError):
        acc.append("t", 0, b"v", None, [("k", "not bytes")], None)
    h = acc.append("t", 0, b"v", None, {"k": bytearray(b"1"), "n": None}, None)
    assert h[0].headers[0] == (("k", b"1"), ("n", None))


def test_sequence_numbers_count_records_per_partition(sender):
    s = sender(batch_size=200)
    s.producer_id, s.producer_epoch = 77, 0
    for p in (0, 1):
        for _ in range(25):
            s.acc.append("t", p, b"x" * 20, None, None, None)
    s.acc.seal_all()
    batches = []
    while True:
        got = collect(s)
        if not got:
            break
        batches += got
        for part in s.acc.parts.values():
            part.inflight = 0  # as if acknowledged
    seqs: dict = {0: [], 1: []}
    for b in batches:
        assert (b.producer_id, b.producer_epoch) == (77, 0)
        seqs[b.partition].append((b.base_sequence, len(b)))
    for p, items in seqs.items():
        expected = 0
        for base, n in items:
            assert base == expected
            expected += n
        assert expected == 25


def test_sequence_numbers_wrap_at_2_31(sender):
    s = sender()
    s.acc.append("t", 0, b"v", None, None, None)
    s.acc.append("t", 0, b"v", None, None, None)
    s.acc.seal_all()
    s.acc.parts[("t", 0)].next_seq = (1 << 31) - 1
    [b] = collect(s)
    assert b.base_sequence == (1 << 31) - 1 and s.acc.parts[("t", 0)].next_seq == 1


def test_non_idempotent_batches_carry_no_producer_fields(sender):
    s = sender(acks=1)
    s.acc.append("t", 0, b"v", None, None, None)
    s.acc.seal_all()
    [b] = collect(s)
    assert (b.producer_id, b.base_sequence) == (-1, -1)


def test_request_size_limit_splits_requests(sender):
    s = sender(batch_size=600, max_request_size=1500)
    for p in range(4):
        s.acc.append("t", p, b"x" * 500, None, None, None)
    s.acc.seal_all()
    first = collect(s)
    second = collect(s)
    assert len(first) == 2 and len(second) == 2


def test_a_flush_of_many_partitions_leaves_as_requests_of_about_a_mib(sender):
    """Decision 112: the default max_request_size (16 MiB) bounds one batch;
    a request carries REQUEST_BYTES of batches at most, so 8 partitions'
    batches of ~300 KB leave as 3 requests (the first ones reach the broker
    while the rest are encoded), each batch in exactly one."""
    from logbroker.client.producer.sender import REQUEST_BYTES

    s = sender(linger_ms=5, batch_size=4 << 20)  # one batch a partition
    for p in range(8):
        for _ in range(3):
            s.acc.append("t", p, b"x" * 100_000, None, None, None)
    s.acc.seal_all()
    requests = []
    while got := collect(s):
        requests.append(got)
    assert [len(r) for r in requests] == [3, 3, 2]
    assert all(sum(len(b.data) for b in r) <= REQUEST_BYTES for r in requests)
    assert sorted(b.partition for r in requests for b in r) == list(range(8))


def test_one_batch_larger_than_request_bytes_still_leaves_alone(sender):
    s = sender(batch_size=4 << 20, max_in_flight=1)  # no early seal: one batch of ~3 MB
    for _ in range(30):
        s.acc.append("t", 0, b"x" * 100_000, None, None, None)
    s.acc.seal_all()
    first = collect(s)
    assert len(first) == 1 and len(first[0].data) > 3_000_000


def _in_flight(s: Sender, n: int) -> list:
    for _ in range(n):
        s.acc.append("t", 0, b"x" * 100, None, None, None)
        s.acc.seal_all()
    s.acc.parts[("t", 0)].confirmed = True  # an earlier batch was acknowledged: n may go at once
    batches = []
    for _ in range(n):
        got = collect(s)
        batches += got
    return batches


def test_retriable_failure_requeues_in_sequence_order_and_blocks_the_partition(sender):
    s = sender()
    b1, b2, b3 = _in_flight(s, 3)
    part = s.acc.parts[("t", 0)]
    assert part.inflight == 3
    s.delivery.failed(b1, RequestTimedOutError("slow fsync"))
    assert part.blocked and list(part.queue) == [b1]
    assert collect(s) == []  # nothing is sent while b2, b3 are out
    s.delivery.failed(b2, OutOfOrderSequenceError("gap"))  # follows b1's failure: retried too
    s.delivery.failed(b3, BrokerUnavailableError("lost"))
    assert list(part.queue) == [b1, b2, b3] and not part.blocked
    assert not s.delivery.reset_pending
    assert [b.base_sequence for b in part.queue] == [0, 1, 2]  # same bytes resent
    part.retry_at = 0.0
    resent = collect(s, 1.0)
    assert resent == [b1, b2, b3] and all(b.data is not None for b in resent)


def test_a_partitions_batches_pipeline_from_the_first_behind_the_leaders_fence(sender):
    """bench.scale's RF=3 row: the leader of a new topic's partition answers
    NOT_LEADER until it has opened its log, and takes the first batch of a
    producer it does not know whatever its sequence. The partition's first
    three batches leave in three requests at once; the first is refused, and
    the connection's fence (api/produce_fence.py) refuses the two that
    followed it, though the log is open by then (without it they were
    appended, and the first's retry could only be refused: "producer 1 sent
    sequence 0, expected 100"). The retries go in order: every record lands,
    in order, with no new producer id."""
    s = sender()
    s.producer_id, s.producer_epoch = 1, 0
    states, written = ProducerStates(), []  # the leader's producer state and log (sequences)
    fences = ProduceFences()  # the leader's side of the one connection

    def answer(b, opened: bool) -> None:
        try:
            fences.check("t", 0, b.data)
            if not opened:
                raise NotLeaderError("t-0: the leader is still opening its log")
            h = read_header(b.data)
            [dup] = states.check_all([h])
        except (NotLeaderError, OutOfOrderSequenceError) as exc:
            fences.refused("t", 0, b.data, exc)
            s.delivery.failed(b, exc)
            return
        if dup is None:
            dup = len(written)
            states.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count, dup)
            written.extend(range(h.base_sequence, h.base_sequence + h.record_count))
        s.delivery.acked(b, dup)

    requests, batches = [], []
    for _ in range(3):  # sealed one after another: a request each while slots are free
        handle = s.acc.append("t", 0, b"x" * 100, None, None, None)
        batches.append(handle[0])
        s.acc.seal_all()
        requests.append(collect(s))
    assert [len(r) for r in requests] == [1, 1, 1]  # pipelined from the first
    for i, req in enumerate(requests):  # answered in order; the log opens after the first
        for b in req:
            answer(b, opened=i > 0)
    assert len(fences) == 1 and not any(b.done for b in batches)
    for _ in range(5):  # the retries, in order
        for b in collect(s, float("inf")):
            answer(b, opened=True)
    assert [b.error for b in batches] == [None, None, None]
    assert [b.base_offset for b in batches] == [0, 1, 2] and written == [0, 1, 2]
    assert not s.delivery.reset_pending and len(fences) == 0


def test_a_transactional_partitions_first_batch_goes_alone_until_acknowledged(sender):
    """A transaction's first batch on a partition is verified with its
    coordinator before the leader appends it: one batch in flight until one
    is acknowledged under the producer's id and epoch."""
    s = sender()
    s.producer_id, s.producer_epoch = 1, 0
    s.txn = object()  # only its presence matters to _collect
    requests = []
    for _ in range(3):
        s.acc.append("t", 0, b"x" * 100, None, None, None)
        s.acc.seal_all()
        requests.append(collect(s))
    assert [len(r) for r in requests] == [1, 0, 0]
    s.delivery.acked(requests[0][0], 0)
    assert len(collect(s)) == 2


def test_a_fatal_sequence_error_fails_the_batch_and_resets_the_producer(sender):
    s = sender()
    b1, b2 = _in_flight(s, 2)
    s.delivery.failed(b1, OutOfOrderSequenceError("gap"))
    assert b1.done and isinstance(b1.error, OutOfOrderSequenceError)
    assert s.delivery.reset_pending
    s.delivery.failed(b2, OutOfOrderSequenceError("gap"))  # consequence of the reset: retried
    assert not b2.done and list(s.acc.parts[("t", 0)].queue) == [b2]


def test_an_expired_batch_fails_with_request_timed_out(sender):
    s = sender(delivery_timeout_ms=1)
    [b] = _in_flight(s, 1)
    b.deadline = 0.0
    s.delivery.failed(b, BrokerUnavailableError("lost"))
    assert isinstance(b.error, RequestTimedOutError) and "delivery_timeout_ms" in str(b.error)


def test_settings_validation():
    assert ProducerSettings.make(acks=1).idempotent is False
    assert ProducerSettings.make().acks == -1
    with pytest.raises(ValueError):
        ProducerSettings.make(acks=1, idempotent=True)
    with pytest.raises(ValueError):
        ProducerSettings.make(acks="some")
    with pytest.raises(ValueError):
        ProducerSettings.make(max_in_flight=6)
    with pytest.raises(ValueError):
        ProducerSettings.make(linger_ms=-1)


def test_the_sender_walks_only_partitions_with_batches_queued(sender):
    """Issue 32: a producer that wrote to 2,000 partitions once and now
    writes to one walks that one per drain, not all 2,000 (the
    accumulator's ``queued``); a partition it found empty leaves it."""
    s = sender()
    s.producer_id, s.producer_epoch = 5, 0
    for p in range(2000):
        s.acc.append("t", p, b"x", None, None, None)
    s.acc.seal_all()
    assert len(s.acc.queued) == 2000
    while collect(s):
        for part in s.acc.parts.values():
            part.inflight, part.confirmed = 0, True  # as if acknowledged
    s._send_ready(0.0, False)  # the emptied ones are dropped (no leader known: nothing sent)
    assert not s.acc.queued and len(s.acc.parts) == 2000
    s.acc.append("t", 7, b"y", None, None, None)
    s.acc.seal_all()
    assert list(s.acc.queued) == [("t", 7)]

