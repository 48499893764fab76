"""Decompressing the records section of a Kafka (magic 2) batch, bounded.

Codes are Kafka's (attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd. Formats are the ones Kafka clients write:

- gzip: a gzip stream (RFC 1952);
- snappy: Kafka's Java client writes xerial's framing (``\\x82SNAPPY\\x00``,
  two int32 versions, then blocks of int32 BE length + raw snappy block);
  librdkafka and others may send one raw snappy block: both are read;
- lz4: the LZ4 frame format (KIP-57);
- zstd: a zstd frame.

``decompress(codec, data, limit)`` never holds more than ``limit + 1``
bytes of output (plus the input): gzip through zlib's ``max_length``, raw
snappy after its announced length is checked, lz4 and zstd into a bounded
buffer that grows by doubling up to that, so a zip bomb costs at most that
(``RecordTooLargeError``). Malformed input raises ``CorruptRecordError``; a
codec whose library (``cramjam``; gzip is the stdlib's zlib) cannot be
imported raises ``UnsupportedCompressionTypeError``. Nothing else escapes.
"""

from __future__ import annotations

import struct
import zlib

from ..errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
READ_LIMIT = 256 << 20  # default bound on a decompressed section when reading
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, version int32, compatible version int32
_U32 = struct.Struct(">I")

cramjam = None  # one maintained wheel for snappy, lz4 and zstd: imported on first use


def _codecs():
    """cramjam, imported the first time a batch needs it (a broker that
    never sees a compressed Kafka batch does not load it: ~3 MiB RSS)."""
    global cramjam
    if cramjam is None:
        try:
            import cramjam as module
        except ImportError:  # pragma: no cover - cramjam is a dependency
            return None
        cramjam = module
    return cramjam


def decompress(codec: int, data, limit: int = READ_LIMIT) -> bytes:
    """The decompressed bytes of ``data`` compressed with Kafka codec
    ``codec`` (1..4), at most ``limit`` bytes (else RecordTooLargeError)."""
    if codec == GZIP:
        return _gzip(data, limit)
    if not 0 < codec < len(NAMES):
        raise CorruptRecordError(f"unknown compression code {codec}")
    if _codecs() is None:
        raise UnsupportedCompressionTypeError(f"{NAMES[codec]} needs the cramjam package")
    if codec == SNAPPY:
        return _snappy(bytes(data), limit)
    return _into(cramjam.lz4 if codec == LZ4 else cramjam.zstd, NAMES[codec], data, limit)


def _too_large(name: str, limit: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"{name} records section decompresses to more than {limit} bytes")


def _gzip(data, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    try:
        out = d.decompress(data, limit + 1)
        if len(out) > limit or d.unconsumed_tail:
            raise _too_large("gzip", limit)
    except zlib.error as exc:
        raise CorruptRecordError(f"gzip records section: {exc}") from None
    _gzip_ended(d)
    return out


def _gzip_ended(d) -> None:
    """CorruptRecordError unless the gzip stream of decompressor ``d`` ended
    exactly where its input did."""
    if not d.eof:
        raise CorruptRecordError("gzip records section is cut short")
    if d.unused_data:
        raise CorruptRecordError(f"{len(d.unused_data)} bytes after the gzip stream")


def _into(module, name: str, data, limit: int) -> bytes:
    """Decompress with a cramjam codec into a buffer that starts at 8x the
    input (64 KiB at least) and doubles while the output does not fit, up
    to ``limit + 1`` bytes: memory never passes that, and the work spent on
    a bomb is at most about twice ``limit``."""
    data, size = bytes(data), min(limit + 1, max(64 << 10, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "failed to write whole buffer" not in str(exc):
                raise CorruptRecordError(f"{name} records section: {exc}") from None
            if size > limit:
                raise _too_large(name, limit) from None
            size = min(limit + 1, 2 * size)
            continue
        except Exception as exc:  # noqa: BLE001 - a codec's own error types vary
            raise CorruptRecordError(f"{name} records section: {exc}") from None
        if n > limit:
            raise _too_large(name, limit)
        del out[n:]
        return bytes(out)


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    if len(data) < _XERIAL_HEADER:
        raise CorruptRecordError("snappy (xerial) header cut short")
    pos, parts, total = _XERIAL_HEADER, [], 0
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptRecordError("snappy (xerial) block length cut short")
        size = _U32.unpack_from(data, pos)[0]
        pos += 4
        if size > len(data) - pos:
            raise CorruptRecordError(f"snappy (xerial) block of {size} bytes runs past the data")
        block = _raw_snappy(data[pos:pos + size], limit - total)
        parts.append(block)
        total += len(block)
        pos += size
    return b"".join(parts)


def _raw_snappy(data: bytes, limit: int) -> bytes:
    """One raw snappy block: its announced length is checked before anything
    is allocated, then it is decompressed into a buffer of that length."""
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except Exception as exc:  # noqa: BLE001
        raise CorruptRecordError(f"snappy records section: {exc}") from None
    if size > limit:
        raise _too_large("snappy", limit)
    out = bytearray(size)
    try:
        n = cramjam.snappy.decompress_raw_into(data, out)
    except Exception as exc:  # noqa: BLE001
        raise CorruptRecordError(f"snappy records section: {exc}") from None
    if n != size:
        raise CorruptRecordError(f"snappy block announced {size} bytes, held {n}")
    return bytes(out)
