"""partition_counts' retry rule (client/net/metadata.py): the error a
caller gets when the deadline falls while a retry is unanswered."""

import asyncio
from types import SimpleNamespace

import pytest

from logbroker.client.net.metadata import partition_counts
from logbroker.errors import RequestTimedOutError, UnknownTopicOrPartitionError


class ScriptedRouter:
    """Answers Metadata from a script: a tuple of topic rows, or an
    exception to raise (what a Router raises when no answer came)."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.calls = 0

    async def metadata(self, topics, *, auto_create, timeout):
        self.calls += 1
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return SimpleNamespace(topics=step)


UNKNOWN = (("t", UnknownTopicOrPartitionError.code, "topic 't' does not exist", 0),)


def test_a_retry_cut_by_the_deadline_reports_the_topics_last_answer():
    router = ScriptedRouter(UNKNOWN, RequestTimedOutError("no response in time"))
    with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
        asyncio.run(partition_counts(router, ["t"], timeout=0.05))
    assert router.calls == 2


def test_a_first_request_unanswered_is_a_timeout():
    router = ScriptedRouter(RequestTimedOutError("no response in time"))
    with pytest.raises(RequestTimedOutError):
        asyncio.run(partition_counts(router, ["t"], timeout=0.05))


def test_a_topic_that_appears_on_a_retry_is_counted():
    router = ScriptedRouter(UNKNOWN, (("t", 0, "", 3),))
    assert asyncio.run(partition_counts(router, ["t"], timeout=5)) == {"t": 3}
