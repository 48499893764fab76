"""Chunked, read-only batch reading for ``logbroker inspect``.

Batches are found by the one walker (``records.walker.scan_file``); unlike
recovery, this reader reports a bad CRC and goes on, CRC-checks a batch too
large to hold in memory piecewise, and says why a file's walk stopped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Union

import crc32c

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.walker import scan_file

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
    """``pread`` access to the first ``size`` bytes of an open file."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size

    def read(self, pos: int, n: int) -> bytes:
        return os.pread(self.fd, n, pos)

    def crc(self, pos: int, size: int) -> int:
        """CRC32C of the CRC-covered bytes of the batch at ``pos``, read piecewise."""
        crc, end = 0, pos + size
        for p in range(pos + fmt.CRC_START, end, CHUNK):
            crc = crc32c.crc32c(os.pread(self.fd, min(CHUNK, end - p), p), crc)
        return crc


def read_batches(r: Reader) -> Iterator[Union[Raw, Stop]]:
    """Every batch from byte 0 (the one walker, in CHUNK windows); a final
    ``Stop`` where the data cannot be parsed."""
    end = 0
    try:
        for pos, header, data in scan_file(r.read, 0, r.size, window=CHUNK, max_batch=MAX_DECODE):
            crc = r.crc(pos, header.size) if data is None else fmt.compute_crc(data, 0, header.size)
            yield Raw(pos, header, data, crc)
            end = pos + header.size
    except CorruptRecordError as exc:
        yield Stop(exc.position, f"invalid batch header: {exc.message}")
        return
    left = r.size - end
    if left >= fmt.HEADER_SIZE:
        header = fmt.read_header(r.read(end, fmt.HEADER_SIZE))
        yield Stop(end, f"incomplete batch at the end: {left} of {header.size} bytes")
    elif left:
        yield Stop(end, f"incomplete batch at the end: {left} bytes, a header needs "
                        f"{fmt.HEADER_SIZE}")
