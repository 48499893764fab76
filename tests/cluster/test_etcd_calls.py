"""The etcd client's calls (cluster/etcd.py) against a real etcd behind a
fault-injecting proxy: a call cut off by the client's renewal (a broken
watch renews the channel) fails as an etcd failure, CLUSTER_UNAVAILABLE,
not as a cancellation of its caller. A cancellation escaping a request's
handler used to leave its request unanswered and, since answers leave in
order, every later one on that connection (a FindCoordinator at a broker
whose etcd link was reset: the client's 10 s timeout)."""

from __future__ import annotations

import asyncio
import time

from logbroker.cluster.etcd import Etcd
from logbroker.errors import ClusterUnavailableError


def test_a_call_cut_off_by_a_renewal_is_an_etcd_failure(etcd, tcp_proxy):
    proxy = tcp_proxy(etcd.url.removeprefix("http://"))

    async def go():
        e = Etcd(f"http://{proxy.address}", timeout=5.0)
        try:
            await e.put("/t/k", b"v")  # connected
            proxy.cut("blackhole")
            old = e._client
            call = asyncio.get_running_loop().create_task(e.get("/t/k"))
            await asyncio.sleep(0)  # one turn: the call is under way on the old client
            t = time.monotonic()
            e._renew(old)  # as a broken watch does: the old client is closed under the call
            try:
                await call
            except ClusterUnavailableError as exc:
                failed = exc
            took = time.monotonic() - t
            proxy.heal()
            item = await e.get("/t/k")  # the new client
            return failed, took, item
        finally:
            await e.close()

    failed, took, item = asyncio.run(go())
    assert "cut off" in failed.message, failed
    assert took < 3.0  # at once, not the call's 5 s deadline
    assert item is not None and item.value == b"v"


def test_a_watch_cut_off_by_a_renewal_is_an_etcd_failure(etcd):
    async def go():
        e = Etcd(etcd.url, timeout=5.0)
        try:
            await e.put("/w/a", b"1")
            events = e.watch("/w/", 1).__aiter__()
            first = await events.__anext__()  # the stream is up (from revision 1)
            nxt = asyncio.get_running_loop().create_task(events.__anext__())
            await asyncio.sleep(0)  # one turn: waiting on the stream of the old client
            e._renew(e._client)
            try:
                await asyncio.wait_for(nxt, 5)
            except ClusterUnavailableError as exc:
                return first, exc
            finally:
                await events.aclose()
        finally:
            await e.close()

    first, failed = asyncio.run(go())
    assert (first.key, first.value) == ("/w/a", b"1")
    assert "the watch was cut off" in failed.message, failed  # not a quiet end
