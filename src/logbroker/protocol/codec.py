"""Sans-I/O framing and message codec (h11 style): bytes in, messages out.

Frame:  u32 frame_length (bytes after this field, big-endian)
        u32 header_length
        header: msgpack map {"api", "cid", "resp", "v", "body"}
        payload: frame_length - 4 - header_length raw bytes (record batches)

``FrameReader`` splits a byte stream into frames. Feed it with
``receive_data(bytes)``, or let a socket write straight into it with
``get_buffer()`` / ``buffer_updated(n)`` (asyncio.BufferedProtocol). Memory
follows the bytes that arrived, never a length a peer announced: nothing is
held between frames, an incomplete frame holds what came of it, and a frame
longer than the scratch buffer gets a buffer of its own only once a quarter
of it arrived; the socket then writes the rest straight into that buffer, so
most of a big produce payload is never copied in Python.
``decode(frame)`` checks the header against the message schema; ``encode``
returns buffers to write (header bytes, then the payload buffers as given).
Every malformed input raises a ``LogbrokerError``; nothing else escapes.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
from collections import deque
from dataclasses import dataclass

import msgpack

from ..errors import (FrameTooLargeError, InvalidRequestError, LogbrokerError,
                      UnsupportedVersionError)
from .messages import PROTOCOL_VERSION, REQUESTS, RESPONSES, Message
from . import gc_pause
from .schema import Mismatch, check, compile_fields

_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")
NEED_DATA = None  # next_frame() result when no whole frame is buffered
MAX_HEADER = 16 << 20
SPARES = 2  # a trusted reader's long-frame buffers kept for reuse ...
SPARE_MAX_BYTES = 16 << 20  # ... each at most this long (a Consumer's fetch_max_bytes raised to 16 MiB)
SCRATCH_BYTES = 256 << 10  # receive buffer; longer frames are mostly received in place
BULK_HEADER = 2 << 10  # a header this long (~120 parts or more) is decoded with the GC paused


class DecodeError(InvalidRequestError):
    """A frame that is not a valid message; ``cid`` is set when it was readable."""

    def __init__(self, message: str, cid: "int | None" = None,
                 cause: "LogbrokerError | None" = None, api: "int | None" = None):
        super().__init__(message)
        self.cid, self.cause, self.api = cid, cause, api


class FrameReader:
    """Splits a byte stream into frames (``bytes`` or ``bytearray``).

    ``scratch`` is the receive buffer ``get_buffer()`` hands out between
    frames; readers of one event loop may share one (``new_scratch()``):
    every ``get_buffer()`` is followed by its ``buffer_updated()`` before
    another reader's ``get_buffer()``, and ``buffer_updated`` consumes the
    scratch entirely. Without one, a private scratch is made on first use.

    A frame longer than the scratch is kept as the chunks that arrived (each
    read into a chunk of at most the scratch's size or what came before it,
    short reads copied out) until a quarter
    of it is there; then it gets a buffer of its full length and the rest is
    written in place. Memory held is at most four times the bytes received
    (nothing for a length prefix alone).

    ``trusted=True`` (a client reading its broker's answers, whose sizes its
    own requests bound, and ``max_frame_bytes`` still caps): a long frame is
    received in place from its first byte, into the buffer of the last long
    frame (or the one before) when nothing else holds it any more (then a
    frame is a ``memoryview``; at most ``SPARES`` buffers of up to
    ``SPARE_MAX_BYTES`` are kept), so a stream of big answers is neither copied nor
    zero-filled again. A frame is returned only once all of it has arrived.
    """

    def __init__(self, max_frame_bytes: int = 64 << 20, scratch_bytes: int = SCRATCH_BYTES,
                 scratch: "bytearray | None" = None, trusted: bool = False) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._trusted = trusted
        self._spares: list = []  # trusted: buffers of past long frames, to reuse
        self._scratch = scratch
        self._scratch_bytes = len(scratch) if scratch is not None else max(scratch_bytes, 64)
        self._pending = bytearray()  # the start (prefix included) of an incomplete short frame
        self._length = 0  # a long frame's length while it is kept as chunks
        self._chunks: list = []
        self._chunked = 0  # bytes in _chunks
        self._chunk: "bytearray | None" = None  # handed out by get_buffer() for the next chunk
        self._big: "bytearray | memoryview | None" = None  # a long frame's buffer, without its prefix
        self._big_filled = 0
        self._frames: deque = deque()
        self.frames_read = 0  # frames completed so far

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as frames (for backpressure)."""
        return (len(self._pending) + self._chunked + self._big_filled
                + sum(len(f) for f in self._frames))

    @property
    def held_bytes(self) -> int:
        """Memory held for the incomplete frame: at most four times
        ``buffered_bytes`` once complete frames are taken (none between frames)."""
        chunks = sum(len(p.obj) if isinstance(p, memoryview) else len(p) for p in self._chunks)
        return len(self._pending) + chunks + (len(self._big) if self._big is not None else 0)

    @property
    def in_frame(self) -> bool:
        """A frame has begun (at least one byte of it came) and is incomplete."""
        return bool(self._pending) or self._length > 0 or self._big is not None

    def discard(self) -> None:
        """Drop every buffer held (the stream ended): the incomplete frame,
        the chunk handed out for a read that never came (asyncio asks for a
        buffer before the read that finds EOF), frames not taken, spares."""
        self._pending = bytearray()
        self._length = self._chunked = self._big_filled = 0
        self._chunks, self._chunk, self._big = [], None, None
        self._frames.clear()
        self._spares = []

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Writable space for the next bytes of the stream (never empty)."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._length:
            # a read's buffer lives only until buffer_updated keeps what came
            size = min(self._length - self._chunked, max(self._chunked, self._scratch_bytes))
            self._chunk = bytearray(size)
            return memoryview(self._chunk)
        if self._scratch is None:
            self._scratch = bytearray(self._scratch_bytes)
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``."""
        if self._big is not None:
            self._big_written(nbytes)
        elif self._chunk is not None:
            chunk, self._chunk = self._chunk, None
            if 2 * nbytes < len(chunk):  # a short read: hold only what came
                chunk = bytes(memoryview(chunk)[:nbytes])
            self._add_chunk(memoryview(chunk)[:nbytes], owned=True)
        else:
            self._feed(memoryview(self._scratch)[:nbytes])

    def receive_data(self, data) -> None:
        """Feed bytes (any size, any split)."""
        self._feed(memoryview(data).cast("B"))

    def next_frame(self):
        """The next whole frame (without its length prefix), or NEED_DATA."""
        return self._frames.popleft() if self._frames else NEED_DATA

    def _feed(self, view: memoryview) -> None:
        pos, end = 0, len(view)
        while pos < end:
            if self._big is not None:
                n = min(len(self._big) - self._big_filled, end - pos)
                self._big[self._big_filled:self._big_filled + n] = view[pos:pos + n]
                pos += n
                self._big_written(n)
            elif self._length:
                n = min(self._length - self._chunked, end - pos)
                self._add_chunk(view[pos:pos + n], owned=False)
                pos += n
            elif self._pending:
                pos = self._fill_pending(view, pos)
            elif end - pos >= 4 and end - pos >= (total := 4 + self._length_at(view, pos)):
                self._complete(bytes(view[pos + 4:pos + total]))
                pos += total
            else:  # the start of a frame: its prefix first, then _fill_pending decides
                self._pending += view[pos:min(end, pos + 4)]
                pos = min(end, pos + 4)
                if len(self._pending) == 4:  # decide now: the next read may go in place
                    pos = self._fill_pending(view, pos)

    def _fill_pending(self, view: memoryview, pos: int) -> int:
        """Move bytes of ``view`` into the incomplete frame; returns the new position."""
        pending = self._pending
        if len(pending) < 4:
            take = min(4 - len(pending), len(view) - pos)
            pending += view[pos:pos + take]
            pos += take
            if len(pending) < 4:
                return pos
        length = self._length_at(pending, 0)
        if 4 + length > self._scratch_bytes:  # decided as soon as the prefix is whole
            self._pending = bytearray()
            if self._trusted:
                self._big = self._buffer_for(length)
            else:
                self._length = length
            return pos
        take = min(4 + length - len(pending), len(view) - pos)
        pending += view[pos:pos + take]
        if len(pending) == 4 + length:
            del pending[:4]
            self._complete(pending)
            self._pending = bytearray()
        return pos + take

    def _add_chunk(self, data: memoryview, owned: bool) -> None:
        """Keep ``data`` (copied unless ``owned``) until a quarter of the long
        frame is here; then move everything into the frame's own buffer."""
        if 4 * (self._chunked + len(data)) < self._length:
            self._chunks.append(data if owned else bytes(data))
            self._chunked += len(data)
            return
        big, filled = bytearray(self._length), 0
        for part in (*self._chunks, data):
            big[filled:filled + len(part)] = part
            filled += len(part)
        self._length, self._chunks, self._chunked = 0, [], 0
        self._big = big
        self._big_written(filled)

    def _buffer_for(self, length: int) -> memoryview:
        """``length`` writable bytes: a spare buffer big enough that only this
        reader refers to (no frame or view of one is alive: CPython's count is
        then the list's and the call's), else a new one, kept as a spare in
        place of a busy or smaller one (two at most: a caller may still hold
        the last frame while the next arrives)."""
        spares = self._spares
        for i in range(len(spares)):
            if len(spares[i]) >= length and sys.getrefcount(spares[i]) == 2:
                return memoryview(spares[i])[:length]
        buf = bytearray(length)
        if length > SPARE_MAX_BYTES:
            return memoryview(buf)
        if len(spares) >= SPARES:
            spares.pop(min(range(len(spares)), key=lambda i: (sys.getrefcount(spares[i]) == 2, len(spares[i]))))
        spares.append(buf)
        return memoryview(buf)[:length]

    def _big_written(self, nbytes: int) -> None:
        self._big_filled += nbytes
        if self._big_filled == len(self._big):
            self._complete(self._big)
            self._big, self._big_filled = None, 0

    def _length_at(self, buf, pos: int) -> int:
        length = _U32.unpack_from(buf, pos)[0]
        if length < 4:
            raise DecodeError(f"frame length {length} is shorter than a header length field")
        if length > self.max_frame_bytes:
            raise FrameTooLargeError(f"frame of {length} bytes (limit {self.max_frame_bytes})")
        return length

    def _complete(self, frame) -> None:
        self._frames.append(frame)
        self.frames_read += 1


