"""A connection's fetch session: Kafka's incremental fetch (KIP-227), kept
on the connection.

Without a session a consumer following P partitions names all P in every
Fetch and is answered about all P however few changed: O(P) of request
decoding, reads and answer decoding per fetch on both sides (one idle
follower of 10,000 partitions kept ~40% of a broker core busy). With one,
the broker remembers the partitions and where the client reads each, and
a fetch costs O(partitions that changed).

``Fetch.session_epoch``:

- **-1**: no session: every part asked and answered (older clients, tools,
  the Kafka listener's translation).
- **0**: open the connection's session with the request's parts (replacing
  any it had), answered like -1 but for the budget (below); the answer's
  ``session_epoch`` is 0.
- **k >= 1**: the session's next fetch, k one more than the last answered:
  ``parts`` holds only the partitions added or whose ``offset`` or
  ``max_bytes`` changed, ``forget`` the partitions leaving; the answer holds
  only the partitions with records, an error, or a high watermark, log start
  or (read committed) last stable offset other than the one last answered.
  Any other epoch (no session, one of its fetches in flight, a lost answer)
  is refused as a whole with INVALID_FETCH_SESSION_EPOCH: the client opens a
  new session.

A session's fetch reads the parts named (but for those named at the end
they were last told, of a log that has not moved since: ``to_read``),
then the ready ones in the order they became ready, until its
``max_bytes`` are spent (api/fetch.py): the
parts it did not reach are not answered, not even by the opening fetch,
and stay ready, first in line for the next fetch. So a fetch costs
O(parts it returns): a consumer asking ~1 MiB a fetch of 10,000 ready
partitions starts on its records after ~1 MiB was read, not all of them,
and each fetch after it goes on where the last stopped.

A partition answered with an error leaves the session (its client names it
again when it fetches it next). A part named at EARLIEST (-2) or LATEST
(-1) is held, from its first read on, at the offset that resolved to
(api/fetch.py ``resolved_offset``; ``pin``), and the answer says so. An
answer whose ``session_epoch`` is -1 (a broker without sessions, a quota's
empty answer, or no session opened for want of room) tells the client its
session is gone.

Cost: a session watches its partitions (``DataNotifier.watch``): one whose
data moved (a new high watermark) becomes *ready*; a fetch reads the
request's parts and the ready ones only, and a long poll waits for one to
become ready; in a cluster a replica that stops leading notifies too
(cluster/replicas.py), so its consumers learn NOT_LEADER at once. What no
notification announces (a topic deleted, retention moving the log start) is
found by a sweep of the session's partitions, ``SWEEP_SLICE`` of them at
most every ``SWEEP_S`` (a log lookup and two comparisons per partition, no
read): within a second for up to 2,000 partitions, 25 s for 50,000, at
~2,000 lookups a second whatever the session's size.

Why on the connection, not in Kafka's broker-wide cache of session ids: a
session ends with its connection (nothing to evict, no id to guess or
reuse), and our consumer keeps one connection per broker for fetching, so a
lost connection means a full fetch anyway. Bounded: the sessions of a broker
hold at most ``MAX_SESSION_PARTS`` partitions in all (the notifier counts
them); past it a session is not opened (answered with epoch -1) or, one
growing past it, closed.
"""

from __future__ import annotations

import asyncio
import time

from ..errors import InvalidFetchSessionEpochError, LogbrokerError

MAX_SESSION_PARTS = 200_000  # partitions in all the fetch sessions of a broker
SWEEP_S = 1.0  # a session sweeps at most this often...
SWEEP_SLICE = 2_000  # ...this many of its partitions, going on where the last sweep stopped


class _Part:
    """One partition of a session: where its client reads, and what it was last told."""

    __slots__ = ("offset", "max_bytes", "hw", "start", "lso")

    def __init__(self, offset: int, max_bytes: int) -> None:
        self.offset, self.max_bytes = offset, max_bytes
        self.hw = self.start = self.lso = -2  # never answered


