"""A closed connection (either listener) is freed when it closes, by
reference counting, not later by a cyclic GC pass: nothing it owns points
back at it (its session's metrics callbacks hold the broker). The broker
runs in this process, real, so its connection objects can be counted."""

from __future__ import annotations

import asyncio
import gc
import socket

from logbroker import Admin
from logbroker.broker.config import BrokerConfig
from logbroker.net.connection import ClientConnection
from logbroker.broker.server import Broker
from logbroker.net.kafka_connection import KafkaConnection

API_VERSIONS_V0 = b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02ab"


def _live() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, (ClientConnection, KafkaConnection)))


def test_closed_connections_are_freed_without_a_gc_pass(tmp_path):
    async def main() -> tuple:
        broker = Broker(BrokerConfig.load(None, data_dir=str(tmp_path), port=0, kafka_port=0))
        await broker.start()

        def clients() -> None:
            for _ in range(5):
                with Admin(f"127.0.0.1:{broker.port}") as admin:
                    admin.list_topics()
                with socket.create_connection(("127.0.0.1", broker.kafka.site.port), 5) as s:
                    s.sendall(API_VERSIONS_V0)
                    head = s.makefile("rb").read(8)
                    assert head[4:] == b"\x00\x00\x00\x01", head  # the answer's correlation id

        gc.disable()
        try:
            gc.collect()
            before = _live()
            await asyncio.get_running_loop().run_in_executor(None, clients)
            for _ in range(500):  # bounded: until the broker has seen the closes
                if not broker.connections and not broker.kafka.connections:
                    break
                await asyncio.sleep(0.01)
            left = _live() - before
        finally:
            gc.enable()
            await broker.shutdown()
        return left, len(broker.connections)

    left, registered = asyncio.run(main())
    assert registered == 0
    assert left == 0
