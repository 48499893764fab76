"""Our side of one broker's fetch session (api/fetch_session.py has the
broker's and the rules): which partitions we want fetched from the broker,
which it holds for us and at which offsets, and the epoch the next Fetch
names. Sans-I/O: the fetcher says what it wants (``want`` / ``unwant``, as
partitions change), ``request`` turns the changes into what the next Fetch
carries, ``answered`` takes the answer's verdict. Every call is
O(partitions it names), never O(partitions wanted), but the opening fetch.

A partition is named in a request when the broker does not hold it at the
offset, ``max_bytes`` and generation wanted, and again after any answer
that carried its bytes or an error (the broker reads only the partitions
named and those with news, so a consumer that seeks back to the offset it
last named still gets its records again). Partitions held but no longer
wanted are forgotten. So an idle follower's Fetch names nothing and its
answer holds nothing: O(partitions that changed) on both sides.
"""

from __future__ import annotations

import time
from typing import NamedTuple

NO_SESSIONS_S = 60.0  # after a broker answered an opening without a session: full fetches this long


class Planned(NamedTuple):
    """What one Fetch carries (``session_epoch``, ``parts``, ``forget``)."""

    session_epoch: int
    parts: tuple
    forget: tuple


class SessionBook:
    __slots__ = ("epoch", "wanted", "held", "dirty", "off_until")

    def __init__(self) -> None:
        self.epoch = 0  # the next request's: 0 opens a session
        self.wanted: dict[tuple[str, int], tuple] = {}  # tp -> ((topic, partition, offset, max_bytes), gen)
        self.held: dict[tuple[str, int], tuple] = {}  # the same, as the broker holds it
        self.dirty: dict[tuple[str, int], None] = {}  # tps whose wanted and held may differ
        self.off_until = 0.0  # until then (monotonic) no session is asked for

    # -- what the fetcher wants ------------------------------------------------------------------
    def want(self, tp: tuple[str, int], part: tuple, gen: int) -> None:
        """Fetch ``part`` (topic, partition, offset, max_bytes) of generation ``gen``."""
        entry = (part, gen)
        if self.wanted.get(tp) != entry:
            self.wanted[tp] = entry
            self.dirty[tp] = None

    def unwant(self, tp: tuple[str, int]) -> None:
        if self.wanted.pop(tp, None) is not None:
            self.dirty[tp] = None

    def gen(self, tp: tuple[str, int]) -> int:
        """The generation of what an answer of the broker holds for ``tp`` (-1: nothing)."""
        entry = self.held.get(tp)
        return -1 if entry is None else entry[1]

    # -- a fetch ----------------------------------------------------------------------------------
    def request(self, now: "float | None" = None) -> Planned:
        """The next Fetch: with a session, the partitions changed and gone since
        the last one; without (``off_until``), every wanted partition."""
        wanted, held = self.wanted, self.held
        off = (time.monotonic() if now is None else now) < self.off_until
        if self.epoch == 0 or off:  # opening (or no session): everything wanted
            self.held, self.dirty = dict(wanted), {}
            return Planned(-1 if off else 0, tuple(p for p, _ in wanted.values()), ())
        parts, forget = [], []
        for tp in self.dirty:
            entry = wanted.get(tp)
            if entry is None:
                if held.pop(tp, None) is not None:
                    forget.append(tp)
            elif held.get(tp) != entry:
                held[tp] = entry
                parts.append(entry[0])
        self.dirty = {}
        return Planned(self.epoch, tuple(parts), tuple(forget))

    def answered(self, sent: Planned, session_epoch: int, parts, now: "float | None" = None) -> None:
        """The answer to ``sent`` came, naming ``session_epoch`` and ``parts``
        (FetchedPart): partitions it carried bytes or an error for are named
        again next time; an answer without a session ends ours."""
        if sent.session_epoch < 0:
            self.reset()  # the next fetch again names every partition
            return
        if session_epoch != sent.session_epoch:  # a broker without sessions, a quota's answer
            if sent.session_epoch == 0:
                self.off_until = (time.monotonic() if now is None else now) + NO_SESSIONS_S
            self.reset()
            return
        self.epoch = session_epoch + 1
        held, dirty = self.held, self.dirty
        for part in parts:
            if part.nbytes or part.error:
                tp = (part.topic, part.partition)
                held.pop(tp, None)
                dirty[tp] = None

    def reset(self) -> None:
        """The broker's session is gone (refused, a lost answer or connection): open a new one."""
        self.epoch = 0
        self.held, self.dirty = {}, {}
