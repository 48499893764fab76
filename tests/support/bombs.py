"""Compression bombs for the tests of inflation limits (issue 29): a Kafka
batch whose one record's value is ``inflated`` zero bytes, compressed, and
a loop-stall probe: another client's round trips while a bomb lands."""

from __future__ import annotations

import functools
import os
import struct
import threading
import time
import zlib
from typing import Callable

import crc32c

from bench.common.procfs import status_kib

from logbroker.kafka.primitives import write_varint, write_varlong
from logbroker.kafka.record_batch import CRC_OFFSET, CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD

GZIP, ZSTD = 1, 4
MiB = 1 << 20


def _section(inflated: int) -> tuple:
    """A record's framing around ``inflated`` zero bytes of value: (head, tail)."""
    body = bytearray([0])  # attributes
    write_varlong(0, body)  # timestamp delta
    write_varint(0, body)  # offset delta
    write_varint(-1, body)  # null key
    write_varint(inflated, body)  # value length
    record_len = len(body) + inflated + 1  # + header count 0
    head = bytearray()
    write_varint(record_len, head)
    return bytes(head + body), b"\x00"


@functools.lru_cache(maxsize=8)
def bomb(codec: int, inflated: int, key: bool = False) -> bytes:
    """One Kafka batch v2 (one record, ``inflated`` bytes of zeros as its
    value) compressed with ``codec`` (1 gzip, 4 zstd): a few KB (zstd) or
    ~1/1000 of ``inflated`` (gzip) on the wire."""
    head, tail = _section(inflated)
    if codec == GZIP:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts, zeros = [z.compress(head)], bytes(MiB)
        for _ in range(inflated // MiB):
            parts.append(z.compress(zeros))
        parts += [z.compress(bytes(inflated % MiB) + tail), z.flush()]
        section = b"".join(parts)
    else:
        import cramjam

        section = bytes(cramjam.zstd.compress(head + bytes(inflated) + tail, level=3))
    header = HEADER.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(section), -1, 2, 0, codec, 0,
                         1_000, 1_000, -1, -1, -1, 1)
    batch = bytearray(header) + section
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


class Pinger:
    """Round trips of ``ping()`` (a small request on a connection of its
    own) in a thread, every ``every`` s, until ``stop()``: ``rtts`` in s."""

    def __init__(self, ping, every: float = 0.005) -> None:
        self.ping, self.every, self.rtts = ping, every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            self.ping()
            self.rtts.append(time.perf_counter() - t)
            self._stop.wait(self.every)

    def __enter__(self) -> "Pinger":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def p99(self) -> float:
        s = sorted(self.rtts)
        return s[min(len(s) - 1, int(len(s) * 0.99))]

    def check(self, at_least: int = 10, p99: float = 0.1, most: float = 0.5) -> None:
        """At least ``at_least`` round trips, p99 under ``p99`` s and none
        over ``most`` s (robust on a busy 2-core machine; a stalled loop
        fails all three: a few round trips, each as long as the stall)."""
        rtts = sorted(self.rtts)
        assert len(rtts) >= at_least and self.p99() < p99 and rtts[-1] < most, \
            (len(rtts), self.p99(), rtts[-1])


def api_versions(raw) -> Callable[[], None]:
    """One ApiVersions round trip on the Kafka connection ``raw``
    (tests/support/kafka_raw.Raw), as a callable for ``Pinger``; called once."""
    def round_trip() -> None:
        raw.sock.sendall(raw.send(18, 2, 7, {}))
        raw.recv(18, 2)
    round_trip()
    return round_trip


def rss_peak(pid: int) -> int:
    """The most resident memory process ``pid`` ever had (VmHWM), in bytes."""
    return status_kib(pid, "VmHWM") << 10


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
