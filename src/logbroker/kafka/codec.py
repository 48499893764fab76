"""The generic Kafka codec: frames <-> (header, body), for every API of the
profile, driven by the schemas in ``apis`` (sans-I/O; no hand-written
encoder per API).

A *frame* here is what ``framing.KafkaFrameReader`` returns: the bytes after
the 4-byte size prefix. Encoders return the bytes to write, prefix included.

Requests of a non-flexible version use header v1 (api_key int16,
api_version int16, correlation_id int32, client_id nullable string),
their responses header v0 (correlation_id). A flexible version (the API's
``flexible`` versions, KIP-482) uses request header v2 (v1's fields, then a
tagged-field section; client_id stays a non-compact string) and response
header v1 (correlation_id, tagged fields), except ApiVersions, whose
responses keep header v0 (``Api.response_header_tags``). Bodies decode to
frozen namedtuples (``schema``); records fields are memoryview slices of the
frame (the frame is not copied). Decoding checks every length against the bytes
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
    ``KafkaDecodeError``. The fields header v1 and v2 share come first, so
    any request's api key, version and correlation id are readable; the
    tagged fields of header v2 are skipped when the profile has the API at
    a flexible version (else the position is that after ``client_id``)."""
    view = _view(frame)
    try:
        p.need(view, 0, 8, "api key, version and correlation id")
        api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(view, 0)
        segment = "client_id"
        try:
            client_id, pos = _client_id(view, 8)
            if _flexible(APIS.get(api_key), api_version):
                segment = "tagged_fields"
                pos = p.skip_tagged_fields(view, pos)
        except KafkaDecodeError as exc:
            raise exc.within(segment) from None
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
    version = header.api_version
    body = _decode_body(api.request, version, view, pos, f"{api.name} v{version} request",
                        api.is_flexible(version), trailing_ok=True)
    return header, body


def decode_response(frame, api_key: int, version: int) -> tuple:
    """``(ResponseHeader, body)`` of a response to a request of ``api_key`` at
    ``version`` (a response does not say which it answers)."""
    api = _api(api_key, version, KafkaDecodeError)
    view = _view(frame)
    flexible = api.is_flexible(version)
    try:
        correlation_id, pos = p.dec_int32(view, 0)
        if flexible and api.response_header_tags:
            pos = p.skip_tagged_fields(view, pos)
    except KafkaDecodeError as exc:
        raise exc.in_context("response header") from None
    body = _decode_body(api.response, version, view, pos, f"{api.name} v{version} response",
                        flexible)
    return ResponseHeader(correlation_id), body


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A request on the wire: size prefix, header v1 (v2 at a flexible
    version), body (dict or namedtuple)."""
    return _join(encode_request_buffers(header, body))


def encode_request_buffers(header: RequestHeader, body: Any) -> list:
    api = _api(header.api_key, header.api_version, KafkaEncodeError)
    flexible = api.is_flexible(header.api_version)
    out = Out()
    try:
        out += _REQUEST_HEADER.pack(header.api_key, header.api_version, header.correlation_id)
        _enc_client_id(header.client_id, out)
    except (KafkaEncodeError, struct.error) as exc:
        raise KafkaEncodeError(f"request header: {exc}") from None
    if flexible:
        out += p.EMPTY_TAGGED_FIELDS
    return _encode_body(api.request, header.api_version, body, out,
                        f"{api.name} v{header.api_version} request", flexible)


def encode_response(header: ResponseHeader, api_key: int, version: int, body: Any) -> bytes:
    """A response on the wire: size prefix, header v0 (v1 at a flexible
    version, but for ApiVersions), body. ``header`` may be the request's
    header (only its ``correlation_id`` is used)."""
    return _join(encode_response_buffers(header, api_key, version, body))


def encode_response_buffers(header, api_key: int, version: int, body: Any) -> list:
    """``encode_response`` as buffers to write in order: the records values
    are passed through as they were given (not copied; any object with
    ``len()`` that the writer knows, such as a segment file slice)."""
    api = _api(api_key, version, KafkaEncodeError)
    flexible = api.is_flexible(version)
    out = Out()
    try:
        p.enc_int32(header.correlation_id, out)
    except KafkaEncodeError as exc:
        raise exc.within("correlation_id").in_context("response header") from None
    if flexible and api.response_header_tags:
        out += p.EMPTY_TAGGED_FIELDS
    return _encode_body(api.response, version, body, out, f"{api.name} v{version} response",
                        flexible)


# -- helpers -------------------------------------------------------------------------------
def _view(frame) -> memoryview:
    view = memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _flexible(api, version: int) -> bool:
    """Whether ``version`` of ``api`` (None: not in the profile) is flexible
    and served."""
    return api is not None and api.supports(version) and api.is_flexible(version)


def _api(api_key: int, version: int, error):
    api = APIS.get(api_key)
    if api is None or not api.supports(version):
        raise error(f"api key {api_key} v{version} is not in the profile")
    return api


def _decode_body(message, version: int, view: memoryview, pos: int, context: str,
                 flexible: bool, trailing_ok: bool = False):
    """``trailing_ok``: bytes after a request's body are ignored, as Kafka's
    broker does: librdkafka (2.16) asks Metadata v9+ for every topic with
    its 4-byte array-count placeholder left in place, a uvarint 0 (null)
    followed by three zero bytes that Kafka never reads. A response must
    end where its body does."""
    try:
        body, end = decoder(message, version, flexible)(view, pos)
    except KafkaDecodeError as exc:
        raise exc.in_context(context) from None
    if end != len(view) and not trailing_ok:
        raise KafkaDecodeError(f"{len(view) - end} bytes after the body", context=context)
    return body


def _encode_body(message, version: int, body: Any, out: Out, context: str,
                 flexible: bool) -> list:
    try:
        encoder(message, version, flexible)(body, out)
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
