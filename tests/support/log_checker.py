"""A Jepsen-style checker for the history of a replicated log (pure logic, no I/O).

Modelled on Jepsen's checker for Kafka-like logs (tests/kafka.clj, see
/work/shared/anchors.md): a run records every send with its outcome, every
consumer poll in order, and at the end a full read of every replica's log.
``check`` reports, each as a list of examples:

- ``lost``: acknowledged, but missing from some replica's final read (below
  the HW) at any offset.
- ``duplicated``: one value seen at two (partition, offset) positions, by any
  observation (ack, poll, final read).
- ``inconsistent``: one (partition, offset) seen holding two values across
  the acks, the polls and the replicas' final reads.
- ``divergent``: a (partition, offset) below the HW that some replicas hold
  and others do not.
- ``out_of_order``: a producer's acknowledged values on its partition (one
  producer, one partition, sent in ``seq`` order) acked at offsets, or found
  in the final read at offsets, that do not increase with ``seq``.
- ``nonmonotonic_poll``: within one consumer session, a partition's offsets
  not strictly increasing from poll to poll (or inside one poll).
- ``poll_skip``: within one consumer session, a partition jumped over
  offsets the final read holds (a record the consumer should have seen).
- ``phantom``: a value read (poll or final read) that nobody sent.
- ``acked_below_min_isr``: acknowledged during a window in which fewer than
  ``min_insync_replicas`` replicas were up (see ``Window``).
- ``not_on_quorum``: acknowledged before a two-down window ended but missing
  from the files of both down replicas (read while they were down), i.e.
  acknowledged with fewer than two copies.

Counts (not anomalies by themselves): ``acked``, ``failed`` (an error or
unknown outcome: indeterminate, a retried write may be in the log),
``indeterminate_written``, ``read_final`` (records per partition in the
final read), ``polled``, and ``unseen`` (acknowledged, never returned by a
poll: 0 once the consumers have caught up, else lag or a skip).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

OK, ERROR, UNKNOWN = "ok", "error", "unknown"

KINDS = ("lost", "duplicated", "inconsistent", "divergent", "out_of_order", "nonmonotonic_poll",
         "poll_skip", "phantom", "acked_below_min_isr", "not_on_quorum")


@dataclass(frozen=True)
class Send:
    """One record sent. ``producer`` is one producer thread, which sends to
    one partition in ``seq`` order; ``outcome`` OK (then ``offset`` is the
    acknowledged one), ERROR or UNKNOWN; ``ack_time`` when the answer came
    (any clock, the same as the windows')."""
    producer: str
    partition: int
    seq: int
    value: bytes
    outcome: str
    offset: "int | None" = None
    ack_time: "float | None" = None


@dataclass(frozen=True)
class Poll:
    """One poll of one consumer session: its records in the order returned.
    ``seek`` {partition: offset}: where the session was told to read from
    (no records): its next record of that partition must be at that offset
    (or the next one the final read holds)."""
    session: str
    records: tuple = ()  # of (partition, offset, value)
    seek: "dict | None" = None


@dataclass(frozen=True)
class Window:
    """A span [start, end) in which fewer than min_insync_replicas replicas
    were up: no ack may arrive in it. ``snapshots``: the down replicas' logs
    read while they were down, {broker: {partition: {offset: value}}}; every
    record acknowledged before ``end`` must be in one of them (with the one
    live replica, that makes the two copies min_insync_replicas=2 asks for).
    Empty ``snapshots``: only the ack timing is checked."""
    start: float
    end: float
    snapshots: dict = field(default_factory=dict)


@dataclass
class Report:
    anomalies: dict = field(default_factory=lambda: {k: [] for k in KINDS})
    counts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def found(self) -> dict:
        """{kind: number} of the kinds that occurred."""
        return {k: len(v) for k, v in self.anomalies.items() if v}

    def summary(self, examples: int = 3) -> str:
        lines = ["anomalies: " + (", ".join(f"{k}={n}" for k, n in self.found().items())
                                  or "none")]
        lines += [f"  {k}: {v[:examples]}" for k, v in self.anomalies.items() if v]
        lines.append("counts: " + ", ".join(f"{k}={v}" for k, v in self.counts.items()))
        return "\n".join(lines)


def check(sends, polls, final, hw: "dict | None" = None, windows=()) -> Report:
    """``sends``: Send records; ``polls``: Poll records in the order they
    happened; ``final``: {partition: {broker: {offset: value}}}, every
    replica's log read after healing; ``hw``: {partition: high watermark},
    the final read is judged below it (records at or above it are only
    counted); ``windows``: Window records."""
    report = Report()
    a = report.anomalies
    hw = hw or {}

    # the final read, below the HW
    below: dict = {}
    beyond = 0
    for p, replicas in final.items():
        limit = hw.get(p)
        below[p] = {}
        for b, log in replicas.items():
            kept = {o: v for o, v in log.items() if limit is None or o < limit}
            beyond += len(log) - len(kept)
            below[p][b] = kept

    # every observation of (partition, offset) -> value
    sent = {s.value: s for s in sends}
    acked = [s for s in sends if s.outcome == OK]

    def observations():
        """(partition, offset, value, source) of every ack, polled record and
        replica record below the HW."""
        for s in acked:
            yield s.partition, s.offset, s.value, "ack"
        for poll in polls:
            for p, o, v in poll.records:
                yield p, o, v, f"poll:{poll.session}"
        for p, replicas in below.items():
            for b, log in replicas.items():
                for o, v in log.items():
                    yield p, o, v, f"replica:{b}"

    first: dict = {}                   # (p, o) -> the first value seen there
    clashes: set = set()               # (p, o) seen with two values
    where: dict = defaultdict(set)     # value -> {(p, o)}
    for p, o, v, _ in observations():
        if first.setdefault((p, o), v) != v:
            clashes.add((p, o))
        where[v].add((p, o))
    if clashes:  # a second pass names the sources of each value
        named: dict = defaultdict(lambda: defaultdict(set))
        for p, o, v, source in observations():
            if (p, o) in clashes:
                named[(p, o)][v].add(source)
        for (p, o) in sorted(clashes):
            a["inconsistent"].append({"partition": p, "offset": o, "values": {
                v: sorted(srcs) for v, srcs in sorted(named[(p, o)].items())}})
    for v, places in where.items():
        if len(places) > 1:
            a["duplicated"].append({"value": v, "at": sorted(places)})
        if v not in sent:
            a["phantom"].append({"value": v, "at": sorted(places)})

    # divergent replicas and the values each replica holds
    values_on: dict = {}  # (p, broker) -> {value}
    for p, replicas in below.items():
        offsets = set().union(*(log.keys() for log in replicas.values())) if replicas else set()
        for o in sorted(offsets):
            missing = sorted(b for b, log in replicas.items() if o not in log)
            if missing:
                a["divergent"].append({"partition": p, "offset": o, "missing_on": missing})
        for b, log in replicas.items():
            values_on[(p, b)] = set(log.values())

    # lost: acknowledged, not in some replica's final read
    for s in acked:
        replicas = below.get(s.partition, {})
        missing = sorted(b for b in replicas if s.value not in values_on[(s.partition, b)])
        if missing or not replicas:
            a["lost"].append({"value": s.value, "partition": s.partition, "offset": s.offset,
                              "missing_on": missing or "no replica read"})

    # out of order: per producer, acknowledged values in seq order
    final_pos: dict = {}  # (p, value) -> offset, from any replica (inconsistencies reported above)
    for p, replicas in below.items():
        for log in replicas.values():
            for o, v in log.items():
                final_pos.setdefault((p, v), o)
    by_producer: dict = defaultdict(list)
    for s in acked:
        by_producer[(s.producer, s.partition)].append(s)
    for (producer, p), items in by_producer.items():
        items.sort(key=lambda s: s.seq)
        for what, pos in (("ack", lambda s: s.offset),
                          ("final", lambda s: final_pos.get((p, s.value)))):
            prev = None
            for s in items:
                o = pos(s)
                if o is None:
                    continue
                if prev is not None and o <= prev[1]:
                    a["out_of_order"].append({"producer": producer, "partition": p, "in": what,
                                              "earlier": (prev[0].seq, prev[1]),
                                              "later": (s.seq, o)})
                prev = (s, o)

    # polls: per session and partition, strictly increasing and no skips
    final_offsets = {p: sorted(set().union(*(log.keys() for log in r.values())) if r else set())
                     for p, r in below.items()}
    next_in_final = {p: {o: offs[i + 1] for i, o in enumerate(offs[:-1])}
                     for p, offs in final_offsets.items()}
    last: dict = {}
    polled = 0
    polled_values = set()
    for poll in polls:
        for p, o in (poll.seek or {}).items():
            # as if the offset before the seek's had been read: the next must follow it
            last[(poll.session, p)] = o - 1
            offs = final_offsets.get(p, [])
            i = bisect.bisect_left(offs, o)
            if i < len(offs):  # the first offset >= o the final read holds
                next_in_final.setdefault(p, {})[o - 1] = offs[i]
        for p, o, v in poll.records:
            polled += 1
            polled_values.add(v)
            key = (poll.session, p)
            prev = last.get(key)
            if prev is not None:
                if o <= prev:
                    a["nonmonotonic_poll"].append({"session": poll.session, "partition": p,
                                                   "from": prev, "to": o})
                else:
                    expected = next_in_final.get(p, {}).get(prev)
                    if expected is not None and expected < o:
                        a["poll_skip"].append({"session": poll.session, "partition": p,
                                               "from": prev, "to": o, "expected": expected})
            last[key] = o

    # windows with fewer than min_insync_replicas replicas up
    for w in windows:
        for s in acked:
            if s.ack_time is not None and w.start <= s.ack_time < w.end:
                a["acked_below_min_isr"].append({"value": s.value, "partition": s.partition,
                                                 "offset": s.offset, "ack_time": s.ack_time,
                                                 "window": (w.start, w.end)})
        if w.snapshots:
            for s in acked:
                if s.ack_time is None or s.ack_time >= w.end:
                    continue
                if not any(snap.get(s.partition, {}).get(s.offset) == s.value
                           for snap in w.snapshots.values()):
                    a["not_on_quorum"].append({"value": s.value, "partition": s.partition,
                                               "offset": s.offset, "ack_time": s.ack_time,
                                               "down": sorted(w.snapshots)})

    in_final = set()
    for p, replicas in below.items():
        for log in replicas.values():
            in_final.update(log.values())
    report.counts = {
        "sent": len(sends),
        "acked": len(acked),
        "failed": len(sends) - len(acked),
        "indeterminate_written": sum(1 for s in sends if s.outcome != OK and s.value in in_final),
        "read_final": {p: max((len(log) for log in r.values()), default=0)
                       for p, r in sorted(below.items())},
        "beyond_hw": beyond,
        "polled": polled,
        "unseen": sum(1 for s in acked if s.value not in polled_values),
    }
    return report
