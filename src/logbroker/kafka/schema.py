"""Kafka messages described as data, and their compilation into codecs.

A message is a ``Struct`` of ``Field``s; each field has a name (snake_case of
Kafka's), a type, the versions it exists in (``"0+"``, ``"3+"``, ``"1-3"``,
``"0"``, as in Kafka's message specs), the versions in which it may be null,
and a default. Types are the names ``int8 int16 int32 int64 bool string bytes
records uuid``, ``Array(type)`` or a nested ``Struct``.

Flexible versions (KIP-482) are a property of the message, as in Kafka's
specs (``Api(..., flexible="3+")``), not of its fields: compiled with
``flexible=True``, the same schema reads and writes strings, bytes, records
and arrays in their compact forms (a uvarint of length + 1) and closes every
struct with a tagged-field section (primitives.py). No field is declared
tagged: a section's fields are read within bounds and skipped (Kafka skips
unknown tags too), and an empty section is written.

``decoder(struct, version, flexible)`` and ``encoder(struct, version,
flexible)`` compile a struct once per version into closures (cached). A
decoded struct is a frozen namedtuple holding *every* field of every
version, fields absent from the version at their defaults (Kafka's generated
classes behave the same), arrays as tuples, ``bytes`` as bytes, ``records``
as a memoryview of the frame (no copy). The encoder takes such a namedtuple
or a dict (missing keys take the defaults, unknown keys are refused); fields
absent from the version are not written. Records are not copied by the
encoder: their positions are noted in ``Out.attached`` and the caller writes
them as separate buffers.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field as dc_field
from typing import Any

from . import primitives as p
from .errors import KafkaDecodeError, KafkaEncodeError

_MISSING = object()


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; ``hi`` None means open-ended."""

    lo: int
    hi: "int | None"

    @classmethod
    def parse(cls, text: "str | None") -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)  # empty
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)


@dataclass(frozen=True)
class Array:
    element: Any  # a type name or a Struct


@dataclass(frozen=True)
class Field:
    name: str
    type: Any
    versions: Versions
    nullable: Versions
    default: Any


@dataclass(frozen=True, eq=False)
class Struct:
    """A named list of fields; compared by identity (each is declared once)."""

    name: str
    fields: tuple
    _cls: list = dc_field(default_factory=list, repr=False)

    def value_class(self):
        """The frozen namedtuple of this struct (every field, with defaults)."""
        if not self._cls:
            self._cls.append(namedtuple(self.name, [f.name for f in self.fields],
                                        defaults=[f.default for f in self.fields]))
        return self._cls[0]


def F(name: str, type_: Any, versions: str = "0+", nullable: "str | None" = None,
      default: Any = _MISSING) -> Field:
    """Declare a field (see the module docstring). The default default is the
    type's zero: 0, False, "", b"", an empty tuple; None for records."""
    if default is _MISSING:
        default = _ZERO.get(type_, ()) if isinstance(type_, str) else ()
    return Field(name, type_, Versions.parse(versions), Versions.parse(nullable), default)


def S(name: str, *fields: Field) -> Struct:
    return Struct(name, tuple(fields))


_ZERO = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "string": "",
         "bytes": b"", "records": None, "uuid": bytes(p.UUID_BYTES)}
_FIXED = {"int8": (p.dec_int8, p.enc_int8, 1), "int16": (p.dec_int16, p.enc_int16, 2),
          "int32": (p.dec_int32, p.enc_int32, 4), "int64": (p.dec_int64, p.enc_int64, 8),
          "bool": (p.dec_bool, p.enc_bool, 1),
          "uuid": (p.dec_uuid, p.enc_uuid, p.UUID_BYTES)}
_MIN_SIZE = {"string": 2, "bytes": 4, "records": 4}


def min_size(type_: Any, version: int, flexible: bool = False) -> int:
    """The fewest bytes a value of ``type_`` takes at ``version`` (a null
    array or string takes its length field; a compact length takes one
    byte at least, and so does a struct's tagged-field section)."""
    if isinstance(type_, Struct):
        return sum(min_size(f.type, version, flexible) for f in type_.fields
                   if version in f.versions) + flexible
    if isinstance(type_, Array):
        return 1 if flexible else 4
    if type_ in _FIXED:
        return _FIXED[type_][2]
    return 1 if flexible else _MIN_SIZE[type_]


