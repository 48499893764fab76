"""ApiVersions: the table of supported versions and Kafka's rule for a
request newer than the broker knows (pure functions).

A client's first request is usually ApiVersions at the newest version *it*
knows, before it knows ours. Kafka answers a version it does not support
(KIP-511) with an ApiVersions **v0** response carrying UNSUPPORTED_VERSION
(35) and, in ``api_keys``, the range of ApiVersions itself; the client then
retries at the highest version of that range. The request's header is
still readable (a flexible request header v2 begins with header v1's
fields), so ``codec.decode_request`` raises ``KafkaUnsupportedVersionError``
carrying it, and ``unsupported_version_reply`` answers it. Any other API at
an unsupported version gets no answer: Kafka closes the connection.
"""

from __future__ import annotations

from .apis import API_VERSIONS, PROFILE
from .codec import RequestHeader, ResponseHeader, encode_response

UNSUPPORTED_VERSION = 35


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


def answer_api_versions(header: RequestHeader, throttle_time_ms: int = 0) -> tuple:
    """``(response version, body)`` for an ApiVersions request: at its own
    version when supported, else the v0 UNSUPPORTED_VERSION answer."""
    if API_VERSIONS.supports(header.api_version):
        return header.api_version, api_versions_body(throttle_time_ms)
    return 0, unsupported_api_versions_body()


def unsupported_version_reply(header: RequestHeader) -> "bytes | None":
    """The response to write for a request ``codec`` refused as unsupported:
    the v0 ApiVersions answer for ApiVersions, None (close the connection)
    for any other API key or version."""
    if header.api_key != API_VERSIONS.key or API_VERSIONS.supports(header.api_version):
        return None
    version, body = answer_api_versions(header)
    return encode_response(ResponseHeader(header.correlation_id), API_VERSIONS.key, version, body)
