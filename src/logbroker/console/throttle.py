"""Failed console logins per client address, bounded (docs/console.md, "Security").

``LoginThrottle.blocked(ip)`` is True while the address has had
``max_failures`` failed logins within the last ``window_s`` seconds (a
fixed window starting at its first failure); ``failed(ip)`` counts one.
A blocked address is refused before any password is checked, so it costs
no PBKDF2. IPv6 addresses count per /64 (one host usually owns a whole
/64, and could otherwise rotate through it). At most ``capacity``
addresses are remembered: when full, expired windows are dropped, then the
oldest; so memory is bounded whatever the number of peers (a peer with
more addresses than ``capacity`` can make the table forget others
sooner: the per-login CPU bound, login.py, still holds).

Loop-only (not thread-safe); ``clock`` (monotonic seconds) is injectable.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from ..security.auth_throttle import key_of

MAX_FAILURES = 5
WINDOW_S = 60.0
CAPACITY = 10_000


class LoginThrottle:
    def __init__(self, max_failures: int = MAX_FAILURES, window_s: float = WINDOW_S,
                 capacity: int = CAPACITY, clock=time.monotonic) -> None:
        self.max_failures, self.window_s, self.capacity = max_failures, window_s, capacity
        self.clock = clock
        self._windows: "OrderedDict[str, list]" = OrderedDict()  # key -> [start, failures]

    def __len__(self) -> int:
        return len(self._windows)

    def blocked(self, ip: "str | None") -> bool:
        w = self._live(key_of(ip))
        return w is not None and w[1] >= self.max_failures

    def failed(self, ip: "str | None") -> None:
        key = key_of(ip)
        w = self._live(key)
        if w is None:
            self._make_room()
            self._windows[key] = [self.clock(), 1]
        else:
            w[1] += 1

    def retry_after(self, ip: "str | None") -> int:
        """Whole seconds until ``ip``'s window ends (0 when not blocked)."""
        w = self._live(key_of(ip))
        if w is None or w[1] < self.max_failures:
            return 0
        return max(1, int(w[0] + self.window_s - self.clock() + 0.999))

    def _live(self, key: str):
        w = self._windows.get(key)
        if w is not None and self.clock() - w[0] >= self.window_s:
            del self._windows[key]
            return None
        return w

    def _make_room(self) -> None:
        if len(self._windows) < self.capacity:
            return
        now = self.clock()
        for key in [k for k, (start, _) in self._windows.items() if now - start >= self.window_s]:
            del self._windows[key]
        while len(self._windows) >= self.capacity:
            self._windows.popitem(last=False)  # windows are opened in time order: the oldest
