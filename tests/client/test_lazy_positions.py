"""Positions resolve lazily (Kafka's rule): ``assign``, ``seek`` and
``seek_to_beginning`` / ``seek_to_end`` send nothing; the first ``poll``
resolves every unknown position: a committed offset, else a reset to either
end in the first Fetch itself (at EARLIEST / LATEST: decision 111, no
ListOffsets; ``position()`` asks ListOffsets when it needs one at once), and
no fetch is started only to be abandoned. Counted on the client: ``Router.sent`` (by
request type), ``Router.metadata_requests``, ``Fetcher.abandoned``."""

from __future__ import annotations

from logbroker import Admin, Consumer, Producer
from tests.support.fixtures import FAST, consume

TOPICS = [f"lazy{i}" for i in range(5)]


def fill(bootstrap, topics, n):
    with Admin(bootstrap, **FAST) as a:
        for t in topics:
            a.create_topic(t, partitions=1, exist_ok=True)
    with Producer(bootstrap, **FAST) as p:
        for t in topics:
            for i in range(n):
                p.send(t, b"%s-%d" % (t.encode(), i))
        p.flush()


def counts(c) -> tuple:
    router = c._core.fetcher.router
    return router.sent["ListOffsets"], router.metadata_requests, c._core.fetcher.abandoned


def test_assign_then_seek_to_beginning_costs_no_list_offsets(broker):
    fill(broker.bootstrap, TOPICS, 10)
    with Consumer(broker.bootstrap, **FAST) as c:  # auto_offset_reset "latest"
        c.assign([(t, 0) for t in TOPICS])
        c.seek_to_beginning()
        assert counts(c) == (0, 0, 0)  # nothing asked before the first poll
        got = consume(c, 50)
        assert sorted((r.topic, r.offset) for r in got) == \
            [(t, i) for t in TOPICS for i in range(10)]
        assert counts(c) == (0, 1, 0)  # one Metadata, no ListOffsets, no fetch abandoned


def test_assign_then_poll_resolves_by_policy(broker):
    fill(broker.bootstrap, TOPICS[:2], 3)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([(t, 0) for t in TOPICS[:2]])
        assert len(consume(c, 6)) == 6
        assert counts(c) == (0, 1, 0)
    with Consumer(broker.bootstrap, **FAST) as c:  # latest: only what comes later
        c.assign([(TOPICS[0], 0)])
        assert c.poll(0.3) == []
        fill(broker.bootstrap, TOPICS[:1], 1)
        assert [r.offset for r in consume(c, 1)] == [3]


def test_seek_to_an_offset_needs_no_list_offsets(broker):
    fill(broker.bootstrap, TOPICS[:1], 10)
    with Consumer(broker.bootstrap, **FAST) as c:
        c.assign([(TOPICS[0], 0)])
        c.seek_to_end()
        c.seek(TOPICS[0], 0, 7)  # the last word: no reset pending any more
        assert [r.offset for r in consume(c, 3)] == [7, 8, 9]
        assert counts(c)[0] == 0


def test_position_resolves_a_pending_seek(broker):
    fill(broker.bootstrap, TOPICS[:1], 4)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([(TOPICS[0], 0)])
        c.seek_to_end()
        assert c.position(TOPICS[0], 0) == 4  # resolved now: later records are read
        fill(broker.bootstrap, TOPICS[:1], 1)
        assert [r.offset for r in consume(c, 1)] == [4]
        c.seek_to_beginning()
        assert c.position(TOPICS[0], 0) == 0
        assert counts(c)[0] == 2


def test_seek_after_polling_started_refetches(broker):
    fill(broker.bootstrap, TOPICS[:1], 5)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5_000,
                  **FAST) as c:
        c.assign([(TOPICS[0], 0)])
        assert len(consume(c, 5)) == 5
        c.poll(0.05)  # a long poll is in flight now
        c.seek_to_beginning()
        assert [r.offset for r in consume(c, 5, timeout=2.0)] == [0, 1, 2, 3, 4]


def test_group_consumer_starts_at_committed_unless_reset(broker):
    fill(broker.bootstrap, TOPICS[:2], 6)
    tps = [(t, 0) for t in TOPICS[:2]]
    with Consumer(broker.bootstrap, group="lazy-g", **FAST) as c:
        c.assign(tps)
        c.commit({tp: 4 for tp in tps})
    with Consumer(broker.bootstrap, group="lazy-g", **FAST) as c:
        c.assign(tps)
        assert sorted((r.topic, r.offset) for r in consume(c, 4)) == \
            [(t, o) for t in TOPICS[:2] for o in (4, 5)]
        assert counts(c)[0] == 0  # committed offsets: no ListOffsets
    with Consumer(broker.bootstrap, group="lazy-g", **FAST) as c:
        c.assign(tps)
        c.seek_to_beginning([tps[0]])  # the other keeps its committed offset
        got = consume(c, 8)
        assert sorted((r.topic, r.offset) for r in got) == \
            [(TOPICS[0], o) for o in range(6)] + [(TOPICS[1], o) for o in (4, 5)]
        assert c.position(*tps[1]) == 6 and counts(c)[0] == 0
