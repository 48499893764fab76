"""``BrokerConnection.open`` connects to an IP address literal without
``getaddrinfo`` (asyncio runs it on a thread pool: ~3 ms of a client's
first connection) and still resolves host names."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.client.net.connection import BrokerConnection
from logbroker.errors import BrokerUnavailableError
from logbroker.protocol import messages as m


def test_literal_addresses_skip_the_resolver_and_names_use_it(broker):
    port = int(broker.bootstrap.rsplit(":", 1)[1])

    async def main():
        loop = asyncio.get_running_loop()
        asked = []
        resolve = loop.getaddrinfo

        async def counting(host, *args, **kwargs):
            asked.append(host)
            return await resolve(host, *args, **kwargs)

        loop.getaddrinfo = counting
        conn = await BrokerConnection.open("127.0.0.1", port, timeout=2, max_frame_bytes=1 << 20)
        try:
            assert (await conn.request(m.Handshake(client_id="t"), 2)).error == 0
        finally:
            conn.close()
        assert asked == []
        try:  # localhost may resolve to ::1 first, where nothing listens
            (await BrokerConnection.open("localhost", port, timeout=2,
                                         max_frame_bytes=1 << 20)).close()
        except BrokerUnavailableError:
            pass
        assert asked == ["localhost"]
        with pytest.raises(BrokerUnavailableError):  # nothing listens on ::1 here
            await BrokerConnection.open("::1", port, timeout=2, max_frame_bytes=1 << 20)
        assert asked == ["localhost"]

    asyncio.run(main())
