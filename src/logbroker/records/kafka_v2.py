"""Kafka record batches (magic 2) in our log: the produce-time check and the
conversion to columns for every reader (pure bytes).

A magic-2 batch is stored as the Kafka client sent it (docs/format.md §9):
its 61-byte header has our layout (``format.read_fields`` reads both
magics), its records section is Kafka's, possibly compressed
(``compression.py``). Records are varint-framed, in order:

    length varint, attributes int8, timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 null), key,
    value_length varint (-1 null), value, header_count varint,
    per header: key_length varint, key (UTF-8), value_length varint (-1 null), value

``check_batch`` is the broker's check on append: the section's size and
decompression, the records walked only for a compacted topic (decision
78); ``decode_kafka`` is the one reader: it walks the records once and
encodes them with our columnar encoder, so every reader of ``RecordBatch``
(consumer, Arrow/Spark, compaction, inspect, offset-for-timestamp) serves
both magics through ``decoder.decode_batch``; ``kafka_records`` gives the
same walk's Kafka fields per record (for tests of ``build_batch``). Every
malformed input raises a ``LogbrokerError`` subclass (CorruptRecordError
mostly) and nothing else.
"""

from __future__ import annotations

import dataclasses

from ..errors import CorruptRecordError, InvalidRecordError
from . import format as fmt
from .compression import READ_LIMIT, decompress
from .columns import RecordBatch, decode_ours
from .encoder import I32_MAX, I32_MIN, encode_batch

_MIN_RECORD = 7  # bytes of the smallest record: seven one-byte fields


@dataclasses.dataclass(frozen=True, slots=True)
class Walked:
    """What a walk of a records section found. ``timestamps``, ``keys``,
    ``values`` are per record (empty lists when not collected), so is
    ``attributes`` (only for ``kafka_records``); ``headers`` maps a record
    index to its ``(str, bytes | None)`` pairs."""

    timestamps: list
    keys: list
    values: list
    headers: dict
    attributes: list
    max_timestamp: int
    min_timestamp: int
    null_key: bool


def section(batch, header: fmt.BatchHeader, limit: int = READ_LIMIT) -> bytes:
    """The records section of the whole batch ``batch`` (header at 0),
    decompressed (at most ``limit`` bytes) when its attributes say so."""
    raw = memoryview(batch)[fmt.HEADER_SIZE:header.size]
    codec = header.attributes & fmt.COMPRESSION_MASK
    return decompress(codec, raw, limit) if codec else bytes(raw)


def check_batch(batch, header: fmt.BatchHeader, *, limit: int,
                require_keys: bool = False, inflated=None) -> None:
    """Raise unless the whole magic-2 batch ``batch`` (header and CRC
    already checked) can be stored: not transactional nor a control batch
    (InvalidRecordError: not supported yet); a compressed section that
    decompresses, within ``limit`` bytes (RecordTooLargeError,
    CorruptRecordError); a section long enough for ``record_count``
    records and a header max timestamp within 2^31-1 ms of its first (so
    the records convert to columns; CorruptRecordError). Cost: O(1) per
    batch, plus the decompression (C) of a compressed one; nothing per
    record.

    The records themselves are walked only when ``require_keys`` (a
    compacted topic: a key on every record, InvalidRecordError, and every
    rule of ``walk``). ``inflated``: the compressed section already
    inflated (``inflate.inflate``, off the loop), used instead of
    decompressing it here. Elsewhere the section stays opaque, as the issue's
    "stored as sent" asks (decision 78): a CRC-valid batch whose records
    are malformed (a client bug; none of Kafka's clients sends one) is
    stored, and each reader reports it where it decodes it as a
    ``CorruptRecordError`` naming its offsets (the consumer says where to
    seek to skip it) or, on the broker, gets around it (``readable``)."""
    attrs = header.attributes
    if attrs & fmt.TXN_BITS:
        check_transactional(header)
    if not require_keys:
        if header.max_timestamp - header.first_timestamp > I32_MAX:
            raise CorruptRecordError(f"Kafka batch timestamps {header.first_timestamp}.."
                                     f"{header.max_timestamp} span more than 2^31-1 ms")
        size = header.size - fmt.HEADER_SIZE
        if attrs & fmt.COMPRESSION_MASK:
            size = len(section(batch, header, limit) if inflated is None else inflated)
        if header.record_count * _MIN_RECORD > size:
            raise CorruptRecordError(f"{header.record_count} records cannot fit in a {size}-byte "
                                     f"records section")
        return
    data = section(batch, header, limit) if inflated is None else inflated
    w = walk(data, header.record_count, header.first_timestamp, collect=False)
    if not attrs & fmt.LOG_APPEND_TIME and w.max_timestamp > header.max_timestamp:
        raise CorruptRecordError(f"a record's timestamp {w.max_timestamp} is above the batch's "
                                 f"max timestamp {header.max_timestamp}")
    if w.null_key:
        raise InvalidRecordError(f"a compacted topic takes only records with a key: the batch "
                                 f"of {header.record_count} record(s) has one without")


