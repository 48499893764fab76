"""The console's login sessions: a bounded, expiring in-memory table
(docs/console.md, "Security").

``SessionTable.open(principal, user, stored_key)`` makes a session and
returns its token: 32 random bytes (``secrets``), URL-safe, given to the
browser as a cookie and never kept here (the table is keyed by the token's
SHA-256, so a dump of the broker's memory holds no usable cookie).
``find(token)`` returns the live session or None for an unknown, malformed
or expired token (idle for ``idle_s``, or older than ``max_age_s``; an
expired one is dropped on sight), and marks it used. ``close(token)``
forgets one (logout). At most ``capacity`` sessions: opening one more
drops the least recently used (only a successful login opens one, and
logins are rate limited, so a peer cannot churn the table without
passwords). Memory per session: a few hundred bytes.

Not thread-safe: used on the broker's loop only. ``clock`` (seconds,
monotonic) is injectable for the tests.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

IDLE_S = 30 * 60  # a session unused this long has ended
MAX_AGE_S = 8 * 3600  # and any session after this long (the cookie's Max-Age)
CAPACITY = 1_000
TOKEN_BYTES = 32
MAX_TOKEN_CHARS = 64  # token_urlsafe(32) is 43 characters


@dataclass
class Session:
    principal: str  # "User:NAME"
    user: str
    stored_key: bytes = field(repr=False)  # the credentials logged in with (a change ends it)
    opened: float
    used: float


class SessionTable:
    def __init__(self, capacity: int = CAPACITY, idle_s: float = IDLE_S,
                 max_age_s: float = MAX_AGE_S, clock=time.monotonic) -> None:
        self.capacity, self.idle_s, self.max_age_s, self.clock = capacity, idle_s, max_age_s, clock
        self._by_digest: "OrderedDict[bytes, Session]" = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._by_digest)

    def open(self, principal: str, user: str, stored_key: bytes) -> str:
        """A new session's token (the cookie's value)."""
        now = self.clock()
        while len(self._by_digest) >= self.capacity:
            self._by_digest.popitem(last=False)
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._by_digest[_digest(token)] = Session(principal, user, stored_key, now, now)
        return token

    def find(self, token: "str | None") -> "Session | None":
        """The live session of ``token``, or None (module docstring)."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        key = _digest(token)
        s = self._by_digest.get(key)
        if s is None:
            return None
        now = self.clock()
        if now - s.used > self.idle_s or now - s.opened > self.max_age_s:
            del self._by_digest[key]
            return None
        s.used = now
        self._by_digest.move_to_end(key)
        return s

    def close(self, token: "str | None") -> bool:
        """Forget ``token``'s session; False if there was none."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return False
        return self._by_digest.pop(_digest(token), None) is not None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
