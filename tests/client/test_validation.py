"""Bad values at the client edge (issue 9 §2): every argument of Producer,
Consumer and Admin is checked before anything is appended or sent; a refused
call raises at once (TypeError for a wrong type, the registry's error for a
wrong value) and leaves the client usable. One broker for the module."""

from __future__ import annotations

import asyncio
import time

import pytest

from logbroker import Admin, Consumer, Producer, aio
from logbroker.errors import (InvalidConfigError, InvalidGroupError, InvalidRequestError,
                              InvalidTopicError, RecordTooLargeError,
                              UnknownTopicOrPartitionError)
from logbroker.client import validate
from logbroker.limits import MAX_PARTITIONS, MAX_TIMESTAMP
from tests.support.fixtures import FAST, BrokerProcess, consume, wait_until

T0 = 1_700_000_000_000
YEAR_MS = 365 * 24 * 3600 * 1000


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("validation") / "data")
    try:
        yield b.start().bootstrap
    finally:
        b.kill()


BAD_SENDS = [  # (kwargs of send, the error), topic "v" has 2 partitions
    (dict(topic=""), InvalidTopicError),
    (dict(topic="bad name!"), InvalidTopicError),
    (dict(topic="x" * 250), InvalidTopicError),
    (dict(topic=7), TypeError),
    (dict(partition=-1), InvalidRequestError),
    (dict(partition=2), UnknownTopicOrPartitionError),
    (dict(partition=1 << 70), InvalidRequestError),
    (dict(partition="1"), TypeError),
    (dict(partition=True), TypeError),
    (dict(value="text"), TypeError),
    (dict(key=5), TypeError),
    (dict(headers=[("k", "not bytes")]), TypeError),
    (dict(headers=[(1, b"")]), TypeError),
    (dict(headers="k=v"), TypeError),
    (dict(headers={"\ud800": b""}), InvalidRequestError),
    (dict(timestamp_ms=-1), InvalidRequestError),
    (dict(timestamp_ms=MAX_TIMESTAMP + 1), InvalidRequestError),
    (dict(timestamp_ms=1 << 63), InvalidRequestError),
    (dict(timestamp_ms=1 << 70), InvalidRequestError),
    (dict(timestamp_ms=1.5), TypeError),
    (dict(timestamp_ms="now"), TypeError),
    (dict(value=b"x" * 5000), RecordTooLargeError),
]


@pytest.mark.parametrize("bad, error", BAD_SENDS, ids=lambda v: repr(v)[:40])
def test_a_refused_record_raises_at_once_and_the_next_one_is_acknowledged(bootstrap, bad, error):
    with Admin(bootstrap, **FAST) as a:
        a.create_topic("v", partitions=2, exist_ok=True)
    with Producer(bootstrap, linger_ms=20, max_request_size=4000, **FAST) as p:
        before = p.send("v", b"before", partition=0)
        args = dict(topic="v", value=b"bad", partition=0) | bad
        t = time.monotonic()
        with pytest.raises(error) as info:
            p.send(**args)
        assert time.monotonic() - t < 1 and str(info.value)
        t = time.monotonic()
        after = p.send("v", b"after", partition=0)  # the same open batch as `before`
        assert after.result(5).offset == before.result(5).offset + 1
        assert time.monotonic() - t < 3


def test_timestamps_years_apart_are_stored_and_read_back(bootstrap):
    """Deltas from a batch's first timestamp are int32 (docs/format.md): records
    more than 2**31-1 ms apart must go to different batches, transparently."""
    stamps = [T0, 0, MAX_TIMESTAMP, T0 + (1 << 31) - 1, T0 - (1 << 31), T0 + (1 << 31),
              T0 - 30 * YEAR_MS, 1, T0 + 5, MAX_TIMESTAMP - 1, T0 + 100 * YEAR_MS]
    with Producer(bootstrap, linger_ms=50, **FAST) as p:
        handles = [p.send("years", b"%d" % i, timestamp_ms=ts) for i, ts in enumerate(stamps)]
        metas = [h.result(10) for h in handles]
    assert [md.offset for md in metas] == list(range(len(stamps)))
    assert [md.timestamp for md in metas] == stamps
    with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("years", 0)])
        records = consume(c, len(stamps))
    assert [(r.value, r.timestamp) for r in records] == [(b"%d" % i, ts)
                                                          for i, ts in enumerate(stamps)]


