"""Schemas of the SASL APIs: SaslHandshake (v0-1) and SaslAuthenticate
(v0-1; v2 is flexible), from Kafka's message specs
(clients/src/main/resources/common/message/SaslHandshake*.json,
SaslAuthenticate*.json). docs/kafka.md, "Security".

SaslHandshake v1 means the SASL tokens follow in SaslAuthenticate
requests; v0 that they follow as raw size-prefixed frames without a
request header (net/kafka_connection.py speaks both).
"""

from __future__ import annotations

from .schema import Api, Array, F, S

SASL_HANDSHAKE = Api(17, "SaslHandshake", 0, 1, S(
    "SaslHandshakeRequest",
    F("mechanism", "string"),
), S(
    "SaslHandshakeResponse",
    F("error_code", "int16"),
    F("mechanisms", Array("string")),
))

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", 0, 1, S(
    "SaslAuthenticateRequest",
    F("auth_bytes", "bytes"),
), S(
    "SaslAuthenticateResponse",
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),
))