def new_scratch(size: int = SCRATCH_BYTES) -> bytearray:
    """A receive buffer that the readers of one event loop can share."""
    return bytearray(size)


@dataclass(frozen=True)
class Envelope:
    cid: int
    message: Message


def encode(message: Message, cid: int) -> list:
    """Buffers of one frame: ``[prefix + header, *payload]`` (payload not copied).

    A payload part may be any object with ``len()`` the sender knows how to
    write (the broker passes segment file slices for ``sendfile``)."""
    body = {name: getattr(message, name) for name in message.SCHEMA}
    if message.LATER:  # at its default a later field is left out: an older peer reads the frame
        defaults = _later_defaults(type(message))
        for name in message.LATER:
            if body[name] == defaults[name]:
                del body[name]
    try:
        header = msgpack.packb({"api": message.API, "cid": cid, "resp": message.RESPONSE,
                                "v": PROTOCOL_VERSION, "body": body})
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidRequestError(f"cannot encode {type(message).__name__}: {exc}") from None
    payload = message.payload if message.HAS_PAYLOAD else ()
    sizes = [p.nbytes if isinstance(p, memoryview) else len(p) for p in payload]
    if message.HAS_PAYLOAD and sizes != [part[-1] for part in message.parts]:
        raise InvalidRequestError(f"{type(message).__name__}: payload sizes {sizes} do not match "
                                  "the parts' nbytes")
    total = 4 + len(header) + sum(sizes)
    if total > 0xFFFFFFFF:
        raise FrameTooLargeError(f"frame of {total} bytes cannot be encoded")
    return [_PREFIX.pack(total, len(header)) + header, *payload]


