"""Password guessing, throttled: failed SCRAM exchanges per client address
and per user name, on both listeners (docs/security.md, "Password guessing").

``AuthThrottle.wait(ip, user, now)`` is how long (seconds) an attempt from
``ip`` as ``user`` must wait before its proof may be checked (0: now), and
which limit holds it;
``failed(ip, user, now)`` counts one wrong proof; ``succeeded(ip, user,
now)`` remembers the address as one the user logs in from. The session
(auth.py) asks ``wait`` before it looks at a client-first message and
again just before it checks the proof, and refuses the exchange at once
(SASL_AUTHENTICATION_FAILED, then the connection closes) while it is not
0: a throttled attempt costs no credential lookup and no proof check, and
nothing ever sleeps on the loop. The check, the proof and the count
happen in one loop turn, so concurrent connections cannot overshoot.

Limits, each a virtual clock per key (GCRA, as security/quotas.py): a key
may fail ``BURST`` times at once, then ``rate`` times a second.

- per address (``per_ip``, default 10 a second; IPv6 per /64, as the
  console's login throttle): this bounds what one attacker's address can
  try, whatever user names it tries;
- per user (``per_user``, default 30 a second, three addresses' worth):
  this bounds a guessing run spread over many addresses. An address the
  user logged in from in the last ``KNOWN_S`` seconds is exempt from its
  user's limit (only its address's limit applies), so attackers elsewhere
  can neither lock the user out of the places it works from nor, from one
  address, lock it out anywhere: the per-user limit takes at least three
  addresses guessing flat out, and ends a second after they stop.

0 turns a limit off. Memory is bounded: at most ``CAPACITY`` keys per
table; when full, paid-up entries go first, then the oldest (a peer with
more addresses than that can make the table forget others sooner; the
per-user limit still holds). Loop-only, pure (``now``: the loop's time).
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict

log = logging.getLogger("logbroker.auth")
PER_IP, PER_USER = 10, 30  # failures a second (the defaults of auth_failures_per_s_per_*)
BURST = 5  # failures a key may make at once before its rate applies
KNOWN_S = 24 * 3600.0  # an address a user logged in from stays exempt from its user's limit
CAPACITY = 10_000  # keys remembered per table
WARN_EVERY_S = 1.0  # at most one warning line a second about throttled addresses


class FailureClock:
    """Failures per key at ``rate`` a second after a burst of ``BURST``
    (GCRA: each key's ``due`` is when its failures so far are paid for)."""

    __slots__ = ("rate", "capacity", "_due")

    def __init__(self, rate: float, capacity: int = CAPACITY) -> None:
        self.rate, self.capacity = rate, capacity
        self._due: "OrderedDict[str, float]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._due)

    def wait(self, key: str, now: float) -> float:
        """Seconds until ``key`` may fail once more (0: it may now)."""
        if not self.rate:
            return 0.0
        due = self._due.get(key)
        if due is None:
            return 0.0
        ahead = due - now - (BURST - 1) / self.rate
        return ahead if ahead > 0 else 0.0

    def failed(self, key: str, now: float) -> None:
        if not self.rate:
            return
        due = self._due.pop(key, None)
        if due is None:
            self._make_room(now)
        self._due[key] = (now if due is None else max(due, now)) + 1 / self.rate  # newest last

    def _make_room(self, now: float) -> None:
        if len(self._due) < self.capacity:
            return
        for key in [k for k, due in self._due.items() if due <= now]:
            del self._due[key]
        while len(self._due) >= self.capacity:
            self._due.popitem(last=False)


class AuthThrottle:
    """The broker's failure limits (module docstring); ``throttled``: the
    attempts refused so far (metrics count them through the session)."""

    def __init__(self, per_ip: float = PER_IP, per_user: float = PER_USER,
                 capacity: int = CAPACITY) -> None:
        self.per_ip = FailureClock(per_ip, capacity)
        self.per_user = FailureClock(per_user, capacity)
        self.capacity = capacity
        self._known: "OrderedDict[tuple, float]" = OrderedDict()  # (user, ip key) -> last login
        self._warned_at = float("-inf")
        self._quiet = 0  # throttled attempts not yet named in a warning line

    def wait(self, ip: "str | None", user: str, now: float) -> "tuple[float, str]":
        """Seconds before an attempt from ``ip`` as ``user`` may be checked
        (0: now), and the limit that holds it ("address" or "user"). A
        positive answer is a refusal: it is logged (a warning a second at
        most, the rest at debug)."""
        key = key_of(ip)
        by_ip = self.per_ip.wait(key, now)
        by_user = 0.0 if not user or self._is_known(user, key, now) else \
            self.per_user.wait(user, now)
        wait, which = max(by_ip, by_user), "address" if by_ip >= by_user else "user"
        if wait:
            self._log(ip, user, which, wait, now)
        return wait, which

    def failed(self, ip: "str | None", user: str, now: float) -> None:
        key = key_of(ip)
        self.per_ip.failed(key, now)
        if user and not self._is_known(user, key, now):
            self.per_user.failed(user, now)

    def succeeded(self, ip: "str | None", user: str, now: float) -> None:
        known = (user, key_of(ip))
        if self._known.pop(known, None) is None and len(self._known) >= self.capacity:
            self._known.popitem(last=False)
        self._known[known] = now

    def limit_of(self, which: str) -> float:
        return (self.per_ip if which == "address" else self.per_user).rate

    def _is_known(self, user: str, key: str, now: float) -> bool:
        seen = self._known.get((user, key))
        return seen is not None and now - seen < KNOWN_S

    def _log(self, ip, user: str, which: str, wait: float, now: float) -> None:
        self._quiet += 1
        if now - self._warned_at < WARN_EVERY_S:
            log.debug("authentication from %s as %r throttled (%s limit, %.2f s left)", ip,
                      user[:60], which, wait)
            return
        log.warning("authentication from %s as %r throttled: too many failed attempts for its "
                    "%s (at most %g a second; %d attempt(s) throttled since the last such line)",
                    ip, user[:60], which, self.limit_of(which), self._quiet)
        self._warned_at, self._quiet = now, 0


def key_of(ip: "str | None") -> str:
    """The address a throttle counts: IPv4 as is (IPv4-mapped IPv6 too),
    IPv6 by its /64 (one host usually owns a whole /64, and could otherwise
    rotate through it)."""
    if not ip:
        return "?"
    try:
        addr = ipaddress.ip_address(ip.strip("[]").split("%", 1)[0])
    except ValueError:
        return ip[:64]
    if addr.version == 4:
        return str(addr)
    if addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(ipaddress.ip_network(f"{addr}/64", strict=False))
