"""The console's login with the broker's SCRAM users (docs/console.md, "Security").

``Gate(auth, failed, secure)`` exists when the broker has ``auth_required``:

- ``GET /login`` is a form (login_page.py); ``POST /login`` (fields
  ``user``, ``password``) checks the password against the user's stored
  SCRAM-SHA-256 credentials: SaltedPassword from the stored salt and
  iteration count, then StoredKey, compared with ``hmac.compare_digest``
  (scramp's ``make_auth_info``: the same saslprep and PBKDF2 as the
  clients'). The password is neither kept nor logged. A success opens a
  session (sessions.py) and answers 303 to ``/`` with its cookie
  (HttpOnly, SameSite=Strict, Path=/, Max-Age, Secure and ``__Host-``
  under TLS); a failure, for an unknown user, a bad name or a wrong
  password alike, answers 401 with ``invalid user name or password``, is
  counted (``failed()``: the broker's auth-failure metric) and logged with
  the real reason.
- CSRF: a POST is accepted only with an ``Origin`` header equal to the
  console's own origin (browsers send it on form posts; the pages' Referrer-
  Policy ``same-origin`` keeps it), else 403; the cookie is SameSite=Strict.
- CPU: PBKDF2 (4096+ iterations) runs in the gate's own threads, at most
  ``WORKERS`` at once, with at most ``QUEUE`` more waiting and at most
  ``PER_ADDRESS`` of one address in progress (more: 503, so the throttle
  cannot be outrun by logins sent at once), and
  an address with ``MAX_FAILURES`` failed logins in a minute is refused
  (429, Retry-After) before any PBKDF2 (throttle.py). An unknown user costs
  the same PBKDF2 as a known one (made-up credentials, auth.py).
- ``principal(request)``: the request's live session's principal, or None.
  A session ends on logout, on expiry, or when its user is deleted or its
  password changed (the stored key is compared on every request).
- ``POST /logout`` (same Origin check) ends the session and clears the cookie.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web
from scramp import ScramException, ScramMechanism

from ..errors import LogbrokerError
from ..protocol.auth_messages import DEFAULT_ITERATIONS, MECHANISM, check_user_name
from .login_page import render
from .sessions import MAX_AGE_S, SessionTable
from .throttle import LoginThrottle, key_of

log = logging.getLogger("logbroker.console")
FAILED = "invalid user name or password"
WORKERS = 2  # PBKDF2s at once
QUEUE = 16  # logins waiting for a worker; more are answered 503
PER_ADDRESS = 2  # logins of one address (throttle.key_of) being checked at once; more: 503
MAX_PASSWORD_CHARS = 1024


class Gate:
    def __init__(self, auth, failed=None, secure: bool = False,
                 sessions: "SessionTable | None" = None,
                 throttle: "LoginThrottle | None" = None) -> None:
        """``auth``: the broker's BrokerAuth (its users: ``auth.users.get``);
        ``failed()``: counts one failed login; ``secure``: served over TLS."""
        self.auth, self.secure = auth, secure
        self.failed = failed or (lambda: None)
        self.cookie = "__Host-logbroker-console" if secure else "logbroker-console"
        self.sessions = sessions if sessions is not None else SessionTable()
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self._mechanism = ScramMechanism(MECHANISM)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS,
                                        thread_name_prefix="logbroker-console-login")
        self._slots = asyncio.Semaphore(WORKERS)
        self._waiting = 0
        self._inflight: dict[str, int] = {}  # throttle key -> logins being checked (<= QUEUE keys)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- sessions ----------------------------------------------------------------------------
    def principal(self, request: web.Request) -> "str | None":
        token = request.cookies.get(self.cookie)
        s = self.sessions.find(token)
        if s is None:
            return None
        users = self.auth.users
        cred = users.get(s.user) if users is not None else None
        if cred is None or not hmac.compare_digest(cred.stored_key, s.stored_key):
            self.sessions.close(token)
            log.info("console session of %s ended: the user was deleted or its password "
                     "changed", s.principal)
            return None
        return s.principal

    # -- HTTP ------------------------------------------------------------------------------------
    async def login_form(self, request: web.Request) -> web.StreamResponse:
        if self.principal(request) is not None:
            return _see_other("/")
        return _page()

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self.same_origin(request):
            return _page("login refused: the form was not posted from this console "
                         "(Origin header missing or foreign)", 403)
        ip = request.remote
        if (refused := self._blocked(ip)) is not None:
            return refused
        form = await request.post()
        user, password = form.get("user"), form.get("password")
        if not isinstance(user, str) or not isinstance(password, str):
            return _page("give a user name and a password", 400)
        # again: logins of this address failed while its body was read (sent at once,
        # they all passed the first check; the in-flight bound alone let a 7th through)
        if (refused := self._blocked(ip)) is not None:
            return refused
        key = key_of(ip)
        if self._waiting >= QUEUE or self._inflight.get(key, 0) >= PER_ADDRESS:
            log.warning("console login from %s refused: too many logins in progress", ip)
            return _page("too many logins in progress: try again in a moment", 503,
                         {"Retry-After": "1"})
        self._inflight[key] = self._inflight.get(key, 0) + 1
        try:
            stored_key, why = await self._verify(user, password)
        finally:
            left = self._inflight.pop(key) - 1
            if left:
                self._inflight[key] = left
        if why is not None:
            self.throttle.failed(ip)
            self.failed()
            log.warning("console login from %s as %r failed: %s", ip, user[:60], why)
            return _page(FAILED, 401)
        token = self.sessions.open(f"User:{user}", user, stored_key)
        log.info("console login from %s as User:%s", ip, user)
        resp = _see_other("/")
        resp.set_cookie(self.cookie, token, max_age=MAX_AGE_S, path="/", secure=self.secure,
                        httponly=True, samesite="Strict")
        return resp

    def _blocked(self, ip: "str | None") -> "web.StreamResponse | None":
        """The 429 refusal while ``ip`` is over its failed logins, else None."""
        if not self.throttle.blocked(ip):
            return None
        wait = self.throttle.retry_after(ip)
        log.warning("console login from %s refused: too many failed logins", ip)
        return _page(f"too many failed logins from your address: try again in {wait} s",
                     429, {"Retry-After": str(wait)})

    async def logout(self, request: web.Request) -> web.StreamResponse:
        if not self.same_origin(request):
            return _page("logout refused: not posted from this console", 403)
        if self.sessions.close(request.cookies.get(self.cookie)):
            log.info("console logout from %s", request.remote)
        resp = _see_other("/login")
        resp.del_cookie(self.cookie, path="/", secure=self.secure, httponly=True,
                        samesite="Strict")
        return resp

    def same_origin(self, request: web.Request) -> bool:
        scheme = "https" if self.secure else "http"
        origin = request.headers.get("Origin")
        return origin is not None and hmac.compare_digest(origin.encode("utf-8", "replace"),
                                                          f"{scheme}://{request.host}".encode(
                                                              "utf-8", "replace"))

    # -- the check ---------------------------------------------------------------------------
    async def _verify(self, user: str, password: str) -> tuple:
        """(stored key, None) for the right password, else (None, why)."""
        cred, why = self._credentials(user)
        if not password or len(password) > MAX_PASSWORD_CHARS:
            why = why or f"password of {len(password)} characters"
        self._waiting += 1
        try:
            async with self._slots:
                loop = asyncio.get_running_loop()
                salt, stored, _server, iterations = cred
                key = await loop.run_in_executor(self._pool, self._stored_key,
                                                 password[:MAX_PASSWORD_CHARS] or "-", salt,
                                                 iterations)
        finally:
            self._waiting -= 1
        if key is None:
            return None, why or "the password is not valid SCRAM input (saslprep)"
        if not hmac.compare_digest(key, stored) or why is not None:
            return None, why or "wrong password"
        return stored, None

    def _credentials(self, user: str) -> tuple:
        """(salt, stored key, server key, iterations), why it cannot succeed or None.
        Made up (costing the same PBKDF2) for an unknown user or a bad name."""
        try:
            check_user_name(user)
        except LogbrokerError:
            return ((secrets.token_bytes(16), b"", b"", DEFAULT_ITERATIONS),
                    "not a valid user name")
        users = self.auth.users
        known = users is not None and users.get(user) is not None
        return self.auth.credentials(user), None if known else "unknown user"

    def _stored_key(self, password: str, salt: bytes, iterations: int) -> "bytes | None":
        """StoredKey of ``password`` (a worker thread); None if saslprep refuses it."""
        try:
            return self._mechanism.make_auth_info(password, iteration_count=iterations,
                                                  salt=salt)[1]
        except (ScramException, ValueError, TypeError):
            return None


def _page(message: "str | None" = None, status: int = 200,
          headers: "dict | None" = None) -> web.Response:
    return web.Response(text=render(message), status=status, content_type="text/html",
                        headers=headers)


def _see_other(path: str) -> web.Response:
    """303 to one of the console's own paths (never a location taken from the request)."""
    return web.Response(status=303, headers={"Location": path})