class FetchSession:
    """The fetch session of one connection (module docstring). Loop only."""

    __slots__ = ("notifier", "parts", "ready", "epoch", "busy", "swept", "_sweep", "_wake",
                 "__weakref__")

    def __init__(self, notifier) -> None:
        self.notifier = notifier
        self.parts: dict[tuple[str, int], _Part] = {}
        self.ready: dict[tuple[str, int], None] = {}  # an ordered set: data moved since read
        self.epoch = 0  # the epoch the next request must name
        self.busy = False  # one of its fetches is being answered
        self.swept = time.monotonic()
        self._sweep: list = []  # the partitions the sweep has still to look at, last first
        self._wake: "asyncio.Future | None" = None

    # -- the notifier's side ----------------------------------------------------------------------
    def on_data(self, tp: tuple[str, int]) -> None:
        """``tp``'s data moved (DataNotifier.notify): read it next time."""
        self.ready[tp] = None
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Return once a partition became ready, or after ``timeout`` s."""
        if self.ready:
            return
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._wake, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._wake = None

    # -- requests ---------------------------------------------------------------------------------
    def open(self, parts) -> bool:
        """Hold ``parts`` (FetchPart); False (nothing held) when the broker's
        sessions have no room for them."""
        if self.notifier.watching + len(parts) > MAX_SESSION_PARTS:
            return False
        self._put(parts)
        return True

    def update(self, parts, forget) -> bool:
        """Apply an incremental request: ``parts`` added or changed, ``forget``
        gone. False (the session then holds nothing) past the broker's room."""
        for topic, partition in forget:
            self._drop((topic, partition))
        grows = sum(1 for p in parts if (p[0], p[1]) not in self.parts)
        if grows and self.notifier.watching + grows > MAX_SESSION_PARTS:
            self.close()
            return False
        self._put(parts)
        return True

    def _put(self, parts) -> None:
        held, watch = self.parts, self.notifier.watch
        for topic, partition, offset, max_bytes in parts:
            tp = (topic, partition)
            part = held.get(tp)
            if part is None:
                held[tp] = _Part(offset, max_bytes)
                watch(tp, self)
            else:
                part.offset, part.max_bytes = offset, max_bytes

    def _drop(self, tp: tuple[str, int]) -> None:
        if self.parts.pop(tp, None) is not None:
            self.notifier.unwatch(tp, self)
        self.ready.pop(tp, None)

    def sweep_due(self, now: float) -> bool:
        return now - self.swept >= SWEEP_S

    def sweep(self, meta, committed: bool, now: float) -> list:
        """Of the next ``SWEEP_SLICE`` partitions (a full round, then
        another), those whose log changed in a way no notification says
        (high watermark, log start, LSO) or that now fail (a topic
        deleted): looked up, not read."""
        self.swept = now
        todo = self._sweep
        if not todo:
            todo = self._sweep = list(reversed(self.parts))
        out, held, log_for = [], self.parts, meta.log_for
        for _ in range(min(SWEEP_SLICE, len(todo))):
            tp = todo.pop()
            part = held.get(tp)
            if part is None:  # forgotten meanwhile
                continue
            if _moved(part, tp, log_for, committed):
                out.append(tp)
        return out

    def pin(self, resolved: dict) -> None:
        """Hold the parts a read resolved (``(topic, partition) -> offset``)
        at those offsets: a long poll's next reads, and the next fetches,
        continue from there."""
        held = self.parts
        for tp, offset in resolved.items():
            part = held.get(tp)
            if part is not None:
                part.offset = offset

    def reading(self, first):
        """``(topic, partition, offset, max_bytes)`` (FetchPart) of the held
        partitions of ``first`` (an ordered set), then of the ready ones not
        among them, in the order they became ready; lazily: a reader that
        stops early (its bytes spent) costs only what it took. The ready
        set must not change while this is read."""
        held = self.parts
        for tp in first:
            part = held.get(tp)
            if part is not None:
                yield tp[0], tp[1], part.offset, part.max_bytes
        for tp in self.ready:
            if tp not in first:
                part = held.get(tp)
                if part is not None:
                    yield tp[0], tp[1], part.offset, part.max_bytes

    def to_read(self, tps: dict, meta, committed: bool) -> dict:
        """Of ``tps`` (an incremental fetch's named parts, an ordered set)
        those to read: a part named at the end it was last told (its high
        watermark; read committed, its LSO) of a log that has not moved
        since (high watermark, log start, LSO) has nothing to send or to
        say, and is held at its new offset unread. A consumer names in each
        fetch every part the last one returned, now at its end: read, each
        cost a lookup, a slice and an answer row of nothing (half the
        broker's reads of a backlog spread over 10,000 partitions). One that
        fails a lookup is read (its error is answered): ``_moved``, the
        sweep's test too."""
        held, log_for, out = self.parts, meta.log_for, {}
        for tp in tps:
            part = held.get(tp)
            if part is not None and part.offset >= 0 and \
                    part.offset == (part.lso if committed else part.hw) and \
                    not _moved(part, tp, log_for, committed):
                continue
            out[tp] = None
        return out

    def later(self, tps) -> None:
        """The held partitions of ``tps`` a fetch did not reach (its bytes
        ran out first) become ready: the next fetch reads them."""
        ready, held = self.ready, self.parts
        for tp in tps:
            if tp in held:
                ready[tp] = None

    def answered(self, parts: list, payload: list, lso_of: "dict | None", full: bool) -> tuple:
        """What to answer of a read of the session's partitions: every part
        when ``full`` (epoch 0), else those with bytes, an error, or offsets
        other than last answered; records what each was told. A part read
        without bytes that still has some below its limit (the answer's
        budget ran out first) stays ready; an errored part leaves the
        session. ``lso_of``: (topic, partition) -> LSO (read committed)."""
        out_parts, out_payload = [], []
        held, ready = self.parts, self.ready
        for part, data in zip(parts, payload):
            tp = (part.topic, part.partition)
            mine = held.get(tp)
            if mine is None:
                continue
            lso = -1 if lso_of is None else lso_of.get(tp, -1)
            limit = part.high_watermark if lso_of is None else lso
            if part.error:
                self._drop(tp)
            elif part.nbytes == 0 and 0 <= mine.offset < limit:
                ready[tp] = None  # not read for want of budget: next time
            else:
                ready.pop(tp, None)
            if full or part.error or part.nbytes or part.high_watermark != mine.hw \
                    or part.log_start != mine.start or (lso_of is not None and lso != mine.lso):
                out_parts.append(part)
                out_payload.append(data)
            mine.hw, mine.start, mine.lso = part.high_watermark, part.log_start, lso
        return out_parts, out_payload

    def close(self) -> None:
        """Forget every partition (the connection closed, or a new session replaces this one)."""
        unwatch = self.notifier.unwatch
        for tp in self.parts:
            unwatch(tp, self)
        self.parts.clear()
        self.ready.clear()
        self._sweep = []


