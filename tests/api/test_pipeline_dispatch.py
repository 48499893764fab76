"""The pipeline's dispatch (api/pipeline.py) never leaves a request
unanswered: answers leave a connection in order, so one that never comes
stalls every later one. A step the handler awaited that is cancelled under
it (as gRPC cancels an etcd call whose client was closed: decision 119) is
answered as a bug, UNKNOWN; only the dispatch's own cancellation (the
connection closing, the broker stopping) propagates."""

from __future__ import annotations

import asyncio
import types

import pytest

from logbroker.api import registry
from logbroker.api.pipeline import Pipeline
from logbroker.errors import UnknownError
from logbroker.protocol import messages as m


def _cancelled_under(svc, req, session):
    async def handle():
        step = asyncio.get_running_loop().create_task(asyncio.sleep(30))
        asyncio.get_running_loop().call_soon(step.cancel)  # not by our caller
        await step
    return handle()


def _slow(svc, req, session):
    return asyncio.sleep(30)


def test_a_cancellation_under_the_handler_is_answered(monkeypatch, caplog):
    monkeypatch.setitem(registry.OURS, m.FindCoordinator, registry.Entry(_cancelled_under))
    pipe = Pipeline(types.SimpleNamespace(requests=None))

    async def go():
        return await asyncio.wait_for(pipe.dispatch(m.FindCoordinator(group="g"), None), 5)

    resp = asyncio.run(go())
    assert isinstance(resp, m.FindCoordinatorResponse)
    assert resp.error == UnknownError.code, resp
    assert "FindCoordinator's handling was cancelled" in caplog.text  # the log line says why


def test_the_dispatch_itself_cancelled_is_cancelled(monkeypatch):
    monkeypatch.setitem(registry.OURS, m.FindCoordinator, registry.Entry(_slow))
    pipe = Pipeline(types.SimpleNamespace(requests=None))

    async def go():
        task = asyncio.get_running_loop().create_task(
            pipe.dispatch(m.FindCoordinator(group="g"), None))
        await asyncio.sleep(0)  # one turn: the handler is awaiting
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return task.cancelled()

    assert asyncio.run(go())
