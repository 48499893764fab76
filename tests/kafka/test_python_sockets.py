"""The suite's guard for kafka-python's dropped sockets
(kafka_python_sockets.py): a client closed while its connect is in flight
leaves one socket open, which the guard holds and closes instead of letting
a later GC pass warn in another test. Fails once kafka-python closes the
socket itself (then the guard can go)."""

from __future__ import annotations

import socket

import pytest

from tests.support import kafka_python_sockets
kafka = pytest.importorskip("kafka")


def test_a_client_closed_mid_connect_leaves_one_socket_the_guard_closes():
    from kafka import KafkaProducer
    listener = socket.socket()
    fillers = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepted: once the queue is full, connects stay in flight
        port = listener.getsockname()[1]
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        before = kafka_python_sockets.still_open()  # other tests' clients: not ours to close
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", api_version=(2, 5),
                                 max_block_ms=500)
        producer.close(1)
        left = [s for s in kafka_python_sockets.still_open() if s not in before]
        fillers += left
        assert len(left) == 1
    finally:
        for s in fillers + [listener]:
            s.close()