_LATER_DEFAULTS: dict = {}


def _later_defaults(cls) -> dict:
    """The dataclass defaults of ``cls``'s ``LATER`` fields, cached."""
    found = _LATER_DEFAULTS.get(cls)
    if found is None:
        found = _LATER_DEFAULTS[cls] = {f.name: f.default for f in dataclasses.fields(cls)
                                        if f.name in cls.LATER}
    return found


def encode_bytes(message: Message, cid: int) -> bytes:
    """One frame as bytes (payload parts must be bytes-like, or have ``read()``)."""
    return b"".join(p.read() if hasattr(p, "read") else p for p in encode(message, cid))


def decode(frame) -> Envelope:
    """Decode one frame from ``FrameReader``; raises ``DecodeError``."""
    view = memoryview(frame)
    if len(view) < 4:
        raise DecodeError("frame shorter than its header length field")
    hlen = _U32.unpack_from(view, 0)[0]
    if hlen > min(len(view) - 4, MAX_HEADER):
        raise DecodeError(f"header length {hlen} exceeds the frame")
    if hlen < BULK_HEADER:
        return _decode(view, hlen)
    gc_pause.pause()  # thousands of parts: no collection while they are built
    try:
        return _decode(view, hlen)
    finally:
        gc_pause.resume()


