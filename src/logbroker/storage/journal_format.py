"""The broker journal's entries (storage/journal.py), sans-I/O.

An entry is ``u32 length | u32 crc32c | body | payload``: ``length`` counts
the body and the payload, the CRC covers both. The body names a log
incarnation and what the entry says of it:

- ``DATA``: the payload is the batches a log appended at offsets
  ``[base, end)``, byte for byte as its segment holds them;
- ``CUT``: the log was cut (truncated or restarted); every entry of it
  with a lower ``generation`` is void.

A log is named by its partition id in the data dir's LMDB (a new one for
every partition created, never reused) and a CRC of its name, so an entry
never lands on another log, nor on a topic deleted and made again under
the same name. Decoding stops at the first entry that is not whole or
whose CRC fails (the tail a crash tore): what follows it was never
acknowledged.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import crc32c

HEAD = struct.Struct(">II")  # length of body + payload, crc32c of body + payload
BODY = struct.Struct(">BxxxQIIqq")  # kind, partition id, name CRC, generation, base, end
ENTRY = struct.Struct(">IIBxxxQIIqq")  # HEAD then BODY, packed at once
DATA, CUT = 1, 2
MAX_ENTRY = 1 << 31  # an entry's length field is a u32; a length past this is damage


@dataclass(frozen=True, slots=True)
class Entry:
    kind: int
    pid: int
    name_crc: int
    generation: int
    base: int  # DATA: the first offset of the payload's batches (CUT: 0)
    end: int  # DATA: the offset after them (CUT: 0)
    payload: memoryview  # DATA: the batches; CUT: empty


def name_crc(name: str) -> int:
    """The CRC an entry carries of its log's name (``topic-partition``)."""
    return crc32c.crc32c(name.encode())


def data_head(pid: int, ncrc: int, generation: int, base: int, end: int,
              buffers: Sequence, nbytes: int) -> bytes:
    """The header of a DATA entry whose payload is ``buffers`` (``nbytes``);
    the caller writes it, then the buffers unchanged (no copy of them)."""
    crc = crc32c.crc32c(BODY.pack(DATA, pid, ncrc, generation, base, end))
    for buf in buffers:
        crc = crc32c.crc32c(buf, crc)
    return ENTRY.pack(BODY.size + nbytes, crc, DATA, pid, ncrc, generation, base, end)


def cut_entry(pid: int, ncrc: int, generation: int) -> bytes:
    """A whole CUT entry: ``pid``'s entries below ``generation`` are void."""
    crc = crc32c.crc32c(BODY.pack(CUT, pid, ncrc, generation, 0, 0))
    return ENTRY.pack(BODY.size, crc, CUT, pid, ncrc, generation, 0, 0)


def decode(buf) -> tuple[list[Entry], int]:
    """The whole, intact entries at the start of ``buf`` and the byte where
    they end (``len(buf)`` when nothing was torn)."""
    view, pos, out = memoryview(buf).cast("B"), 0, []
    total = len(view)
    while pos + HEAD.size + BODY.size <= total:
        length, crc = HEAD.unpack_from(view, pos)
        start, stop = pos + HEAD.size, pos + HEAD.size + length
        if length < BODY.size or length > MAX_ENTRY or stop > total:
            break
        if crc32c.crc32c(view[start:stop]) != crc:
            break
        kind, pid, ncrc, gen, base, end = BODY.unpack_from(view, start)
        if kind not in (DATA, CUT):
            break
        out.append(Entry(kind, pid, ncrc, gen, base, end, view[start + BODY.size:stop]))
        pos = stop
    return out, pos