def check_transactional(header: fmt.BatchHeader) -> None:
    """A producer's batch with either magic's transactional or control bit:
    a control batch is the broker's alone, a transactional one needs its
    producer id, epoch and base sequence (all >= 0); InvalidRecordError
    otherwise. Called only when ``attributes & TXN_BITS`` (one test per
    batch on the common path)."""
    transactional, control = fmt.txn_flags(header.magic, header.attributes)
    if control:
        raise InvalidRecordError("a producer cannot write control batches (attributes "
                                 f"0x{header.attributes:04x})")
    if transactional and (header.producer_id < 0 or header.producer_epoch < 0
                          or header.base_sequence < 0):
        raise InvalidRecordError(f"a transactional batch needs a producer id, epoch and sequence "
                                 f"(got {header.producer_id}, {header.producer_epoch}, "
                                 f"{header.base_sequence})")


def decode_kafka(batch, header: fmt.BatchHeader, *, verify: bool = True,
                 limit: int = READ_LIMIT) -> RecordBatch:
    """The whole magic-2 batch ``batch`` (header at 0, ``header`` its
    header) as a columnar ``RecordBatch``: the records re-encoded by our
    encoder, ``header`` kept (magic 2, its offsets, epoch, producer fields
    and attributes) but for ``first_timestamp``, the first record's (the
    base of the column's deltas). CRC checked when ``verify``."""
    if verify:
        fmt.check_crc(batch, 0, header)
    w = walk(section(batch, header, limit), header.record_count, header.first_timestamp)
    raw = encode_batch(w.timestamps, w.keys, w.values, w.headers,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence,
                       log_append_time=bool(header.attributes & fmt.LOG_APPEND_TIME))
    mv = memoryview(raw).cast("B")
    columns = decode_ours(mv, 0, len(mv), fmt.read_header(mv, 0), verify=False)
    return dataclasses.replace(columns, header=header._replace(
        first_timestamp=columns.header.first_timestamp))


def kafka_records(batch, header: fmt.BatchHeader, *, verify: bool = True,
                  limit: int = READ_LIMIT) -> list:
    """Kafka's own fields of each record of the whole magic-2 batch
    ``batch`` (header at 0, ``header`` its header), as ``(offset_delta,
    timestamp_delta, key, value, headers, attributes)`` tuples (the order
    of ``kafka.record_batch.KafkaRecord``): what ``decode_kafka`` reads,
    before it becomes columns. Every rule of ``walk`` but our columns'
    timestamp span (Kafka's deltas are 64-bit); CRC checked when
    ``verify``. For comparing with Kafka's encoding (tests of build_batch)."""
    if verify:
        fmt.check_crc(batch, 0, header)
    w = walk(section(batch, header, limit), header.record_count, 0, fields=True)
    return [(i, w.timestamps[i], w.keys[i], w.values[i], w.headers.get(i, ()), w.attributes[i])
            for i in range(header.record_count)]


