"""The sync and the asyncio Consumer behave the same where they used to drift:
closing with a commit that fails, an explicit commit that fails, and the
rebalance callbacks. Every case runs once per shell against a real broker
process on 127.0.0.1: ``logbroker.Consumer`` as it is, ``logbroker.aio.Consumer``
driven from the test's thread (each call runs to its end on the test's loop).

The behaviour chosen (docs/client.md, "Closing and failures"): a failure while
closing (the commit, ``on_revoke``, leaving the group) is logged and the close
completes; an explicit ``commit()`` raises the broker's refusal; a rebalance
callback's exception is raised by ``poll`` once the change is applied. The
one difference is by design: a coroutine callback is awaited by the asyncio
consumer and refused (``TypeError`` from ``poll``) by the sync one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

import pytest

from tests.support.fixtures import FAST, BrokerProcess
from logbroker import Admin, Consumer, Producer, aio
from logbroker.errors import ClientClosedError, UnknownMemberIdError

GROUP_FAST = dict(session_timeout_ms=2_000, heartbeat_interval_ms=150,
                  auto_offset_reset="earliest", fetch_max_wait_ms=100, **FAST)
FAST_BROKER = {"group_initial_rebalance_delay_ms": 100}


class AioConsumer:
    """``logbroker.aio.Consumer`` called like the sync one: a coroutine
    method's call runs on ``loop`` until it ends (the loop runs only then)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, bootstrap: str, **settings) -> None:
        async def make():
            return aio.Consumer(bootstrap, **settings)

        self._loop = loop
        self._consumer = loop.run_until_complete(make())

    def __getattr__(self, name: str):
        attr = getattr(self._consumer, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            result = attr(*args, **kwargs)
            return self._loop.run_until_complete(result) if inspect.isawaitable(result) else result

        return call


class Shell:
    """The shell under test: ``consumer(bootstrap, **settings)`` makes one of
    its consumers; ``name`` tells topics and groups of the two runs apart."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop() if name == "aio" else None
        self.made: list = []

    def consumer(self, bootstrap: str, **settings):
        c = Consumer(bootstrap, **settings) if self.loop is None \
            else AioConsumer(self.loop, bootstrap, **settings)
        self.made.append(c)
        return c


@pytest.fixture(params=["sync", "aio"])
def shell(request):
    """Each shell in turn; its consumers are closed after the test (the
    asyncio one's loop too)."""
    s = Shell(request.param)
    yield s
    for c in s.made:
        c.close()
    loop = s.loop
    if loop is not None:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    """One broker for the cases that keep it running."""
    with BrokerProcess(tmp_path_factory.mktemp("shells") / "data", config=FAST_BROKER) as b:
        yield b


def topic_with_records(bootstrap: str, topic: str, partitions: int = 2, n: int = 10) -> None:
    with Admin(bootstrap, **FAST) as admin:
        admin.create_topic(topic, partitions)
    with Producer(bootstrap, **FAST) as producer:
        for i in range(n):
            producer.send(topic, b"v%d" % i, partition=i % partitions)


def poll_until(consumer, done, timeout: float = 15.0, what: str = "condition") -> list:
    """Poll until ``done(records so far)``; an exception ``poll`` raises
    propagates. Bounded."""
    got: list = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        got += consumer.poll(0.1)
    return got


def test_close_logs_a_failing_commit_and_completes(shell, tmp_path, caplog):
    """The broker is gone when the member closes: its commit fails (logged),
    on_revoke is still called, leaving fails (logged), and close returns."""
    with BrokerProcess(tmp_path / "data", config=FAST_BROKER) as b:
        topic_with_records(b.bootstrap, "closing")
        revoked: list = []
        c = shell.consumer(b.bootstrap, group="g-closing",
                          **{**GROUP_FAST, "request_timeout_ms": 1_000,
                             "connect_timeout_ms": 500})
        c.subscribe(["closing"], on_revoke=revoked.append)
        poll_until(c, lambda got: len(got) == 10, what="all 10 records")
        b.kill()
        caplog.set_level(logging.WARNING, logger="logbroker.client.group")
        started = time.monotonic()
        c.close()
        assert time.monotonic() - started < 15
    assert "commit on close failed" in caplog.text
    assert revoked == [[("closing", 0), ("closing", 1)]]
    with pytest.raises(ClientClosedError):
        c.poll(0.1)


def test_a_failing_on_revoke_while_closing_is_logged(shell, gbroker, caplog):
    b, topic, group = gbroker.bootstrap, f"revoking-{shell.name}", f"g-revoking-{shell.name}"
    topic_with_records(b, topic)
    c = shell.consumer(b, group=group, **GROUP_FAST)

    def on_revoke(partitions):
        raise RuntimeError("the application's on_revoke failed")

    c.subscribe([topic], on_revoke=on_revoke)
    poll_until(c, lambda got: len(got) == 10, what="all 10 records")
    caplog.set_level(logging.WARNING, logger="logbroker.client.group")
    c.close()
    assert "on_revoke while closing" in caplog.text
    assert "the application's on_revoke failed" in caplog.text
    with Admin(b, **FAST) as admin:  # the commit before it went through
        offsets = admin.fetch_offsets(group)
    assert {tp: o.offset for tp, o in offsets.items()} == {(topic, 0): 5, (topic, 1): 5}


def test_an_explicit_commit_raises_the_refusal(shell, gbroker):
    """A commit without membership while the group has a member is refused:
    both shells raise it (nothing is logged instead)."""
    b, topic, group = gbroker.bootstrap, f"refused-{shell.name}", f"g-refused-{shell.name}"
    topic_with_records(b, topic)
    member = Consumer(b, group=group, **GROUP_FAST)
    try:
        member.subscribe([topic])
        poll_until(member, lambda got: len(got) == 10, what="the member's records")
        outsider = shell.consumer(b, group=group, **GROUP_FAST)
        outsider.assign([(topic, 0)])
        with pytest.raises(UnknownMemberIdError, match="has members"):
            outsider.commit({(topic, 0): 1})
    finally:
        member.close()


def test_a_rebalance_callbacks_exception_is_raised_by_poll_after_the_change(shell, gbroker):
    b, topic = gbroker.bootstrap, f"assigning-{shell.name}"
    topic_with_records(b, topic)
    calls: list = []

    def on_assign(partitions):
        calls.append(partitions)
        raise ValueError("the application's on_assign failed")

    c = shell.consumer(b, group=f"g-assigning-{shell.name}", **GROUP_FAST)
    c.subscribe([topic], on_assign=on_assign)
    with pytest.raises(ValueError, match="on_assign failed"):
        poll_until(c, lambda got: False, what="on_assign's exception")
    assert calls == [[(topic, 0), (topic, 1)]]
    assert c.assignment() == {(topic, 0), (topic, 1)}  # applied all the same
    assert len(poll_until(c, lambda got: len(got) == 10, what="all 10 records")) == 10
    assert len(calls) == 1


def test_a_coroutine_callback_is_awaited_by_the_asyncio_consumer_only(shell, gbroker):
    """The one difference, by design: the asyncio consumer awaits a callback's
    coroutine; the sync one has no loop of the caller's to run it on and
    raises TypeError from poll (as a callback's exception), the change applied."""
    b, topic = gbroker.bootstrap, f"awaiting-{shell.name}"
    topic_with_records(b, topic)
    calls: list = []

    async def on_assign(partitions):
        calls.append(partitions)

    c = shell.consumer(b, group=f"g-awaiting-{shell.name}", **GROUP_FAST)
    c.subscribe([topic], on_assign=on_assign)
    if shell.name == "aio":
        poll_until(c, lambda got: calls, what="on_assign awaited")
        assert calls == [[(topic, 0), (topic, 1)]]
    else:
        with pytest.raises(TypeError, match="returned an awaitable"):
            poll_until(c, lambda got: False, what="the TypeError")
        assert calls == []  # never ran: the coroutine was closed unawaited
    assert c.assignment() == {(topic, 0), (topic, 1)}
