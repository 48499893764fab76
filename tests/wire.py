"""A raw protocol connection for tests that speak frames directly."""

from __future__ import annotations

import socket
import time

from logbroker.protocol.codec import FrameReader, decode, encode_bytes


OPEN: list["RawConn"] = []  # closed by the close_raw_conns fixture in conftest.py


class RawConn:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        OPEN.append(self)
        self.reader = FrameReader()
        self.cid = 0

    def send(self, msg, cid: "int | None" = None) -> int:
        if cid is None:
            self.cid += 1
            cid = self.cid
        self.sock.sendall(encode_bytes(msg, cid))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 10.0):
        """The next response Envelope, or None when the broker closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                return decode(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no response in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.reader.receive_data(data)

    def call(self, msg, timeout: float = 10.0):
        cid = self.send(msg)
        env = self.recv(timeout)
        assert env is not None and env.cid == cid, env
        return env.message

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closes the connection (bounded wait)."""
        try:
            return self.recv(timeout) is None
        except (TimeoutError, OSError):
            return False

    def close(self) -> None:
        self.sock.close()