def walk(data: bytes, n: int, base_timestamp: int, *, collect: bool = True,
         fields: bool = False) -> Walked:
    """Walk the ``n`` records of the (decompressed) section ``data``; every
    rule of ``check_batch`` on the layout is checked here (CorruptRecordError
    naming the record), and our columns' one: every timestamp within 2^31-1
    ms of the first record's. ``collect=False`` keeps nothing per record;
    ``fields=True`` (``kafka_records``) also keeps each record's attributes
    byte and leaves out the columns' rule."""
    end = len(data)
    if n * _MIN_RECORD > end:
        raise CorruptRecordError(f"{n} records cannot fit in a {end}-byte records section")
    stamps, keys, values, headers, attributes = [], [], [], {}, []
    pos, null_key = 0, False
    first = hi = lo = None  # collect=False: the span tracked as we go, no list per record
    for i in range(n):
        try:
            length, pos = _varint(data, pos, end)
            rend = pos + length
            if length < 0 or rend > end:
                raise CorruptRecordError(f"length {length} runs past the section")
            delta, p = _varint(data, pos + 1, rend)  # after the attributes byte
            offset_delta, p = _varint(data, p, rend)
            if offset_delta != i:
                raise CorruptRecordError(f"offset delta {offset_delta}, expected {i}")
            key, p = _blob(data, p, rend)
            value, p = _blob(data, p, rend)
            count, p = _varint(data, p, rend)
            if count:
                hs, p = _headers(data, p, rend, count)
                if collect:
                    headers[i] = hs
            if p != rend:
                raise CorruptRecordError(f"length {length} disagrees with its fields")
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"Kafka record {i}: {exc.message}") from None
        if collect:
            stamps.append(base_timestamp + delta)
        else:
            t = base_timestamp + delta
            if first is None:
                first = hi = lo = t
            elif t > hi:
                hi = t
            elif t < lo:
                lo = t
        if key is None:
            null_key = True
        if collect:
            keys.append(key)
            values.append(value)
            if fields:
                attributes.append(data[pos])
        pos = rend
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last Kafka record")
    if not n:
        return Walked(stamps, keys, values, headers, attributes, None, None, null_key)
    if collect:
        hi, lo, first = max(stamps), min(stamps), stamps[0]
    if not fields and (hi - first > I32_MAX or lo - first < I32_MIN):
        raise CorruptRecordError(f"Kafka record timestamps {lo}..{hi} are not all within "
                                 f"2^31-1 ms of the first record's, {first}")
    return Walked(stamps if collect else [], keys, values, headers, attributes, hi, lo, null_key)


def _varint(data: bytes, pos: int, end: int) -> tuple:
    """A zigzag varint (up to 64 bits) at ``data[pos:end]``: (value, next position)."""
    if pos >= end:
        raise CorruptRecordError("a varint runs past the record")
    b = data[pos]
    if b < 0x80:  # one byte: most lengths and deltas
        return (b >> 1) ^ -(b & 1), pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        if pos >= end:
            raise CorruptRecordError("a varint runs past the record")
        b = data[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint longer than 10 bytes")


def _blob(data: bytes, pos: int, end: int) -> tuple:
    b = data[pos] if pos < end else 0x80
    if b < 0x80:  # a one-byte length (up to 63 bytes or null) without the call
        n, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        n, pos = _varint(data, pos, end)
    if n < 0:
        if n == -1:
            return None, pos
        raise CorruptRecordError(f"length {n} invalid")
    if n > end - pos:
        raise CorruptRecordError(f"length {n} runs past the record")
    return data[pos:pos + n], pos + n


def _headers(data: bytes, pos: int, end: int, count: int) -> tuple:
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecordError(f"header count {count} invalid")
    out = []
    for _ in range(count):
        hkey, pos = _blob(data, pos, end)
        if hkey is None:
            raise CorruptRecordError("a header key is null")
        try:
            hkey = str(hkey, "utf-8")  # bytes, or a view of an inflated section
        except UnicodeDecodeError:
            raise CorruptRecordError("a header key is not UTF-8") from None
        hvalue, pos = _blob(data, pos, end)
        out.append((hkey, hvalue))
    return tuple(out), pos
