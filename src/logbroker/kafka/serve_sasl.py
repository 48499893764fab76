"""Kafka's SASL requests, answered by our broker's ``Session`` (security/auth.py):
SaslHandshake and SaslAuthenticate become our messages of the same names,
so the SASL exchange (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), its failures, deadline and metrics are one
code path for both listeners (docs/kafka.md, "Security"). Each function
takes the ``KafkaSite``, the request header and body, and returns a
``Plan`` (plan.py); the broker's pipeline runs it through api/sasl.py,
which the connection's session answers.
"""

from __future__ import annotations

from ..protocol import messages as m
from ..security.auth import offered as offered_on
from .plan import KafkaSite, Plan
from .wire_errors import kafka_code, kafka_message


def sasl_handshake(site: KafkaSite, header, body) -> Plan:
    """The mechanism asked for; the answer lists those offered (also with
    UNSUPPORTED_SASL_MECHANISM, as Kafka does: then those this listener offers)."""
    def answer(resp: m.SaslHandshakeResponse) -> dict:
        offered = resp.mechanisms or offered_on(site.config, site.tls)
        return {"error_code": kafka_code(resp.error), "mechanisms": list(offered)}
    return Plan(m.SaslHandshake(mechanism=body.mechanism), answer)


def sasl_authenticate(site: KafkaSite, header, body) -> Plan:
    """One SCRAM step: client-first -> server-first, client-final ->
    server-final; or PLAIN's one message (SASL_AUTHENTICATION_FAILED, then
    the connection closes, on a wrong password or an unknown user). No re-authentication: the
    session's lifetime (v1) is 0, "no limit"."""
    def answer(resp: m.SaslAuthenticateResponse) -> dict:
        return {"error_code": kafka_code(resp.error), "error_message": kafka_message(resp.message),
                "auth_bytes": resp.auth_bytes, "session_lifetime_ms": 0}
    return Plan(m.SaslAuthenticate(auth_bytes=bytes(body.auth_bytes)), answer)
