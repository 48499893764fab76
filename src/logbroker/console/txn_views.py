"""The console's transactions page as a pure function (docs/console.md,
"Transactions"): ``transactions(state, ids, counts, may_id, may_topic)``.

Two tables:

- **Coordinated**: the transactional ids this broker's transaction
  coordinator holds (``ids``: coordinator/txn_state.TxnState values, frozen,
  copied on the loop by state.txn_ids), those the user may describe
  (``may_id``), each with its state, producer id and epoch, timeout, the
  partitions of its transaction (those of topics the user may describe;
  ``hidden_partitions`` counts the others) and the age of its open
  transaction (Ongoing, PrepareCommit, PrepareAbort: from when it became
  Ongoing). Open ones first, oldest first, then by id; at most
  ``MAX_SHOWN`` rows (``total`` says how many there are).
- **Open on this broker's partitions**: every open transaction of a
  partition with a log here (``state.txns``, already narrowed to the
  topics the user may describe), oldest first, with the partition's LSO and
  how far it is behind the high watermark: what holds read_committed
  consumers back (a hanging transaction is one old here with no open
  coordinator entry).

``counts``: the coordinator's outcomes since the broker started
(committed, aborted, timed_out). Runs in the console's reader thread, not
on the loop: up to ``TxnSettings.max_ids`` (100,000) ids are sorted here.
"""

from __future__ import annotations

from .views import age_ms

MAX_SHOWN = 500  # coordinated ids a page lists
MAX_OPEN_SHOWN = 1000  # open partition transactions a page lists
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


def transactions(state, ids, counts: dict, may_id=None, may_topic=None) -> dict:
    """The page (module docstring); ``may_id(tid)`` / ``may_topic(name)``:
    None allows everything."""
    now = state.taken_ms
    shown = [s for s in ids if may_id is None or may_id(s.transactional_id)]

    def order(s):
        opened = s.state in OPEN_STATES and s.start_ms >= 0
        return (0, s.start_ms, s.transactional_id) if opened else (1, 0, s.transactional_id)

    shown.sort(key=order)
    coordinated = [_id_row(s, now, may_topic) for s in shown[:MAX_SHOWN]]
    open_rows = []
    for (topic, partition), (lso, open_) in state.txns.items():
        if not open_:
            continue
        log = state.logs.get((topic, partition))
        hw = None if log is None else log[1]
        for pid, epoch, first, opened in open_:
            open_rows.append({"topic": topic, "partition": partition, "producer_id": pid,
                              "producer_epoch": epoch, "first_offset": first,
                              "age_ms": age_ms(opened, now), "lso": lso, "hw": hw,
                              "lso_lag": None if hw is None else max(hw - lso, 0)})
    open_rows.sort(key=lambda r: (r["age_ms"] is None, -(r["age_ms"] or 0), r["topic"],
                                  r["partition"]))
    return {"coordinated": coordinated, "total": len(shown),
            "open_count": sum(1 for s in shown if s.state in OPEN_STATES),
            "partition_open": open_rows[:MAX_OPEN_SHOWN], "partition_open_total": len(open_rows),
            "counts": dict(counts)}


def _id_row(s, now: int, may_topic) -> dict:
    parts = [f"{t}-{p}" for t, p in s.parts if may_topic is None or may_topic(t)]
    opened = s.state in OPEN_STATES
    return {"transactional_id": s.transactional_id, "state": s.state,
            "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
            "timeout_ms": s.timeout_ms, "partitions": parts,
            "hidden_partitions": len(s.parts) - len(parts),
            "age_ms": age_ms(s.start_ms, now) if opened else None}
