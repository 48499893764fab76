"""Protocol messages of authentication (SASL: SCRAM-SHA-256, SCRAM-SHA-512,
PLAIN) and of user
administration (docs/security.md, "Authentication").

Registered in the same tables as messages.py (which re-exports them):

- ``SaslHandshake``: the client names the mechanism it will use; the
  answer lists the mechanisms the broker offers (UNSUPPORTED_SASL_MECHANISM
  for another one, ILLEGAL_SASL_STATE for a second handshake).
- ``SaslAuthenticate``: one step of the exchange: the mechanism's bytes in,
  the broker's bytes out (SCRAM: client-first -> server-first, then
  client-final -> server-final). A failed step is answered with
  SASL_AUTHENTICATION_FAILED and the connection is closed.
- ``CreateUser`` / ``DeleteUser`` / ``ListUsers``: the SCRAM credentials of
  a user. The client derives them from the password (``scramp``), so the
  password never crosses the wire; the broker stores them as given.

``check_user_name`` is the user name rule both sides apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidRequestError
from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import ScramCredential, UserInfo

MECHANISM = "SCRAM-SHA-256"
SCRAM_SHA_512, PLAIN = "SCRAM-SHA-512", "PLAIN"
SCRAM_MECHANISMS = (MECHANISM, SCRAM_SHA_512)  # what a user's stored credentials can be
MECHANISMS = (MECHANISM, SCRAM_SHA_512, PLAIN)  # what a broker may offer (sasl_mechanisms)
MAX_USER_CHARS = 249  # limits.MAX_NAME_CHARS: a user name is an LMDB key, as a topic's is
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for SCRAM iteration counts
DEFAULT_ITERATIONS = 4096
_USER = re.compile(r"^[A-Za-z0-9._@-]{1,%d}\Z" % MAX_USER_CHARS)


def check_user_name(name: object) -> str:
    """1-249 of ``[A-Za-z0-9._@-]`` (no ``,`` or ``=``, which SCRAM escapes,
    and nothing saslprep would change); INVALID_REQUEST otherwise."""
    if not isinstance(name, str) or not _USER.match(name):
        shown = repr(name)[:60] if isinstance(name, str) else type(name).__name__
        raise InvalidRequestError(f"invalid user name {shown}: use 1-{MAX_USER_CHARS} of "
                                  "[A-Za-z0-9._@-]")
    return name


@_register
@dataclass(frozen=True)
class SaslHandshake(Message):
    API, SCHEMA = 23, {"mechanism": str}
    mechanism: str = MECHANISM


@_register
@dataclass(frozen=True)
class SaslHandshakeResponse(Response):
    """mechanisms: those the broker offers."""

    API, SCHEMA = 23, {**_RESP, "mechanisms": [str]}
    error: int = 0
    message: str = ""
    mechanisms: tuple = ()


@_register
@dataclass(frozen=True)
class SaslAuthenticate(Message):
    API, SCHEMA = 24, {"auth_bytes": bytes}
    auth_bytes: bytes = b""


@_register
@dataclass(frozen=True)
class SaslAuthenticateResponse(Response):
    """principal: ``User:NAME`` once the exchange succeeded, else ""."""

    API, SCHEMA = 24, {**_RESP, "auth_bytes": bytes, "principal": str}
    error: int = 0
    message: str = ""
    auth_bytes: bytes = b""
    principal: str = ""


@_register
@dataclass(frozen=True)
class CreateUser(Message):
    """Create user ``name``, or replace its credentials: SCRAM-SHA-256's
    salt, stored key and server key (32 bytes each key) and iteration count;
    ``more``: the same password's credentials for other SCRAM mechanisms
    (SCRAM-SHA-512: 64-byte keys), each (mechanism, salt, stored key, server
    key, iterations). A replacement replaces them all."""

    API, SCHEMA = 25, {"name": str, "mechanism": str, "salt": bytes, "stored_key": bytes,
                       "server_key": bytes, "iterations": int, "more": [ScramCredential]}
    name: str = ""
    mechanism: str = MECHANISM
    salt: bytes = b""
    stored_key: bytes = b""
    server_key: bytes = b""
    iterations: int = DEFAULT_ITERATIONS
    more: tuple = ()


@_register
@dataclass(frozen=True)
class CreateUserResponse(Response):
    """created: False when an existing user's credentials were replaced."""

    API, SCHEMA = 25, {**_RESP, "created": bool}
    error: int = 0
    message: str = ""
    created: bool = False


@_register
@dataclass(frozen=True)
class DeleteUser(Message):
    API, SCHEMA = 26, {"name": str}
    name: str = ""


@_register
@dataclass(frozen=True)
class DeleteUserResponse(Response):
    API, SCHEMA = 26, dict(_RESP)
    error: int = 0
    message: str = ""


@_register
@dataclass(frozen=True)
class ListUsers(Message):
    API, SCHEMA = 27, {}


@_register
@dataclass(frozen=True)
class ListUsersResponse(Response):
    """users: (name, mechanism, iterations), by name; never salts or keys."""

    API, SCHEMA = 27, {**_RESP, "users": [UserInfo]}
    error: int = 0
    message: str = ""
    users: tuple = ()