def _moved(part: _Part, tp: tuple[str, int], log_for, committed: bool) -> bool:
    """Whether ``tp``'s log differs from what ``part``'s client was last
    told (high watermark, log start; read committed, LSO), or its lookup
    fails (its error is for the client to hear)."""
    try:
        lg = log_for(tp[0], tp[1])
        return lg.high_watermark != part.hw or lg.log_start_offset != part.start or \
            (committed and lg.last_stable_offset != part.lso)
    except LogbrokerError:
        return True


def session_for(conn, notifier, req) -> "FetchSession | None":
    """The session ``req`` fetches through: ``conn.fetch_session`` (the
    connection's, security/auth.Session), opened anew for epoch 0; None when
    the request asked for none or none could be opened. Raises
    InvalidFetchSessionEpochError for an epoch the session is not at."""
    epoch, fs = req.session_epoch, conn.fetch_session
    if epoch == 0:
        if fs is not None:
            if fs.busy:
                raise InvalidFetchSessionEpochError("session_epoch 0: a fetch of this "
                                                    "connection's session is in flight")
            fs.close()
            conn.fetch_session = None
        fs = FetchSession(notifier)
        if not fs.open(req.parts):
            return None
        conn.fetch_session = fs
        return fs
    if fs is None or fs.busy or epoch != fs.epoch:
        why = "no fetch session is open on this connection" if fs is None else \
            "a fetch of this session is in flight" if fs.busy else \
            f"the session is at epoch {fs.epoch}"
        raise InvalidFetchSessionEpochError(f"session_epoch {epoch}: {why}; open a new "
                                            "session with epoch 0")
    if not fs.update(req.parts, req.forget):
        conn.fetch_session = None
        return None
    return fs
