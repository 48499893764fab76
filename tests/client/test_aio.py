"""The asyncio twins (logbroker.aio) end to end against a real broker."""

from __future__ import annotations

import asyncio
import time

import pytest

from logbroker import aio
from logbroker.client import partition_for_key
from logbroker.errors import BrokerUnavailableError, ClientClosedError, TopicAlreadyExistsError
from tests.support.fixtures import FAST, aconsume


def run(coro, timeout: float = 60):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def test_async_round_trip_and_keyed_partitioning(broker):
    async def main():
        async with aio.Admin(broker.bootstrap, **FAST) as admin:
            assert await admin.create_topic("a", partitions=3)
            assert not await admin.create_topic("a", partitions=3, exist_ok=True)
            with pytest.raises(TopicAlreadyExistsError):
                await admin.create_topic("a")
        async with aio.Producer(broker.bootstrap, **FAST) as p:
            first = await p.send_and_wait("a", b"v0", key=b"k0", headers={"h": b"1"})
            assert first.partition == partition_for_key(b"k0", 3)
            handles = [await p.send("a", b"v%d" % i, key=b"k%d" % i) for i in range(1, 100)]
            await p.flush()
            metas = [await h for h in handles]
            assert all(md.partition == partition_for_key(b"k%d" % i, 3)
                       for i, md in enumerate(metas, 1))
            assert await p.partitions_for("a") == 3
        async with aio.Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
            await c.subscribe("a")
            records = await aconsume(c, 100)
            assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(100))
            assert next(r for r in records if r.value == b"v0").headers == (("h", b"1"),)

    run(main())


def test_async_seek_commit_and_iteration(broker):
    async def main():
        async with aio.Producer(broker.bootstrap, **FAST) as p:
            for i in range(20):
                await p.send("s", b"%d" % i, timestamp_ms=1_000_000 + i * 10)
            await p.flush()
        async with aio.Consumer(broker.bootstrap, group="ag", consumer_timeout_ms=300,
                                **FAST) as c:
            c.assign([("s", 0)])
            assert await c.position("s", 0) == 20
            await c.seek_to_timestamp(1_000_000 + 145)
            assert await c.position("s", 0) == 15
            await c.seek_to_beginning()
            c.seek("s", 0, 5)
            values = [r.value async for r in c]
            assert values == [b"%d" % i for i in range(5, 20)]
            await c.commit()
            assert await c.committed("s", 0) == 20
            await c.seek_to_end()
            assert await c.poll(0.1) == []
        async with aio.Admin(broker.bootstrap, **FAST) as admin:
            assert (await admin.fetch_offsets("ag"))[("s", 0)].offset == 20
            described = await admin.describe_groups(["ag"])
            assert described["ag"].partitions[0].lag == 0

    run(main())


def test_async_long_poll_wakes_up_on_produce(broker):
    async def main():
        async with aio.Producer(broker.bootstrap, **FAST) as p, \
                aio.Consumer(broker.bootstrap, fetch_max_wait_ms=30_000, **FAST) as c:
            await p.send_and_wait("w", b"old")
            c.assign([("w", 0)])
            assert await c.position("w", 0) == 1
            polling = asyncio.ensure_future(c.poll(20))
            await asyncio.sleep(0.2)  # the poll is blocked now (not a synchronisation)
            t = time.monotonic()
            await p.send_and_wait("w", b"new")
            records = await polling
            assert [r.value for r in records] == [b"new"] and time.monotonic() - t < 5

    run(main())


def test_async_unreachable_and_closed(broker):
    async def main():
        port = broker.port
        broker.kill()
        p = aio.Producer(f"127.0.0.1:{port}", max_block_ms=500, **FAST)
        with pytest.raises(BrokerUnavailableError):
            await p.send("t", b"v")
        with pytest.raises(BrokerUnavailableError):
            await p.start()
        await p.close()
        with pytest.raises(ClientClosedError):
            await p.send("t", b"v")
        c = aio.Consumer(f"127.0.0.1:{port}", **FAST)
        c.assign([("t", 0)])
        with pytest.raises(BrokerUnavailableError):
            await c.poll(0.5)
        await c.close()
        with pytest.raises(ClientClosedError):
            c.seek("t", 0, 0)

    run(main())