# -- decoding ------------------------------------------------------------------------------
_DECODERS: dict = {}


def decoder(struct: Struct, version: int, flexible: bool = False):
    """``dec(view, pos) -> (value, next_pos)`` for ``struct`` at ``version``
    (``flexible``: the version is one of its message's flexible versions)."""
    key = (id(struct), version, flexible)
    fn = _DECODERS.get(key)
    if fn is None:
        fn = _DECODERS[key] = _struct_decoder(struct, version, flexible)
    return fn


def _type_decoder(type_: Any, nullable: bool, version: int, flexible: bool):
    if isinstance(type_, Struct):
        return _nullable_struct_decoder(decoder(type_, version, flexible)) if nullable \
            else decoder(type_, version, flexible)
    if isinstance(type_, Array):
        return _array_decoder(type_.element, nullable, version, flexible)
    if type_ in _FIXED:
        return _FIXED[type_][0]
    if type_ == "string":
        return p.string_decoder(nullable, flexible)
    if type_ == "bytes":
        return p.bytes_decoder(nullable, compact=flexible)
    if type_ == "records":
        return p.bytes_decoder(True, view_only=True, compact=flexible)
    raise ValueError(f"unknown type {type_!r}")


def _nullable_struct_decoder(dec):
    """A nullable struct, as Kafka writes one: an int8 marker (-1 null, 1
    present) before the struct's fields."""
    def dec_nullable(view, pos):
        marker, pos = p.dec_int8(view, pos)
        return (None, pos) if marker < 0 else dec(view, pos)
    return dec_nullable


def _struct_decoder(struct: Struct, version: int, flexible: bool):
    cls = struct.value_class()
    fields = [(f.name, _type_decoder(f.type, version in f.nullable, version, flexible))
              for f in struct.fields if version in f.versions]

    def dec(view, pos):
        values = {}
        for name, fn in fields:
            try:
                values[name], pos = fn(view, pos)
            except KafkaDecodeError as exc:
                raise exc.within(name) from None
        if flexible:  # the struct's tagged-field section, after its fields
            try:
                pos = p.skip_tagged_fields(view, pos)
            except KafkaDecodeError as exc:
                raise exc.within("tagged_fields") from None
        return cls(**values), pos
    return dec


def _array_decoder(element: Any, nullable: bool, version: int, flexible: bool):
    elem = _type_decoder(element, False, version, flexible)
    size = max(1, min_size(element, version, flexible))

    def dec(view, pos):
        if flexible:
            n, pos = p.read_uvarint(view, pos, "array length")
            n -= 1
        else:
            n, pos = p.dec_int32(view, pos)
        if n < 0:
            if n == p.NULL and nullable:
                return None, pos
            raise KafkaDecodeError(f"array length {n} is negative" + ("" if nullable else " (not nullable)"))
        if n * size > len(view) - pos:  # before allocating anything for n entries
            raise KafkaDecodeError(f"array of {n} entries needs at least {n * size} bytes, "
                                   f"{len(view) - pos} left")
        out = []
        for i in range(n):
            try:
                value, pos = elem(view, pos)
            except KafkaDecodeError as exc:
                raise exc.within(f"[{i}]") from None
            out.append(value)
        return tuple(out), pos
    return dec


# -- encoding ------------------------------------------------------------------------------
class Out(bytearray):
    """An encoder's output: the bytes, and ``attached``: ``(position, obj)`` of
    every records value, to be written after ``self[:position]``."""

    def __init__(self) -> None:
        super().__init__()
        self.attached: list = []


_ENCODERS: dict = {}


def encoder(struct: Struct, version: int, flexible: bool = False):
    """``enc(value, out: Out)`` for ``struct`` at ``version`` (``flexible`` as
    for ``decoder``)."""
    key = (id(struct), version, flexible)
    fn = _ENCODERS.get(key)
    if fn is None:
        fn = _ENCODERS[key] = _struct_encoder(struct, version, flexible)
    return fn


