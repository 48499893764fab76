"""The SASL exchange (SCRAM-SHA-256 or -512, PLAIN; docs/security.md):
SaslHandshake, then SaslAuthenticate steps (SCRAM's two, PLAIN's one),
answered by the connection's ``Session`` (security/auth.py) in the turn
that read them; PLAIN's step is a coroutine (its password is checked off
the loop), which the pipeline runs as a task. A failed step is answered,
then the connection closes (the pipeline's rule for
``security.auth.CLOSING_ERRORS``)."""

from __future__ import annotations

import asyncio

from ..protocol import messages as m


def handshake(svc, req: m.SaslHandshake, session) -> m.SaslHandshakeResponse:
    return session.handshake(req, asyncio.get_running_loop().time())


def authenticate(svc, req: m.SaslAuthenticate, session) -> m.SaslAuthenticateResponse:
    return session.step(req, asyncio.get_running_loop().time())