@pytest.mark.parametrize("bad, error", [
    (("c", -1), InvalidRequestError), (("c", MAX_PARTITIONS), InvalidRequestError),
    (("c", True), TypeError), (("c", 1.0), TypeError), (("c", "1"), TypeError),
    (("c", 1, 2), TypeError), (("bad name!", 1), InvalidTopicError)])
def test_every_pair_of_an_assignment_is_checked_after_its_topic_was(bad, error):
    """A topic's name is checked once a call: the pairs after the first of
    it are still refused for a bad partition, and nothing else passes."""
    with pytest.raises(error):
        validate.topic_partitions([("c", 0), ("c", 1), bad])
    assert validate.topic_partitions([("c", 0), ["c", 1], ("d", 2), ("c", 3)]) == \
        [("c", 0), ("c", 1), ("d", 2), ("c", 3)]


def test_consumer_refuses_bad_arguments_and_goes_on(bootstrap):
    with Producer(bootstrap, **FAST) as p:
        p.send("c", b"r0").result(10)
    with pytest.raises(InvalidGroupError):
        Consumer(bootstrap, group="", **FAST)
    with pytest.raises(InvalidGroupError):
        Consumer(bootstrap, group="g" * 250, **FAST)
    with Consumer(bootstrap, group="cg", auto_offset_reset="earliest", **FAST) as c:
        c.assign([("c", 0)])
        for bad, error in [([("bad name!", 0)], InvalidTopicError), ([("c", -1)], InvalidRequestError),
                           ([("c", "0")], TypeError), (["c"], TypeError), (5, TypeError)]:
            with pytest.raises(error):
                c.assign(bad)
        assert c.assignment() == {("c", 0)}  # unchanged
        for offset, error in [(-1, InvalidRequestError), (1 << 63, InvalidRequestError),
                              (1.0, TypeError), ("0", TypeError)]:
            with pytest.raises(error):
                c.seek("c", 0, offset)
        with pytest.raises(ValueError, match="not assigned"):
            c.seek("other", 0, 0)
        for ts, error in [(-1, InvalidRequestError), (1 << 63, InvalidRequestError),
                          (None, TypeError)]:
            with pytest.raises(error):
                c.seek_to_timestamp(ts)
        for args, error in [((float("nan"),), InvalidRequestError), (("1",), TypeError),
                            ((0.1, 0), InvalidRequestError), ((0.1, -5), InvalidRequestError),
                            ((0.1, 1.5), TypeError), ((1e30,), InvalidRequestError)]:
            with pytest.raises(error):
                c.poll(*args)
        with pytest.raises(InvalidTopicError):
            c.subscribe(["ok", "not ok"])
        for offsets, error in [({("c", 0): -1}, InvalidRequestError),
                               ({("c", 0): (1, "m" * 5000)}, InvalidRequestError),
                               ({("c", 0): (1, 2)}, TypeError), ([("c", 0)], TypeError)]:
            with pytest.raises(error):
                c.commit(offsets)
        assert [r.value for r in consume(c, 1, timeout=10)] == [b"r0"]
        c.commit()
        assert c.committed("c", 0) == 1


