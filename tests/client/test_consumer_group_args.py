"""Fuzz of the consumer-group API's arguments (no broker needed): the new
Consumer settings and subscribe()'s topics / pattern / callbacks. A bad type
or value is a TypeError, ValueError or the registry's InvalidGroupError /
InvalidTopicError / InvalidRequestError, at once; never anything else."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from logbroker import Consumer, aio
from logbroker.errors import InvalidGroupError, InvalidRequestError, InvalidTopicError

ALLOWED = (TypeError, ValueError, InvalidGroupError, InvalidTopicError, InvalidRequestError)
NOWHERE = "127.0.0.1:1"  # nothing listens: a valid subscribe only starts joining in the background
ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 1 << 40), st.floats(allow_nan=True),
                st.text(max_size=6), st.lists(st.text(max_size=4), max_size=3), st.binary(max_size=3))
SETTING = st.sampled_from(["session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms",
                           "group_instance_id", "partition_assignment_strategy",
                           "enable_auto_commit", "auto_commit_interval_ms",
                           "metadata_max_age_ms"])
STRATEGY = st.one_of(st.sampled_from(["range", "roundrobin", "cooperative-sticky", "nope"]),
                     st.lists(st.sampled_from(["range", "roundrobin", "cooperative-sticky", "x"]),
                              max_size=3))


@settings(max_examples=150, deadline=None)
@given(values=st.dictionaries(SETTING, st.one_of(ANY, STRATEGY), max_size=3),
       group=st.one_of(st.none(), st.just("g"), st.just("")))
def test_bad_group_settings_are_refused_clearly(values, group):
    try:
        consumer = Consumer(NOWHERE, group=group, **values)
    except ALLOWED:
        return
    consumer.close()
    s = consumer.settings
    assert s.heartbeat_interval_ms < s.session_timeout_ms
    assert isinstance(s.enable_auto_commit, bool) and s.partition_assignment_strategy


@pytest.fixture(scope="module")
def member():
    c = Consumer(NOWHERE, group="fuzz", request_timeout_ms=500, connect_timeout_ms=200)
    yield c
    c.close()


TOPICS = st.one_of(st.none(), st.text(max_size=5), st.lists(st.text(max_size=5), max_size=3),
                   st.integers(), st.just(["ok", "fine"]), st.just("a" * 300))
PATTERN = st.one_of(st.none(), st.sampled_from(["t-.*", "(", "[a-", "x" * 5, "(?P<"]),
                    st.just(re.compile("q.*")), st.just(re.compile(b"b")), st.integers())
CALLBACK = st.one_of(st.none(), st.just(print), st.integers(), st.text(max_size=2))


@settings(max_examples=150, deadline=None)
@given(topics=TOPICS, pattern=PATTERN, on_assign=CALLBACK, on_revoke=CALLBACK)
def test_subscribe_refuses_bad_arguments_clearly(member, topics, pattern, on_assign, on_revoke):
    try:
        member.subscribe(topics, pattern=pattern, on_assign=on_assign, on_revoke=on_revoke)
    except ALLOWED:
        return
    assert member.subscription() in (tuple(dict.fromkeys([topics] if isinstance(topics, str)
                                                         else topics or ())),
                                     getattr(pattern, "pattern", pattern))


def test_callbacks_without_a_group_and_the_asyncio_twin():
    with Consumer(NOWHERE) as c:
        with pytest.raises(ValueError, match="need a consumer group"):
            c.subscribe(["t"], on_assign=print)
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        aio.Consumer(NOWHERE, group="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError, match="unknown partition assignor"):
        aio.Consumer(NOWHERE, group="g", partition_assignment_strategy=["sticky"])
    with pytest.raises(ValueError, match="needs a group"):
        Consumer(NOWHERE, group_instance_id="i")
