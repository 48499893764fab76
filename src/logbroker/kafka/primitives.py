"""The Kafka protocol's primitive types, strictly bounded (pure bytes).

Decoders take ``(view, pos)`` (``view`` a ``memoryview`` of bytes) and return
``(value, next_pos)``; encoders append to a ``bytearray``. A decoder checks
every length against the bytes actually left *before* slicing or allocating
anything, so a peer cannot pin memory by announcing a length; any problem
raises ``KafkaDecodeError`` (its path is filled in by the caller). Integers
are big-endian two's complement; ``varint`` / ``varlong`` (zigzag base-128,
inside Kafka records) are written here and read by ``records/kafka_v2``.
Strings are UTF-8, decoded strictly.

Flexible versions (KIP-482) add an unsigned varint (``uvarint``: base 128,
at most 5 bytes, below 2^32), *compact* lengths (uvarint of length + 1, 0
for null) for strings, bytes and arrays, and a *tagged-field section*
closing every struct and request header v2 (a uvarint count, then per field
a uvarint tag, a uvarint size and that many bytes). ``string_*`` and
``bytes_*`` take ``compact=True`` for their compact forms. We declare no
tagged field: ``skip_tagged_fields`` reads a section and skips every field
within the bytes left, ``EMPTY_TAGGED_FIELDS`` is the one we write.
"""

from __future__ import annotations

import struct

from .errors import KafkaDecodeError, KafkaEncodeError

I8, I16, I32, I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))
U32 = struct.Struct(">I")
MAX_STRING = 0x7FFF  # a string's int16 length (a compact string's limit too)
NULL = -1  # the length of a null string, bytes, records or array
MAX_UVARINT = 0xFFFFFFFF
EMPTY_TAGGED_FIELDS = b"\x00"  # a tagged-field section of no field


def need(view, pos: int, n: int, what: str) -> None:
    """Raise unless ``n`` bytes are left at ``pos``."""
    if n > len(view) - pos:
        raise KafkaDecodeError(f"{what} needs {n} bytes, {len(view) - pos} left")


def _fixed(s: struct.Struct, name: str):
    size, unpack, pack = s.size, s.unpack_from, s.pack

    def dec(view, pos):
        if size > len(view) - pos:
            raise KafkaDecodeError(f"{name} needs {size} bytes, {len(view) - pos} left")
        return unpack(view, pos)[0], pos + size

    def enc(value, out: bytearray) -> None:
        if value.__class__ is not int and (not isinstance(value, int) or isinstance(value, bool)):
            raise KafkaEncodeError(f"{name} expected, got {type(value).__name__}")
        try:
            out += pack(value)
        except struct.error:
            raise KafkaEncodeError(f"{value} out of range for {name}") from None
    return dec, enc


dec_int8, enc_int8 = _fixed(I8, "int8")
dec_int16, enc_int16 = _fixed(I16, "int16")
dec_int32, enc_int32 = _fixed(I32, "int32")
dec_int64, enc_int64 = _fixed(I64, "int64")


UUID_BYTES = 16  # Kafka's uuid: 16 raw bytes (a topic id; all zeros is "none")


def dec_uuid(view, pos):
    need(view, pos, UUID_BYTES, "uuid")
    return bytes(view[pos:pos + UUID_BYTES]), pos + UUID_BYTES


def enc_uuid(value, out: bytearray) -> None:
    if not isinstance(value, (bytes, bytearray)) or len(value) != UUID_BYTES:
        raise KafkaEncodeError(f"uuid of {UUID_BYTES} bytes expected, got {value!r:.40}")
    out += value


def dec_bool(view, pos):
    """Kafka writes 0 or 1; like Kafka, any non-zero byte reads as true."""
    need(view, pos, 1, "boolean")
    return view[pos] != 0, pos + 1


def enc_bool(value, out: bytearray) -> None:
    if value.__class__ is not bool:
        raise KafkaEncodeError(f"boolean expected, got {type(value).__name__}")
    out.append(1 if value else 0)


def read_length(view, pos, nullable: bool, what: str, wide: bool, compact: bool = False) -> tuple:
    """A length prefix (int16 if not ``wide``, else int32; a uvarint of
    length + 1 if ``compact``): ``(n, pos)`` with ``n`` = -1 for null (only
    if ``nullable``) and ``n`` bytes present."""
    if compact:
        n, pos = read_uvarint(view, pos, f"{what} length")
        n -= 1
    else:
        n, pos = (dec_int32 if wide else dec_int16)(view, pos)
    if n < 0:
        if n == NULL and nullable:
            return n, pos
        raise KafkaDecodeError(f"{what} length {n} is negative" + ("" if nullable else " (not nullable)"))
    if n > len(view) - pos:
        raise KafkaDecodeError(f"{what} length {n} exceeds the {len(view) - pos} bytes left")
    return n, pos


