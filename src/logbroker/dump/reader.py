"""Chunked, read-only batch reading for ``logbroker inspect``.

Unlike ``Segment.scan`` (which stops at the first invalid batch, as recovery
needs), this reader reports a bad CRC and goes on, and CRC-checks a batch too
large to hold in memory piecewise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Union

import crc32c

from ..errors import CorruptRecordError
from ..records import format as fmt

CHUNK = 4 << 20
MAX_DECODE = 64 << 20


@dataclass(frozen=True)
class Raw:
    position: int
    header: fmt.BatchHeader
    data: "memoryview | None"  # the whole batch, None when larger than MAX_DECODE
    crc: int  # computed


@dataclass(frozen=True)
class Stop:
    position: int
    reason: str


class Reader:
    """Chunked ``pread`` access to the first ``size`` bytes of an open file."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.buf, self.start = b"", 0

    def view(self, pos: int, n: int) -> memoryview:
        """``n`` bytes at ``pos``; shorter only if the file shrank meanwhile."""
        if not (self.start <= pos and pos + n <= self.start + len(self.buf)):
            self.buf, self.start = os.pread(self.fd, min(max(n, CHUNK), self.size - pos), pos), pos
        off = pos - self.start
        return memoryview(self.buf)[off:off + n]

    def crc(self, pos: int, size: int) -> int:
        """CRC32C of the CRC-covered bytes of the batch at ``pos``, read piecewise."""
        crc, end = 0, pos + size
        for p in range(pos + fmt.CRC_START, end, CHUNK):
            crc = crc32c.crc32c(os.pread(self.fd, min(CHUNK, end - p), p), crc)
        return crc


def read_batches(r: Reader) -> Iterator[Union[Raw, Stop]]:
    """Every batch from byte 0; a final ``Stop`` where the data cannot be parsed."""
    pos = 0
    while pos < r.size:
        left = r.size - pos
        if left < fmt.HEADER_SIZE:
            yield Stop(pos, f"incomplete batch at the end: {left} bytes, a header needs "
                             f"{fmt.HEADER_SIZE}")
            return
        try:
            header = fmt.read_header(r.view(pos, fmt.HEADER_SIZE))
        except CorruptRecordError as exc:
            yield Stop(pos, f"invalid batch header: {exc.message.removesuffix(' at position 0')}")
            return
        if header.size > left:
            yield Stop(pos, f"incomplete batch at the end: {left} of {header.size} bytes")
            return
        if header.size <= MAX_DECODE:
            data = r.view(pos, header.size)
            if len(data) < header.size:
                yield Stop(pos, "file shrank while being read")
                return
            yield Raw(pos, header, data, fmt.compute_crc(data, 0, header.size))
        else:
            yield Raw(pos, header, None, r.crc(pos, header.size))
        pos += header.size
