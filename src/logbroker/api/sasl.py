"""The SASL exchange (SCRAM-SHA-256, docs/security.md): SaslHandshake,
then two SaslAuthenticate steps, answered by the connection's ``Session``
(security/auth.py) in the turn that read them. A failed step is answered,
then the connection closes (the pipeline's rule for
``security.auth.CLOSING_ERRORS``)."""

from __future__ import annotations

import asyncio

from ..protocol import messages as m


def handshake(svc, req: m.SaslHandshake, session) -> m.SaslHandshakeResponse:
    return session.handshake(req, asyncio.get_running_loop().time())


def authenticate(svc, req: m.SaslAuthenticate, session) -> m.SaslAuthenticateResponse:
    return session.step(req, asyncio.get_running_loop().time())
