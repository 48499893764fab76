"""HTTP Basic authentication of ``/metrics`` against the broker's SCRAM users
(``metrics_auth``; docs/metrics.md, "Authentication and TLS").

``BasicAuth(auth, failed).check(header, ip)`` (on the metrics server's
loop) answers ``Verdict(principal, status, why, headers)``: ``principal``
("User:NAME") when the ``Authorization: Basic`` header holds a user's right
password, else an HTTP status to answer (401 with ``WWW-Authenticate``,
429 with ``Retry-After``, 503) and why.

- The password is checked as SASL PLAIN's is (security/plain.py):
  SaltedPassword from the stored salt and iteration count (PBKDF2), its
  StoredKey compared with ``hmac.compare_digest``. An unknown user costs
  the same PBKDF2 (made-up credentials, security/auth.py) and gets the same
  401. The password is neither kept nor logged.
- CPU: PBKDF2 runs in one worker thread of its own, never on a loop; at
  most ``QUEUE`` checks wait for it and at most ``PER_ADDRESS`` of one
  address (more: 503). An address with ``MAX_FAILURES`` failures within
  ``WINDOW_S`` is answered 429 before any PBKDF2 (a warning line, at most
  one a second; the others at debug level).
- A right password is remembered (an HMAC of user and password under a
  per-process key, at most ``REMEMBERED`` of them) with the StoredKey it
  matched: Prometheus' next scrapes with it cost no PBKDF2, and a changed
  password or a deleted user ends it (the stored key is compared each time).
- Each failure counts in ``logbroker_auth_failures_total`` (``failed()``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..errors import SaslAuthenticationFailedError
from ..security.plain import verify

log = logging.getLogger("logbroker.metrics")
FAILED = SaslAuthenticationFailedError.name  # names every refusal's reason in its answer
REALM = 'Basic realm="logbroker metrics", charset="UTF-8"'
MAX_FAILURES, WINDOW_S = 5, 60.0  # failed checks per address per window, then 429
ADDRESSES = 10_000  # addresses whose failures are remembered
QUEUE, PER_ADDRESS = 8, 2  # checks waiting for the PBKDF2 worker; of one address at once
REMEMBERED = 64  # right passwords remembered (their HMAC)
WARN_EVERY_S = 1.0  # at most one warning line a second about throttled addresses


@dataclass(frozen=True)
class Verdict:
    principal: "str | None"  # "User:NAME" when authenticated
    status: int = 200  # else the HTTP status to answer
    why: str = ""
    headers: tuple = ()  # ((name, value), ...) to answer with the status


class BasicAuth:
    def __init__(self, auth, failed=None) -> None:
        """``auth``: the broker's BrokerAuth (``users.get``, ``credentials``);
        ``failed()``: counts one failed authentication."""
        self.auth, self.failed = auth, failed or (lambda: None)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logbroker-metrics-auth")
        self._key = secrets.token_bytes(32)
        self._known: "OrderedDict[bytes, tuple]" = OrderedDict()  # hmac -> (user, stored key)
        self._failures: "OrderedDict[str, list]" = OrderedDict()  # ip -> [window start, count]
        self._waiting, self._inflight = 0, {}
        self._warned = float("-inf")  # the last warning about a throttled address

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def check(self, header: "str | None", ip: "str | None") -> Verdict:
        ip = ip or "?"
        wait = self._blocked(ip)
        if wait:
            now = time.monotonic()
            quiet = now - self._warned < WARN_EVERY_S
            self._warned = self._warned if quiet else now
            (log.debug if quiet else log.warning)(
                "metrics: %s refused: %d failed logins within %g s", ip, MAX_FAILURES, WINDOW_S)
            return Verdict(None, 429, f"{FAILED}: too many failed logins from your address: "
                           f"try again in {wait} s",
                           (("Retry-After", str(wait)),))
        user, password = _credentials(header)
        if user is None:
            log.debug("metrics: %s sent no Basic credentials", ip)
            return Verdict(None, 401, f"{FAILED}: HTTP Basic authentication with a broker user "
                           "is required",
                           (("WWW-Authenticate", REALM),))
        mark = hmac.new(self._key, f"{user}\0{password}".encode("utf-8", "replace"),
                        hashlib.sha256).digest()
        if self._remembered(mark, user):
            return Verdict(f"User:{user}")
        if self._waiting >= QUEUE or self._inflight.get(ip, 0) >= PER_ADDRESS:
            log.warning("metrics: %s refused: too many logins being checked", ip)
            return Verdict(None, 503, f"{FAILED}: too many logins in progress: try again in a "
                           "moment", (("Retry-After", "1"),))
        self._waiting += 1
        self._inflight[ip] = self._inflight.get(ip, 0) + 1
        try:
            stored, why = await asyncio.get_running_loop().run_in_executor(
                self._pool, self._verify, user, password)
        finally:
            self._waiting -= 1
            left = self._inflight.pop(ip) - 1
            if left:
                self._inflight[ip] = left
        if why is not None:
            self._failed(ip)
            self.failed()
            log.warning("metrics: login from %s as %r failed: %s", ip, user[:60], why)
            return Verdict(None, 401, f"{FAILED}: invalid user name or password",
                           (("WWW-Authenticate", REALM),))
        self._known[mark] = (user, stored)
        while len(self._known) > REMEMBERED:
            self._known.popitem(last=False)
        log.info("metrics: %s authenticated as User:%s", ip, user)
        return Verdict(f"User:{user}")

    # -- the check (the worker thread) --------------------------------------------------------
    def _verify(self, user: str, password: str) -> tuple:
        """(stored key, None) for the right password, else (None, why) (security/plain.py)."""
        return verify(self.auth, user, password)

    # -- memory -------------------------------------------------------------------------------
    def _remembered(self, mark: bytes, user: str) -> bool:
        known = self._known.get(mark)
        if known is None or known[0] != user:
            return False
        users = self.auth.users
        cred = users.get(user) if users is not None else None
        if cred is None or not hmac.compare_digest(cred.stored_key, known[1]):
            del self._known[mark]  # deleted, or its password changed
            return False
        return True

    def _blocked(self, ip: str) -> int:
        """Whole seconds ``ip`` must wait (0: it may try)."""
        w = self._failures.get(ip)
        if w is None:
            return 0
        left = w[0] + WINDOW_S - time.monotonic()
        if left <= 0:
            del self._failures[ip]
            return 0
        return max(1, int(left + 0.999)) if w[1] >= MAX_FAILURES else 0

    def _failed(self, ip: str) -> None:
        self._blocked(ip)  # drops an ended window
        w = self._failures.get(ip)
        if w is None:
            while len(self._failures) >= ADDRESSES:
                self._failures.popitem(last=False)  # the oldest window
            self._failures[ip] = [time.monotonic(), 1]
        else:
            w[1] += 1


def _credentials(header: "str | None") -> tuple:
    """(user, password) of a ``Basic`` Authorization header, else (None, None)."""
    if not header or not header[:6].lower() == "basic ":
        return None, None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None, None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else (None, None)
