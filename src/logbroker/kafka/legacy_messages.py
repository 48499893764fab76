"""Kafka's legacy message sets (magic 0 and 1), up-converted on produce to
one RecordBatch v2 (pure bytes; docs/kafka.md §4.8, decision 81).

Produce v0-2 carry a partition's records as a message set, the format of
Kafka before 0.11 (clients that old, or ones told to speak it, e.g.
kafka-python's ``api_version=(0, 10)``). We store Kafka batches v2 only,
so a message set becomes one v2 batch here, at the listener's edge, as a
Kafka 0.11+ broker up-converts one on append (its LogValidator); a v2
batch sent in Produce v0-2 (Kafka accepts that too) is left to
``is_legacy`` callers to pass through unchanged. Layout, big-endian::

    MessageSet => [offset int64, message_size int32, Message]...
    Message v0 => crc uint32, magic int8 (0), attributes int8, key bytes, value bytes
    Message v1 => crc uint32, magic int8 (1), attributes int8, timestamp int64,
                  key bytes, value bytes

``bytes`` is an int32 length (-1 null) then the bytes; ``crc`` is CRC-32
(zlib's, not CRC32C) of magic .. end. Attributes bits 0-2 are the codec
(0 none, 1 gzip, 2 snappy, 3 lz4; zstd never existed here; lz4 in magic 0
is refused: Kafka 0.8/0.9 wrote its frame header checksum wrong), bit 3 (v1)
log-append time. A compressed message (a wrapper) holds, as its value,
the compressed message set of its inner messages, which are not
compressed themselves and have the wrapper's magic.

The v2 batch keeps every message's key and value in order (offset deltas
0..n-1: the producer's offsets are ignored, as Kafka does), no headers,
producer id -1 (legacy producers are not idempotent), and the codec of
the first compressed wrapper (Kafka keeps the producer's codec). Its
timestamps: each message's create time when every message is magic 1
with a create time >= 0; otherwise the whole batch is log-append time,
``now_ms`` (magic 0 has no timestamp; the broker's receive time is
what a reader by time can go by).

What a peer can make us spend is bounded: every length is checked against
the bytes left before slicing, decompression stops at ``limit`` bytes per
message set and at ``Budget.inflated`` (16 MiB) per request
(``RecordTooLargeError``), and ``Budget`` caps the messages converted per
request (each costs a CRC and a few Python steps). The conversion runs in
the broker's inflation thread (a ``storage.incoming.Convert`` part,
api/inflation.py); 16 MiB keeps each of its copies, which hold the GIL,
to a few ms of the loop's time. Malformed input raises ``CorruptRecordError``; nothing else
escapes but ``RecordTooLargeError`` and ``UnsupportedCompressionTypeError``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ..errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError
from ..records.compression import LZ4, NAMES, decompress
from ..records.format import LOG_APPEND_TIME, LOG_OVERHEAD
from ..records.encoder import I32_MAX
from .errors import KafkaEncodeError
from .record_batch import TIMESTAMP_TYPE, KafkaRecord, build_batch

MAGIC_AT = 16  # the magic byte of the first entry: legacy (0, 1) and v2 alike
_ENTRY = struct.Struct(">qi")
_HEAD = struct.Struct(">IbB")  # crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MIN_SIZE = (14, 22)  # a message's smallest size by magic: null key and value
LOG_APPEND = LOG_APPEND_TIME  # bit 3, as in our and Kafka's v2 attributes
MAX_MESSAGES = 100_000  # legacy messages converted per request (see Budget)
MAX_INFLATED = 16 << 20  # bytes legacy wrappers may decompress to per request


class Budget:
    """What one request may still convert, shared by its partitions:
    ``messages`` and decompressed ``inflated`` bytes left."""

    __slots__ = ("messages", "inflated")

    def __init__(self, messages: int = MAX_MESSAGES, inflated: int = MAX_INFLATED) -> None:
        self.messages, self.inflated = messages, inflated

    def take(self, n: int = 1) -> None:
        self.messages -= n
        if self.messages < 0:
            raise RecordTooLargeError(f"a produce request may carry at most {MAX_MESSAGES} "
                                      f"legacy (magic 0/1) messages; use Produce v3+ batches")


@dataclass(frozen=True, slots=True)
class Converted:
    """One up-converted message set: the v2 ``batch``, its ``count`` of
    records and whether it is log-append time (``log_append_ms``, else -1)."""

    batch: bytes
    count: int
    log_append_ms: int


def is_legacy(data) -> bool:
    """Whether a Produce partition's ``data`` starts with a magic 0/1
    message (else it is read as RecordBatch v2, as for Produce v3+)."""
    return len(data) > MAGIC_AT and data[MAGIC_AT] in (0, 1)


def up_convert(data, *, now_ms: int, limit: int, budget: "Budget | None" = None) -> Converted:
    """The legacy message set ``data`` as one Kafka RecordBatch v2 (rules
    in the module docstring); decompressed bytes in all at most ``limit``."""
    budget = budget if budget is not None else Budget()
    state = _State(limit, budget)
    messages = _read_set(memoryview(data).toreadonly(), state, wrapper=None)
    if not messages:
        raise CorruptRecordError("an empty message set")
    create_time = all(m[0] == 1 and not m[1] & LOG_APPEND and m[2] >= 0 for m in messages)
    if create_time:
        stamps = [m[2] for m in messages]
        base, top = stamps[0], max(stamps)
        if top - min(stamps) > I32_MAX:
            raise CorruptRecordError(f"message timestamps {min(stamps)}..{top} span more than "
                                     f"2^31-1 ms")
        attributes, append_ms = 0, -1
    else:
        stamps, base, top = None, now_ms, now_ms
        attributes, append_ms = TIMESTAMP_TYPE, now_ms
    records = [KafkaRecord(i, stamps[i] - base if stamps else 0, m[3], m[4])
               for i, m in enumerate(messages)]
    try:
        batch = build_batch(records, base_timestamp=base, max_timestamp=top,
                            attributes=attributes, compression=state.codec)
    except KafkaEncodeError as exc:
        raise CorruptRecordError(f"message set: {exc}") from None
    return Converted(batch, len(records), append_ms)


class _State:
    __slots__ = ("limit", "budget", "codec")

    def __init__(self, limit: int, budget: Budget) -> None:
        self.limit, self.budget, self.codec = limit, budget, 0


def _read_set(data: memoryview, state: _State, wrapper) -> list:
    """Every message of the set ``data`` as ``(magic, attributes, timestamp,
    key, value)`` (inner messages of a wrapper in its place); ``wrapper``
    is the ``(magic, attributes, timestamp)`` of the wrapper being read."""
    out, pos, end = [], 0, len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"message set cut short at byte {pos}: {end - pos} bytes "
                                     f"left, an entry needs {LOG_OVERHEAD}")
        _offset, size = _ENTRY.unpack_from(data, pos)
        pos += LOG_OVERHEAD
        if size < _MIN_SIZE[0] or size > end - pos:
            raise CorruptRecordError(f"message at byte {pos - LOG_OVERHEAD} has size {size}, "
                                     f"{end - pos} bytes left")
        state.budget.take()
        out.extend(_read_message(data[pos:pos + size], state, wrapper))
        pos += size
    return out


def _read_message(msg: memoryview, state: _State, wrapper) -> list:
    crc, magic, attributes = _HEAD.unpack_from(msg, 0)
    if magic not in (0, 1):
        raise CorruptRecordError(f"message magic {magic} in a message set (0 or 1 expected)")
    if wrapper is not None and magic != wrapper[0]:
        raise CorruptRecordError(f"a magic {magic} message inside a magic {wrapper[0]} wrapper")
    if len(msg) < _MIN_SIZE[magic]:
        raise CorruptRecordError(f"magic {magic} message of {len(msg)} bytes: too short")
    if zlib.crc32(msg[4:]) != crc:
        raise CorruptRecordError(f"message CRC mismatch (stored {crc:#010x})")
    pos = 6
    timestamp = -1
    if magic == 1:
        (timestamp,) = _I64.unpack_from(msg, pos)
        pos += 8
    key, pos = _blob(msg, pos)
    value, pos = _blob(msg, pos)
    if pos != len(msg):
        raise CorruptRecordError(f"message of {len(msg)} bytes ends at byte {pos}")
    codec = attributes & 0x07
    if not codec:
        if wrapper is not None:  # an inner message: the wrapper's time type rules
            attributes = (attributes & ~LOG_APPEND) | (wrapper[1] & LOG_APPEND)
        return [(magic, attributes, timestamp, key, value)]
    if wrapper is not None:
        raise CorruptRecordError("a compressed message inside a compressed message")
    if codec > LZ4:
        raise CorruptRecordError(f"compression code {codec} in a magic {magic} message "
                                 f"(0-3 expected)")
    if value is None:
        raise CorruptRecordError(f"a {NAMES[codec]} message without a value")
    if codec == LZ4 and magic == 0:  # Kafka 0.8/0.9's lz4 frames carry a wrong header checksum
        raise UnsupportedCompressionTypeError("lz4 in magic 0 messages (Kafka 0.8/0.9 framing) is "
                                              "not supported: use magic 1 (Produce v2) or later")
    inner = decompress(codec, value, min(state.limit, state.budget.inflated))
    state.limit -= len(inner)
    state.budget.inflated -= len(inner)
    state.codec = state.codec or codec
    return _read_set(memoryview(inner).toreadonly(), state, (magic, attributes, timestamp))


def _blob(msg: memoryview, pos: int) -> tuple:
    if len(msg) - pos < 4:
        raise CorruptRecordError(f"message cut short at byte {pos}")
    (n,) = _I32.unpack_from(msg, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > len(msg) - pos:
        raise CorruptRecordError(f"message field of length {n} at byte {pos - 4}, "
                                 f"{len(msg) - pos} bytes left")
    return bytes(msg[pos:pos + n]), pos + n