def _decode(view: memoryview, hlen: int) -> Envelope:
    try:
        header = msgpack.unpackb(view[4:4 + hlen], raw=False, strict_map_key=True)
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types
        raise DecodeError(f"header is not valid msgpack: {type(exc).__name__}") from None
    if not isinstance(header, dict):
        raise DecodeError("header is not a map")
    cid = header.get("cid")
    cid = cid if type(cid) is int and 0 <= cid < 1 << 63 else None
    api, resp, version = header.get("api"), header.get("resp"), header.get("v")
    if cid is None or type(api) is not int or type(resp) is not bool:
        raise DecodeError("header needs integer api and cid and boolean resp", cid)
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise DecodeError(f"protocol version {repr(version)[:40]} unsupported (this side speaks "
                          f"{PROTOCOL_VERSION})", cid, UnsupportedVersionError(), api)
    cls = (RESPONSES if resp else REQUESTS).get(api)
    if cls is None:
        raise DecodeError(f"unknown api {api}", cid, api=api)
    try:
        body = header.get("body")
        try:  # the fast path; a mismatch is checked again to say what is wrong
            if body.__class__ is not dict:
                raise Mismatch
            fields = _fields_of(cls)(body)
        except Mismatch:
            body = check(body, dict, "body")
            later = cls.LATER
            fields = {name: check(body.get(name), spec, name) for name, spec in cls.SCHEMA.items()
                      if name in body or (name not in later and _missing(name))}
        if cls.HAS_PAYLOAD:
            fields["payload"] = _split_payload(fields["parts"], view[4 + hlen:])
        elif len(view) > 4 + hlen:
            raise InvalidRequestError(f"{cls.__name__} carries no payload")
    except InvalidRequestError as exc:
        raise DecodeError(f"{cls.__name__}: {exc.message}", cid, api=api) from None
    return Envelope(cid, cls(**fields))


_FIELDS: dict = {}


def _fields_of(cls):
    """The compiled field checker of a message class (schema.compile_fields), cached."""
    fn = _FIELDS.get(cls)
    if fn is None:
        fn = _FIELDS[cls] = compile_fields(cls.SCHEMA, cls.LATER)
    return fn


def _missing(name: str):
    raise InvalidRequestError(f"field {name!r} is missing")


def _split_payload(parts: tuple, payload: memoryview) -> tuple:
    out, pos = [], 0
    for part in parts:
        nbytes = part[-1]
        if nbytes < 0 or pos + nbytes > len(payload):
            raise InvalidRequestError("part sizes exceed the payload")
        out.append(payload[pos:pos + nbytes])
        pos += nbytes
    if pos != len(payload):
        raise InvalidRequestError(f"{len(payload) - pos} payload bytes belong to no part")
    return tuple(out)
