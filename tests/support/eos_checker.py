"""The exactly-once checker of a consume-transform-produce run (pure logic, no I/O).

A processor reads an input topic in a consumer group and, in one
transaction per step, writes one output record per input record (its value
names where it came from: input partition and offset) and commits the
input offsets it consumed. Faults kill it, the partitions' leaders and the
transaction coordinator. At the end of the run (everything healed, the
processor done) ``check`` is given:

- ``inputs``: every input record, ``{partition: [offset, ...]}``;
- ``committed``: the group's committed offset of each input partition;
- ``raw``: every output partition's batches as the log holds them, read
  with read_uncommitted (``Batch``: producer id, flags, marker kind,
  records), the ground truth of which transaction each record is in and
  how it ended;
- ``seen``: what a read_committed consumer returned, ``[(partition,
  offset)]`` in order per partition;
- ``origin(value)``: the (input partition, input offset) an output value
  names (None: not the processor's).

and reports, each as a list of examples (``KINDS``):

- ``duplicated``: one input record with more than one committed output;
- ``lost``: an input record below its partition's committed offset with no
  committed output;
- ``ahead_of_offsets``: a committed output of an input record at or past
  the committed offset (outputs and offsets not atomic);
- ``aborted_read``: the read_committed consumer returned a record of an
  aborted (or never ended) transaction;
- ``missed``: a committed record the read_committed consumer skipped;
- ``open``: a transaction with no marker at the end of the run (the
  coordinator should have ended every one);
- ``phantom``: a committed output naming no input record.

Counts (``counts``): inputs, committed outputs, aborted records, commit and
abort markers, transactions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

KINDS = ("duplicated", "lost", "ahead_of_offsets", "aborted_read", "missed", "open", "phantom")


@dataclass(frozen=True)
class Batch:
    """One batch of an output partition as stored. ``marker``: for a control
    batch, "commit" or "abort"; ``records``: ``[(offset, value)]`` (empty
    for a control batch)."""
    producer_id: int
    transactional: bool
    control: bool = False
    marker: str = ""
    records: tuple = ()


@dataclass
class Report:
    anomalies: dict = field(default_factory=lambda: {k: [] for k in KINDS})
    counts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> str:
        bad = {k: len(v) for k, v in self.anomalies.items() if v}
        return f"counts {self.counts}; anomalies {bad or 'none'}"


def outcomes(raw: dict) -> tuple[dict, list]:
    """``({(partition, offset): "commit" | "abort" | "open" | "plain"}, open
    transactions)`` from each partition's batches in log order: a
    transactional batch belongs to its producer's open transaction, ended by
    that producer's next marker."""
    fate: dict = {}
    still_open = []
    for partition, batches in raw.items():
        pending: dict = defaultdict(list)
        for b in batches:
            if b.control:
                for key in pending.pop(b.producer_id, ()):
                    fate[key] = b.marker
                continue
            keys = [(partition, off) for off, _ in b.records]
            if b.transactional:
                pending[b.producer_id].extend(keys)
            else:
                fate.update(dict.fromkeys(keys, "plain"))
        for pid, keys in pending.items():
            fate.update(dict.fromkeys(keys, "open"))
            still_open.append((partition, pid, keys[0][1]))
    return fate, still_open


def check(inputs: dict, committed: dict, raw: dict, seen: list, origin,
          limit: int = 20) -> Report:
    rep = Report()
    bad = rep.anomalies

    def note(kind: str, example) -> None:
        if len(bad[kind]) < limit:
            bad[kind].append(example)
        rep.counts[f"{kind}_total"] = rep.counts.get(f"{kind}_total", 0) + 1

    fate, still_open = outcomes(raw)
    for tx in still_open:
        note("open", tx)
    values = {(p, off): v for p, batches in raw.items() for b in batches for off, v in b.records}
    outputs: dict = defaultdict(list)  # input record -> its committed outputs
    for key, how in fate.items():
        if how not in ("commit", "plain"):
            continue
        src = origin(values[key])
        known = src is not None and src[1] in inputs.get(src[0], ())
        if not known:
            note("phantom", (key, values[key]))
            continue
        outputs[src].append(key)
    for src, outs in outputs.items():
        if len(outs) > 1:
            note("duplicated", (src, outs))
        if src[1] >= committed.get(src[0], 0):
            note("ahead_of_offsets", (src, committed.get(src[0], 0)))
    for p, offsets in inputs.items():
        upto = committed.get(p, 0)
        for off in offsets:
            if off < upto and (p, off) not in outputs:
                note("lost", (p, off))
    seen_set = set(seen)
    for key in seen:
        if fate.get(key) not in ("commit", "plain"):
            note("aborted_read", (key, fate.get(key, "unknown")))
    for key, how in fate.items():
        if how in ("commit", "plain") and key not in seen_set:
            note("missed", key)
    transactions = sum(1 for batches in raw.values() for b in batches if b.control)
    rep.counts.update(
        inputs=sum(len(v) for v in inputs.values()),
        committed_outputs=sum(len(v) for v in outputs.values()),
        aborted_records=sum(1 for how in fate.values() if how == "abort"),
        commit_markers=sum(1 for bs in raw.values() for b in bs if b.marker == "commit"),
        abort_markers=sum(1 for bs in raw.values() for b in bs if b.marker == "abort"),
        markers=transactions)
    return rep