def _type_encoder(type_: Any, nullable: bool, version: int, flexible: bool):
    if isinstance(type_, Struct):
        return _nullable_struct_encoder(encoder(type_, version, flexible)) if nullable \
            else encoder(type_, version, flexible)
    if isinstance(type_, Array):
        return _array_encoder(type_.element, nullable, version, flexible)
    if type_ in _FIXED:
        return _FIXED[type_][1]
    if type_ == "string":
        return p.string_encoder(nullable, flexible)
    if type_ == "bytes":
        return p.bytes_encoder(nullable, flexible)
    if type_ == "records":
        return _compact_records_encoder if flexible else _records_encoder
    raise ValueError(f"unknown type {type_!r}")


def _nullable_struct_encoder(enc):
    def enc_nullable(value, out) -> None:
        if value is None:
            out.append(0xFF)  # int8 -1: null
            return
        out.append(1)
        enc(value, out)
    return enc_nullable


def _records_encoder(value, out: Out, compact: bool = False) -> None:
    """Length, then the records themselves as an attached buffer: bytes-like,
    or any object with ``len()`` its writer knows (a segment file slice)."""
    if value is None or isinstance(value, (bytes, bytearray, memoryview)):
        n = p.bytes_length(value, True)
    elif hasattr(value, "__len__"):
        n = len(value)
    else:
        raise KafkaEncodeError(f"records expected, got {type(value).__name__}")
    p.write_length(n, out, p.I32, compact)
    if n > 0:
        out.attached.append((len(out), value))


def _compact_records_encoder(value, out: Out) -> None:
    _records_encoder(value, out, True)


def _struct_encoder(struct: Struct, version: int, flexible: bool):
    names = frozenset(f.name for f in struct.fields)
    fields = [(f.name, _type_encoder(f.type, version in f.nullable, version, flexible), f.default)
              for f in struct.fields if version in f.versions]
    tags = p.EMPTY_TAGGED_FIELDS if flexible else b""

    def enc(value, out) -> None:
        if isinstance(value, dict):
            if not names.issuperset(value):
                raise KafkaEncodeError(f"{struct.name} has no field {sorted(set(value) - names)[0]!r}")
            get = value.get
        elif isinstance(value, tuple) and hasattr(value, "_fields"):
            def get(name, default, value=value):
                return getattr(value, name, default)
        else:
            raise KafkaEncodeError(f"{struct.name}: a dict or namedtuple expected, "
                                   f"got {type(value).__name__}")
        for name, fn, default in fields:
            try:
                fn(get(name, default), out)
            except KafkaEncodeError as exc:
                raise exc.within(name) from None
        out += tags
    return enc


def _array_encoder(element: Any, nullable: bool, version: int, flexible: bool):
    elem = _type_encoder(element, False, version, flexible)

    def enc(value, out) -> None:
        if value is None:
            if not nullable:
                raise KafkaEncodeError("null for a non-nullable array")
            p.write_length(p.NULL, out, p.I32, flexible)
            return
        if not isinstance(value, (list, tuple)):
            raise KafkaEncodeError(f"array expected, got {type(value).__name__}")
        p.write_length(len(value), out, p.I32, flexible)
        for i, item in enumerate(value):
            try:
                elem(item, out)
            except KafkaEncodeError as exc:
                raise exc.within(f"[{i}]") from None
    return enc


@dataclass(frozen=True)
class Api:
    """One API of the profile: key, name, supported versions, the request
    and response bodies as structs, its flexible versions (Kafka's
    ``flexibleVersions``: request header v2, compact types, tagged fields)
    and whether its flexible responses carry header v1's tagged fields
    (``response_header_tags``; False for ApiVersions only, whose response
    header stays v0: a client reads it before it knows our versions)."""

    key: int
    name: str
    min_version: int
    max_version: int
    request: Struct
    response: Struct
    flexible: Any = "none"  # a versions string, parsed to Versions
    response_header_tags: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.flexible, str):
            object.__setattr__(self, "flexible", Versions.parse(self.flexible))

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible
