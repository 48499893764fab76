"""Our side of one broker's fetch session (api/fetch_session.py has the
broker's and the rules): which partitions the broker holds for us, at which
offsets, and the epoch the next Fetch names. Sans-I/O: ``request`` turns
the partitions a fetch wants into what the Fetch carries, ``answered``
takes the answer's verdict.

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
    """What one Fetch carries (``session_epoch``, ``parts``, ``forget``) and
    the generation of every partition its answer may hold (``gens``)."""

    session_epoch: int
    parts: tuple
    forget: tuple
    gens: dict


class SessionBook:
    __slots__ = ("epoch", "held", "off_until")

    def __init__(self) -> None:
        self.epoch = 0  # the next request's: 0 opens a session
        self.held: dict[tuple[str, int], tuple] = {}  # tp -> (offset, max_bytes, gen) the broker holds
        self.off_until = 0.0  # until then (monotonic) no session is asked for

    def request(self, planned: list, now: "float | None" = None) -> Planned:
        """The Fetch for ``planned`` ``[((topic, partition, offset, max_bytes), gen)]``."""
        if (time.monotonic() if now is None else now) < self.off_until:
            return Planned(-1, tuple(p for p, _ in planned), (),
                           {(p[0], p[1]): g for p, g in planned})
        held, parts = self.held, []
        want = {}
        for part, gen in planned:
            tp = (part[0], part[1])
            entry = (part[2], part[3], gen)
            want[tp] = entry
            if held.get(tp) != entry:
                parts.append(part)
        forget = () if self.epoch == 0 else tuple(tp for tp in held if tp not in want)
        if self.epoch == 0:
            parts = [p for p, _ in planned]
        self.held = want
        return Planned(self.epoch, tuple(parts), forget, {tp: e[2] for tp, e in want.items()})

    def answered(self, sent: Planned, session_epoch: int, parts, now: "float | None" = None) -> None:
        """The answer to ``sent`` came, naming ``session_epoch`` and ``parts``
        (FetchedPart): partitions it carried bytes or an error for are named
        again next time; an answer without a session ends ours."""
        if sent.session_epoch < 0:
            return
        if session_epoch != sent.session_epoch:  # a broker without sessions, a quota's answer
            if sent.session_epoch == 0:
                self.off_until = (time.monotonic() if now is None else now) + NO_SESSIONS_S
            self.reset()
            return
        self.epoch = session_epoch + 1
        held = self.held
        for part in parts:
            if part.nbytes or part.error:
                held.pop((part.topic, part.partition), None)

    def reset(self) -> None:
        """The broker's session is gone (refused, a lost answer or connection): open a new one."""
        self.epoch = 0
        self.held = {}