def test_admin_refuses_bad_arguments_and_goes_on(bootstrap):
    with Admin(bootstrap, **FAST) as a:
        for args, error in [(("",), InvalidTopicError), (("t", 0), InvalidConfigError),
                            (("t", 10_001), InvalidConfigError), (("t", "2"), TypeError),
                            (("t", 1, {"segment_bytes": 1 << 70}), InvalidConfigError),
                            (("t", 1, {"nope": 1}), InvalidConfigError),
                            (("t", 1, [1]), TypeError)]:
            with pytest.raises(error):
                a.create_topic(*args)
        results = a.create_topics(["ok1", "bad/name", ("ok2", 0)], raise_errors=False)
        assert results["ok1"] is None and list(results) == ["ok1", "bad/name", "ok2"]
        assert isinstance(results["bad/name"], InvalidTopicError)
        assert isinstance(results["ok2"], InvalidConfigError)
        assert a.list_topics()["ok1"] == 1 and "ok2" not in a.list_topics()
        with pytest.raises(InvalidTopicError):
            a.delete_topics(["ok1", ""])  # the valid one is still deleted, as documented
        assert "ok1" not in a.list_topics()
        for spec, error in [(-3, InvalidRequestError), ("middle", InvalidRequestError),
                            (1 << 63, InvalidRequestError), (1.5, TypeError)]:
            with pytest.raises(error):
                a.list_offsets([("ok1", 0)], spec)
        with pytest.raises(InvalidGroupError):
            a.describe_groups(["g" * 300])
        with pytest.raises(InvalidGroupError):
            a.fetch_offsets("")
        with pytest.raises(InvalidRequestError):
            a.commit_offsets("g", {("t", -1): 0})
        assert isinstance(a.delete_groups(["\x00"], raise_errors=False)["\x00"], InvalidGroupError)
        assert a.create_topic("after-errors", 2) is True


def test_asyncio_clients_refuse_the_same_values(bootstrap):
    async def main():
        async with aio.Producer(bootstrap, linger_ms=20, **FAST) as p:
            before = await p.send("av", b"before")
            with pytest.raises(InvalidRequestError):
                await p.send("av", b"bad", timestamp_ms=-1)
            with pytest.raises(InvalidTopicError):
                await p.send("", b"bad")
            after = await p.send("av", b"after")
            assert (await after).offset == (await before).offset + 1
        async with aio.Consumer(bootstrap, **FAST) as c:
            with pytest.raises(InvalidRequestError):
                c.assign([("av", -1)])
            c.assign([("av", 0)])
            with pytest.raises(InvalidRequestError):
                await c.seek_to_timestamp(-1)
            with pytest.raises(InvalidRequestError):
                await c.poll(float("nan"))
            assert await c.position("av", 0) == 2
        async with aio.Admin(bootstrap, **FAST) as a:
            with pytest.raises(InvalidConfigError):
                await a.create_topic("aa", 0)
            assert await a.create_topic("aa", 1)

    async def bounded():
        async with asyncio.timeout(60):
            await main()

    asyncio.run(bounded())


def test_a_blocking_send_from_a_callback_raises_instead_of_deadlocking(bootstrap):
    """A callback runs on the I/O thread: a send that would block there (a new
    topic needs metadata from that very thread) raises RuntimeError; a send
    to a known topic just appends."""
    outcomes = []

    def callback(handle):
        for topic in ("cb-known", "cb-new"):
            try:
                outcomes.append(p.send(topic, b"from the callback").topic)
            except RuntimeError as exc:
                outcomes.append(str(exc))

    with Producer(bootstrap, **FAST) as p:
        p.send("cb-known", b"first").result(10)
        p.send("cb-known", b"second").add_done_callback(callback)
        wait_until(lambda: len(outcomes) == 2, what="the callback's two sends")
        assert outcomes[0] == "cb-known" and "deadlock" in outcomes[1]
        with pytest.raises(TypeError, match="topic must be a str"):
            p.send(["a", "list"], b"v")


def test_an_unknown_setting_is_named_with_the_known_ones():
    from logbroker import Consumer, Producer

    with pytest.raises(TypeError, match=r"Producer\(\) got unknown setting\(s\) "
                                        r"'enable_idempotence'; known: .*idempotent"):
        Producer(bootstrap="127.0.0.1:1", enable_idempotence=True)
    with pytest.raises(TypeError, match=r"Consumer\(\) got unknown setting\(s\) 'auto_commit'"):
        Consumer(bootstrap="127.0.0.1:1", auto_commit=True)
