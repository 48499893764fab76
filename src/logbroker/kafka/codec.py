"""The generic Kafka codec: frames <-> (header, body), for every API of the
profile, driven by the schemas in ``apis`` (sans-I/O; no hand-written
encoder per API).

A *frame* here is what ``framing.KafkaFrameReader`` returns: the bytes after
the 4-byte size prefix. Encoders return the bytes to write, prefix included.

Requests use header v1 (api_key int16, api_version int16, correlation_id
int32, client_id nullable string), responses header v0 (correlation_id);
these are the headers of every non-flexible version. Bodies decode to frozen
namedtuples (``schema``); records fields are memoryview slices of the frame
(the frame is not copied). Decoding checks every length against the bytes
present and refuses trailing bytes; whatever the input, it raises only
``KafkaDecodeError`` (``KafkaUnsupportedVersionError`` for an API key or
version outside the profile, with the header it could read). Encoding raises
``KafkaEncodeError`` for a value its field does not allow.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from . import primitives as p
from .apis import APIS
from .errors import KafkaDecodeError, KafkaEncodeError, KafkaUnsupportedVersionError
from .schema import Out, decoder, encoder

MAX_FRAME = 0x7FFFFFFF  # the size prefix is an int32
_REQUEST_HEADER = struct.Struct(">hhi")
_client_id = p.string_decoder(nullable=True)
_enc_client_id = p.string_encoder(nullable=True)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Request header v1 (its first fields are those of v2 too)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: "str | None" = None


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """Response header v0."""

    correlation_id: int


def decode_request_header(frame) -> tuple:
    """``(RequestHeader, body position)`` of a request frame; raises
    ``KafkaDecodeError``. Reads only the fields header v1 and v2 share, so a
    flexible request's header (v2, tagged fields after ``client_id``) still
    yields its api key, version and correlation id."""
    view = _view(frame)
    try:
        p.need(view, 0, 8, "api key, version and correlation id")
        api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(view, 0)
        try:
            client_id, pos = _client_id(view, 8)
        except KafkaDecodeError as exc:
            raise exc.within("client_id") from None
    except KafkaDecodeError as exc:
        raise exc.in_context("request header") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame) -> tuple:
    """``(RequestHeader, body)`` of one request frame (without its size prefix).

    Raises ``KafkaUnsupportedVersionError`` (with ``.header``) for an api key
    or version outside the profile, ``KafkaDecodeError`` for anything else
    wrong, nothing else. ``body`` holds views of ``frame``: keep ``frame``
    alive and unchanged while the body is used."""
    view = _view(frame)
    header, pos = decode_request_header(view)
    api = APIS.get(header.api_key)
    if api is None:
        raise KafkaUnsupportedVersionError(f"unknown api key {header.api_key}", header)
    if not api.supports(header.api_version):
        raise KafkaUnsupportedVersionError(
            f"{api.name} v{header.api_version} unsupported (versions {api.min_version}-"
            f"{api.max_version})", header)
    body = _decode_body(api.request, header.api_version, view, pos,
                        f"{api.name} v{header.api_version} request")
    return header, body


def decode_response(frame, api_key: int, version: int) -> tuple:
    """``(ResponseHeader, body)`` of a response to a request of ``api_key`` at
    ``version`` (a response does not say which it answers)."""
    api = _api(api_key, version, KafkaDecodeError)
    view = _view(frame)
    try:
        correlation_id, pos = p.dec_int32(view, 0)
    except KafkaDecodeError as exc:
        raise exc.in_context("response header") from None
    body = _decode_body(api.response, version, view, pos, f"{api.name} v{version} response")
    return ResponseHeader(correlation_id), body


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A request on the wire: size prefix, header v1, body (dict or namedtuple)."""
    return _join(encode_request_buffers(header, body))


def encode_request_buffers(header: RequestHeader, body: Any) -> list:
    api = _api(header.api_key, header.api_version, KafkaEncodeError)
    out = Out()
    try:
        out += _REQUEST_HEADER.pack(header.api_key, header.api_version, header.correlation_id)
        _enc_client_id(header.client_id, out)
    except (KafkaEncodeError, struct.error) as exc:
        raise KafkaEncodeError(f"request header: {exc}") from None
    return _encode_body(api.request, header.api_version, body, out,
                        f"{api.name} v{header.api_version} request")


def encode_response(header: ResponseHeader, api_key: int, version: int, body: Any) -> bytes:
    """A response on the wire: size prefix, header v0, body. ``header`` may be
    the request's header (only its ``correlation_id`` is used)."""
    return _join(encode_response_buffers(header, api_key, version, body))


def encode_response_buffers(header, api_key: int, version: int, body: Any) -> list:
    """``encode_response`` as buffers to write in order: the records values
    are passed through as they were given (not copied; any object with
    ``len()`` that the writer knows, such as a segment file slice)."""
    api = _api(api_key, version, KafkaEncodeError)
    out = Out()
    try:
        p.enc_int32(header.correlation_id, out)
    except KafkaEncodeError as exc:
        raise exc.within("correlation_id").in_context("response header") from None
    return _encode_body(api.response, version, body, out, f"{api.name} v{version} response")


# -- helpers -------------------------------------------------------------------------------
def _view(frame) -> memoryview:
    view = memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _api(api_key: int, version: int, error):
    api = APIS.get(api_key)
    if api is None or not api.supports(version):
        raise error(f"api key {api_key} v{version} is not in the profile")
    return api


def _decode_body(message, version: int, view: memoryview, pos: int, context: str):
    try:
        body, end = decoder(message, version)(view, pos)
    except KafkaDecodeError as exc:
        raise exc.in_context(context) from None
    if end != len(view):
        raise KafkaDecodeError(f"{len(view) - end} bytes after the body", context=context)
    return body


def _encode_body(message, version: int, body: Any, out: Out, context: str) -> list:
    try:
        encoder(message, version)(body, out)
    except KafkaEncodeError as exc:
        raise exc.in_context(context) from None
    buffers, start = [], 0
    view = memoryview(out)
    for pos, obj in out.attached:
        buffers.append(view[start:pos])
        buffers.append(obj)
        start = pos
    buffers.append(view[start:])
    size = len(out) + sum(len(obj) if not isinstance(obj, memoryview) else obj.nbytes
                          for _, obj in out.attached)
    if size > MAX_FRAME:
        raise KafkaEncodeError(f"a frame of {size} bytes cannot be encoded", context=context)
    buffers.insert(0, p.I32.pack(size))
    return buffers


def _join(buffers: list) -> bytes:
    return b"".join(b.read() if hasattr(b, "read") else b for b in buffers)
