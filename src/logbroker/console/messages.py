"""The message browser: one bounded page of records, rendered for people.

``read_page(lg, q)`` runs in the console's own reader thread (never on the
broker's loop, never on the produce or fetch path: records are decoded only
here). It reads through the Log's fetch API (``slice``: whole batches below
the high watermark, at most ``PAGE_BYTES`` per page) and returns at most
``q.limit`` (<= ``MAX_PAGE_RECORDS``) records:

- from ``q.offset``: an offset before the log start is OFFSET_OUT_OF_RANGE;
  at or past the high watermark the page is empty (``next_offset`` says
  where the next records will be);
- from ``q.time_ms``: the first record with a timestamp at or after it
  (``Log.offset_for_timestamp``); none: an empty page at the high watermark;
- a batch larger than what is left of ``PAGE_BYTES`` is not loaded (its
  header is read alone first): the page ends before it, or, when it is the
  page's first, shows a ``skipped`` row for it and goes on after it;
- a compressed Kafka batch is inflated (``records.inflate``: outside the
  GIL, unmapped after) within what is left of the page's ``INFLATE_BYTES``
  before it is decoded, so a stored compression bomb costs a view at most
  that: past it, the page ends before the batch (or skips it, when first)
  and says so in ``stopped``. A page's CPU is thereby bounded by
  ``PAGE_BYTES`` stored plus ``INFLATE_BYTES`` inflated, walked once each.

``render(data, fmt)`` shows a key, value or header as ``text`` (UTF-8, bad
bytes escaped), ``json`` (pretty; text with ``"note"`` when it is not JSON)
or ``hex`` (16 bytes a line); at most ``VALUE_CAP`` bytes, longer ones end
with a visible truncation marker.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

from ..errors import LogbrokerError, OffsetOutOfRangeError, RecordTooLargeError
from ..records import check_crc, read_header, scan_batches
from ..records.format import COMPRESSION_MASK, HEADER_SIZE, KAFKA_MAGIC
from ..records.decoder import readable
from ..records.inflate import inflate
from .inputs import INFLATE_BYTES, PAGE_BYTES, VALUE_CAP, MessageQuery


def read_page(lg, q: MessageQuery) -> dict:
    hw, start = lg.high_watermark, lg.log_start_offset
    if q.offset is None:
        hit = lg.offset_for_timestamp(q.time_ms)
        begin = hw if hit is None or hit.offset >= hw else hit.offset
    else:
        begin = q.offset
        if begin < start:
            raise OffsetOutOfRangeError(f"offset {begin} is before the log start {start}")
    records, used, nxt, left, stopped = [], 0, begin, INFLATE_BYTES, None
    while stopped is None and len(records) < q.limit and nxt < hw and used < PAGE_BYTES:
        part = lg.slice(nxt, PAGE_BYTES - used, upto=hw)
        if part is None:
            break
        first = _first_header(part)
        if first.size > PAGE_BYTES - used:  # the slice would be that whole batch: not loaded
            if used == 0:
                records.append(_skipped(first))
                nxt = first.next_offset
            break
        data = part.read()
        batches = list(scan_batches(data))
        if not batches:
            break
        for pos, header in batches:
            used += header.size
            raw = data[pos:pos + header.size]
            check_crc(raw, 0, header)
            inflated = _inflated(raw, header, left)
            if inflated is None:  # past what the page may inflate: stop before it
                stopped = (f"the page stopped before batch {header.base_offset}.."
                           f"{header.last_offset}: its records inflate to more than the "
                           f"{left} bytes left of the {INFLATE_BYTES} a page may inflate")
                if not records:
                    records.append({"offset": header.base_offset, "skipped": stopped})
                    nxt = max(nxt, min(header.next_offset, hw))
                break
            left -= inflated
            batch = readable(raw)
            if batch is None and nxt < header.next_offset and len(records) < q.limit:
                records.append(_unreadable(header))
            for rec in batch.records() if batch is not None else ():
                if nxt <= rec.offset < hw and len(records) < q.limit:
                    records.append(_record(rec, q.format))
                    nxt = rec.offset + 1
            if len(records) >= q.limit:
                break
            nxt = max(nxt, min(header.next_offset, hw))
    page = {"topic": q.topic, "partition": q.partition, "from": begin, "log_start": start,
            "hw": hw, "next_offset": nxt, "format": q.format, "records": records,
            "bytes_read": used, "bytes_inflated": INFLATE_BYTES - left}
    if stopped is not None:
        page["stopped"] = stopped
    return page


def _inflated(raw, header, left: int) -> "int | None":
    """The bytes the batch ``raw``'s records inflate to (0 when they are
    not compressed, or do not inflate: ``readable`` reports those), None
    when more than ``left``."""
    codec = header.attributes & COMPRESSION_MASK if header.magic == KAFKA_MAGIC else 0
    if not codec:
        return 0
    try:
        with inflate(codec, raw[HEADER_SIZE:header.size], left) as out:
            return out.size
    except RecordTooLargeError:
        return None
    except LogbrokerError:
        return 0


def _first_header(part):
    """The header of the slice's first batch (one small read)."""
    with part.fd() as fd:
        return read_header(os.pread(fd, HEADER_SIZE, part.position))


def _skipped(header) -> dict:
    """The row standing for a batch larger than a page."""
    return {"offset": header.base_offset, "skipped": f"batch {header.base_offset}.."
            f"{header.last_offset} is {header.size} bytes, more than a page ({PAGE_BYTES})"}


def _unreadable(header) -> dict:
    """The row standing for a Kafka batch whose records do not decode."""
    return {"offset": header.base_offset, "skipped": f"batch {header.base_offset}.."
            f"{header.last_offset}: a Kafka batch whose records do not decode (stored as sent)"}


def _record(rec, fmt: str) -> dict:
    return {"offset": rec.offset, "timestamp": rec.timestamp, "time": iso(rec.timestamp),
            "key": render(rec.key, fmt), "value": render(rec.value, fmt),
            "headers": [[name, render(value, fmt)] for name, value in rec.headers]}


def iso(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return ""


def render(data: "bytes | None", fmt: str) -> dict:
    """{"size", "text", "format", "truncated"[, "note"]}; text None for a null."""
    if data is None:
        return {"size": None, "text": None, "format": fmt, "truncated": False}
    size, shown = len(data), bytes(data[:VALUE_CAP])
    out = {"size": size, "format": fmt, "truncated": size > VALUE_CAP}
    if fmt == "hex":
        out["text"] = hexdump(shown)
    elif fmt == "json":
        out.update(_json(data, shown, size))
    else:
        out["text"] = shown.decode("utf-8", "backslashreplace")
    if out["truncated"]:
        out["text"] += f"\n\u2026 [truncated: {VALUE_CAP} of {size} bytes shown]"
    return out


def _json(data: bytes, shown: bytes, size: int) -> dict:
    if size > VALUE_CAP:
        return {"text": shown.decode("utf-8", "backslashreplace"), "format": "text",
                "note": "too large to parse as JSON"}
    try:
        return {"text": json.dumps(json.loads(bytes(data)), indent=2, ensure_ascii=False)}
    except (ValueError, RecursionError):
        return {"text": shown.decode("utf-8", "backslashreplace"), "format": "text",
                "note": "not JSON"}


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex bytes, printable ASCII."""
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i:i + 16]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:06x}  {chunk.hex(' '):<47}  {ascii_}")
    return "\n".join(lines)