def string_decoder(nullable: bool, compact: bool = False):
    def dec(view, pos):
        n, pos = read_length(view, pos, nullable, "string", False, compact)
        if n < 0:
            return None, pos
        if n > MAX_STRING:  # only a compact length can say more
            raise KafkaDecodeError(f"string length {n} above the limit {MAX_STRING}")
        try:
            return str(view[pos:pos + n], "utf-8"), pos + n
        except UnicodeDecodeError:
            raise KafkaDecodeError("string is not valid UTF-8") from None
    return dec


def string_encoder(nullable: bool, compact: bool = False):
    def enc(value, out: bytearray) -> None:
        if value is None:
            if not nullable:
                raise KafkaEncodeError("null for a non-nullable string")
            out += b"\x00" if compact else b"\xff\xff"
            return
        if value.__class__ is not str:
            raise KafkaEncodeError(f"string expected, got {type(value).__name__}")
        data = value.encode("utf-8")
        if len(data) > MAX_STRING:
            raise KafkaEncodeError(f"string of {len(data)} bytes (limit {MAX_STRING})")
        write_length(len(data), out, I16, compact)
        out += data
    return enc


def bytes_decoder(nullable: bool, view_only: bool = False, compact: bool = False):
    """``bytes`` (a copy: small values such as group metadata), or with
    ``view_only`` a ``memoryview`` slice of the frame (records: no copy)."""
    def dec(view, pos):
        n, pos = read_length(view, pos, nullable, "bytes", True, compact)
        if n < 0:
            return None, pos
        part = view[pos:pos + n]
        return (part if view_only else bytes(part)), pos + n
    return dec


def bytes_length(value, nullable: bool) -> int:
    """The int32 length to write for a bytes-like value (-1 for None), checked."""
    if value is None:
        if not nullable:
            raise KafkaEncodeError("null for non-nullable bytes")
        return NULL
    if isinstance(value, (bytes, bytearray)):
        n = len(value)
    elif isinstance(value, memoryview):
        n = value.nbytes
    else:
        raise KafkaEncodeError(f"bytes expected, got {type(value).__name__}")
    if n > 0x7FFFFFFF:
        raise KafkaEncodeError(f"bytes of {n} bytes cannot be encoded")
    return n


def write_length(n: int, out: bytearray, prefix: struct.Struct = I32, compact: bool = False) -> None:
    """Append a length (-1: null) as ``prefix`` packs it, or compact (n + 1)."""
    if compact:
        write_uvarint(n + 1, out)
    else:
        out += prefix.pack(n)


def bytes_encoder(nullable: bool, compact: bool = False):
    def enc(value, out: bytearray) -> None:
        n = bytes_length(value, nullable)
        write_length(n, out, I32, compact)
        if n > 0:
            out += value
    return enc


# -- base 128: uvarint (flexible versions); varint / varlong writers (zigzag, records) -------
def _read_base128(view, pos: int, max_bytes: int, what: str) -> tuple:
    """``(raw unsigned value, next_pos)`` of at most ``max_bytes`` bytes."""
    raw, shift, start = 0, 0, pos
    end = min(len(view), pos + max_bytes)
    while pos < end:
        b = view[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return raw, pos
        shift += 7
    if pos - start < max_bytes:
        raise KafkaDecodeError(f"{what} runs past the end of the data")
    raise KafkaDecodeError(f"{what} longer than {max_bytes} bytes")


def read_uvarint(view, pos: int, what: str = "unsigned varint") -> tuple:
    """An unsigned varint (at most 5 bytes, below 2^32): ``(value, next_pos)``."""
    value, pos = _read_base128(view, pos, 5, what)
    if value > MAX_UVARINT:
        raise KafkaDecodeError(f"{what} {value} out of range")
    return value, pos


def write_uvarint(value: int, out: bytearray) -> None:
    if not 0 <= value <= MAX_UVARINT:
        raise KafkaEncodeError(f"{value} out of range for an unsigned varint")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def skip_tagged_fields(view, pos: int) -> int:
    """Read a tagged-field section at ``pos`` and skip its fields (none is
    declared by our schemas, so every tag is unknown, as Kafka skips unknown
    ones); returns the position after it. Each field's size is checked
    against the bytes left; nothing is allocated."""
    n, pos = read_uvarint(view, pos, "tagged field count")
    if 2 * n > len(view) - pos:  # a tag and a size of one byte each at least
        raise KafkaDecodeError(f"{n} tagged fields need at least {2 * n} bytes, "
                               f"{len(view) - pos} left")
    for _ in range(n):
        tag, pos = read_uvarint(view, pos, "tag")
        size, pos = read_uvarint(view, pos, f"tagged field {tag} size")
        if size > len(view) - pos:
            raise KafkaDecodeError(f"tagged field {tag} of {size} bytes exceeds the "
                                   f"{len(view) - pos} bytes left")
        pos += size
    return pos


def write_varint(value: int, out: bytearray, bits: int = 32) -> None:
    """Append ``value`` zigzag-encoded (``bits`` 32: varint, 64: varlong)."""
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise KafkaEncodeError(f"{value} out of range for a {bits}-bit varint")
    raw = (value << 1) ^ (value >> (bits - 1))
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def write_varlong(value: int, out: bytearray) -> None:
    write_varint(value, out, 64)
