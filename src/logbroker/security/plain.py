"""A password checked against a user's stored SCRAM credentials: SASL PLAIN
(security/auth.py) and HTTP Basic of ``/metrics`` (metrics/basic_auth.py)
(docs/security.md, "Authentication").

The broker never stores a password: ``verify(auth, user, password)``
derives SaltedPassword from the stored salt and iteration count (PBKDF2,
scramp's ``make_auth_info``: the same saslprep as the client's
derivation), then its StoredKey, and compares it with the stored one in
constant time (``hmac.compare_digest``). An unknown user costs the same
PBKDF2 (made-up credentials, ``BrokerAuth.credentials``) and fails alike.

PBKDF2 costs 3-7 ms at 4096-16384 iterations: ``PasswordChecks`` runs it
in one worker thread of its own, never on the loop, with at most ``QUEUE``
checks waiting (more are refused at once: SASL_AUTHENTICATION_FAILED,
"too many logins in progress"; the guessing throttle still comes first:
as the checks end in later loop turns, at most ``QUEUE`` guesses can be past
it at once, each counted when it fails).
"""

from __future__ import annotations

import asyncio
import hmac
from concurrent.futures import ThreadPoolExecutor

from scramp import ScramException, ScramMechanism

from ..errors import LogbrokerError, SaslAuthenticationFailedError
from ..protocol.auth_messages import MECHANISM, check_user_name

MAX_PASSWORD_CHARS = 1024
MAX_PLAIN_BYTES = 8192  # a longer PLAIN message fails before it is decoded
QUEUE = 8  # PLAIN checks waiting for the worker at once, broker-wide
_MECHANISM = ScramMechanism(MECHANISM)


def verify(auth, user: str, password: str) -> tuple:
    """(stored key, None) when ``password`` is ``user``'s, else (None, why).
    ``auth``: the BrokerAuth (``users``, ``credentials``). Costly: PBKDF2."""
    why = None
    try:
        check_user_name(user)
    except LogbrokerError:
        why = "not a valid user name"
    users = auth.users
    if why is None and (users is None or users.get(user) is None):
        why = "unknown user"
    salt, stored, _server, iterations = auth.credentials(user if why is None else "-")
    if not password or len(password) > MAX_PASSWORD_CHARS:
        why = why or f"password of {len(password)} characters"
    try:
        key = _MECHANISM.make_auth_info(password[:MAX_PASSWORD_CHARS] or "-",
                                        iteration_count=iterations, salt=salt)[1]
    except (ScramException, ValueError, TypeError):
        return None, why or "the password is not valid SCRAM input (saslprep)"
    if why is not None or not hmac.compare_digest(key, stored):
        return None, why or "wrong password"
    return stored, None


def parse_plain(token: bytes) -> tuple:
    """(authorization id, user, password) of a SASL PLAIN message (RFC
    4616: ``authzid NUL authcid NUL passwd``, UTF-8); ValueError otherwise."""
    parts = token.decode("utf-8").split("\0")
    if len(parts) != 3 or not parts[1]:
        raise ValueError("a PLAIN message is authzid NUL user NUL password")
    return parts[0], parts[1], parts[2]


class PasswordChecks:
    """The broker's PLAIN checks: one worker thread, a bounded queue."""

    def __init__(self, auth) -> None:
        self.auth = auth
        self._pool: "ThreadPoolExecutor | None" = None  # made on first use
        self.waiting = 0

    async def check(self, user: str, password: str) -> tuple:
        """``verify`` off the loop; SASL_AUTHENTICATION_FAILED when ``QUEUE``
        checks already wait."""
        if self.waiting >= QUEUE:
            raise SaslAuthenticationFailedError("too many logins in progress: try again in a "
                                                "moment")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logbroker-plain")
        self.waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, verify, self.auth, user, password)
        finally:
            self.waiting -= 1
