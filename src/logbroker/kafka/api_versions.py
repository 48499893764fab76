"""ApiVersions: the table of supported versions, Kafka's check of a v3
request's client software, and Kafka's rule for a request newer than the
broker knows (pure functions).

A client's first request is usually ApiVersions at the newest version *it*
knows, before it knows ours. We serve v0-3: librdkafka starts at v3 (the
first flexible version) and falls back to v0 after any failure, logging a
parse failure, so v3 is served rather than refused. Kafka answers a version
it does not support (KIP-511) with an ApiVersions **v0** response carrying
UNSUPPORTED_VERSION (35) and, in ``api_keys``, the range of ApiVersions
itself; the client then retries at the highest version of that range. The
request's header is still readable (a flexible request header v2 begins
with header v1's fields), so ``codec.decode_request`` raises
``KafkaUnsupportedVersionError`` carrying it, and
``unsupported_version_reply`` answers it. Any other API at an unsupported
version gets no answer: Kafka closes the connection.

A v3 request names the client's software; as Kafka
(``ApiVersionsRequest.isValid``), a name or version not matching
``SOFTWARE_NAME`` is answered INVALID_REQUEST (42) with no ``api_keys``, at
the request's version.
"""

from __future__ import annotations

import re

from .apis import API_VERSIONS, PROFILE
from .codec import RequestHeader, ResponseHeader, encode_response

UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")  # Kafka's, whole string


def supported_versions() -> tuple:
    """``(api_key, min_version, max_version)`` of every API of the profile,
    by key: the ``api_keys`` of an ApiVersions response."""
    return tuple(sorted((api.key, api.min_version, api.max_version) for api in PROFILE))


def api_versions_body(throttle_time_ms: int = 0) -> dict:
    """The body of a successful ApiVersions response (any supported version)."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in supported_versions()]
    return {"error_code": 0, "api_keys": keys, "throttle_time_ms": throttle_time_ms}


def unsupported_api_versions_body() -> dict:
    """The v0 body for an ApiVersions request of a version we do not speak:
    UNSUPPORTED_VERSION and the range of ApiVersions alone (as Kafka)."""
    return {"error_code": UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": API_VERSIONS.key, "min_version": API_VERSIONS.min_version,
                          "max_version": API_VERSIONS.max_version}]}


def valid_client_software(request) -> bool:
    """Whether a v3+ request's client software name and version are Kafka's
    shape (letters, digits, ``-`` and ``.``, starting and ending with a
    letter or digit; not empty). Only v3+ requests carry them."""
    return all(SOFTWARE_NAME.fullmatch(s) is not None
               for s in (request.client_software_name, request.client_software_version))


def answer_api_versions(header: RequestHeader, throttle_time_ms: int = 0,
                        request=None) -> tuple:
    """``(response version, body)`` for an ApiVersions request: at its own
    version when supported (INVALID_REQUEST for a v3+ ``request`` whose
    client software is malformed), else the v0 UNSUPPORTED_VERSION answer."""
    version = header.api_version
    if not API_VERSIONS.supports(version):
        return 0, unsupported_api_versions_body()
    if version >= 3 and request is not None and not valid_client_software(request):
        return version, {"error_code": INVALID_REQUEST, "api_keys": [],
                         "throttle_time_ms": throttle_time_ms}
    return version, api_versions_body(throttle_time_ms)


def unsupported_version_reply(header: RequestHeader) -> "bytes | None":
    """The response to write for a request ``codec`` refused as unsupported:
    the v0 ApiVersions answer for ApiVersions, None (close the connection)
    for any other API key or version."""
    if header.api_key != API_VERSIONS.key or API_VERSIONS.supports(header.api_version):
        return None
    version, body = answer_api_versions(header)
    return encode_response(ResponseHeader(header.correlation_id), API_VERSIONS.key, version, body)
