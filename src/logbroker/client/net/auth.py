"""The client's side of authentication: SCRAM-SHA-256 (or SCRAM-SHA-512,
``sasl_mechanism``) through ``scramp``
(docs/security.md, "Authentication").

``authenticate(conn, creds, timeout)`` runs on every connection a client
opens, right after the Handshake (after TLS when on) and before anything
else: SaslHandshake, client-first, client-final, then it checks the
broker's server-final signature (the broker proves it holds the
credentials too). A refusal raises ``SaslAuthenticationFailedError`` (not
retriable: a wrong password stays wrong) naming the broker's address;
the broker closes the connection after a failed step.

``user_credentials(password, iterations)`` derives what the broker stores
for a user (Admin.create_user): the password never leaves the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scramp import ScramClient, ScramException, ScramMechanism

from ...errors import SaslAuthenticationFailedError, for_code
from ...protocol import messages as m
from ...protocol.auth_messages import (MAX_ITERATIONS, MECHANISM, MIN_ITERATIONS,
                                       SCRAM_MECHANISMS, check_user_name)


@dataclass(frozen=True)
class SaslCredentials:
    """A client's user name and password (the password is never shown in a repr)."""

    username: str
    password: str = field(repr=False)
    mechanism: str = MECHANISM

    @classmethod
    def make(cls, username, password, mechanism) -> "SaslCredentials | None":
        """From a client's settings: None when neither is given; ``ValueError``
        or ``TypeError`` for a half-given pair, a bad name or mechanism."""
        if username is None and password is None:
            return None
        if username is None or password is None:
            raise ValueError("username and password go together")
        if not isinstance(username, str) or not isinstance(password, str):
            raise TypeError("username and password must be str")
        try:
            check_user_name(username)
        except Exception as exc:  # noqa: BLE001 - the registry's error, as a settings error
            raise ValueError(str(exc.args[0] if exc.args else exc)) from None
        if not password:
            raise ValueError("password must not be empty")
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"sasl_mechanism must be one of {', '.join(SCRAM_MECHANISMS)}, "
                             f"got {mechanism!r}")
        return cls(username, password, mechanism)


async def authenticate(conn, creds: SaslCredentials, timeout: float) -> str:
    """Authenticate ``conn`` as ``creds``; returns the principal (``User:NAME``)."""
    where = f"authentication as {creds.username!r} with {conn.address} failed"
    resp = await conn.request(m.SaslHandshake(mechanism=creds.mechanism), timeout)
    if resp.error:
        raise for_code(resp.error)(f"{where}: {resp.message}")
    client = ScramClient([creds.mechanism], creds.username, creds.password)
    try:
        first = await _step(conn, client.get_client_first(), timeout, where)
        client.set_server_first(first)
        final = await _step(conn, client.get_client_final(), timeout, where)
        client.set_server_final(final)
    except (ScramException, UnicodeDecodeError) as exc:
        raise SaslAuthenticationFailedError(f"{where}: the broker's answer did not check out "
                                            f"({exc})") from None
    return f"User:{creds.username}"


async def _step(conn, text: str, timeout: float, where: str) -> str:
    resp = await conn.request(m.SaslAuthenticate(auth_bytes=text.encode()), timeout)
    if resp.error:
        raise for_code(resp.error)(f"{where}: {resp.message}")
    return resp.auth_bytes.decode("utf-8")


def user_credentials(password: str, iterations: int, mechanism: str = MECHANISM) -> tuple:
    """(salt, stored key, server key, iterations) of ``password`` (RFC 5802)
    for SCRAM ``mechanism``."""
    if not isinstance(password, str) or not password:
        raise ValueError("password must be a non-empty str")
    if isinstance(iterations, bool) or not isinstance(iterations, int) \
            or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                         f"got {iterations!r}")
    return ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations)
