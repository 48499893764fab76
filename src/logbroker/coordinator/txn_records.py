"""The records of the transaction state topic (sans-I/O).

Kafka's ``__transaction_state`` shape: a compacted topic partitioned by
transactional id (``partition_for``, the groups' hash), one record per
transition of an id, keyed by the id so compaction keeps only its newest:

- key ``[1, transactional_id]`` (msgpack);
- value ``[producer_id, producer_epoch, last_producer_id,
  last_producer_epoch, timeout_ms, state, [[topic, partition], ...],
  start_ms, update_ms]`` (msgpack; state by its Kafka name);
- a tombstone (null value): the id expired (state Dead).

``read_batch`` skips a record it cannot parse with a warning (the log is
the brokers' own: damage or a bug, never a reason to stop loading).
"""

from __future__ import annotations

import logging

import msgpack

from .. import limits
from ..records.builder import build_batch
from ..records.decoder import decode_batch
from .records import partition_for  # noqa: F401 (the one hash of groups and transactional ids)
from .txn_state import DEAD, STATES, TxnState

log = logging.getLogger("logbroker.coordinator")

TOPIC = limits.TRANSACTION_STATE_TOPIC
_TXN = 1


def encode(states) -> bytes:
    """One batch holding a record per TxnState (a Dead one: a tombstone)."""
    return build_batch([_pair(s) for s in states])


def _pair(s: TxnState) -> tuple:
    key = msgpack.packb([_TXN, s.transactional_id])
    if s.state == DEAD:
        return (None, key)
    value = [s.producer_id, s.producer_epoch, s.last_producer_id, s.last_producer_epoch,
             s.timeout_ms, s.state, [[t, p] for t, p in s.parts], s.start_ms, s.update_ms]
    return (msgpack.packb(value), key)


def read_batch(data) -> list[TxnState]:
    """The records of one stored batch, in order (a tombstone: state Dead)."""
    out = []
    for rec in decode_batch(data).records():
        try:
            out.append(_parse(rec.key, rec.value))
        except (ValueError, TypeError, IndexError, KeyError, msgpack.UnpackException) as exc:
            log.warning("transaction state log: skipping an unreadable record (%s)", exc)
    return out


def _parse(key: bytes, value: "bytes | None") -> TxnState:
    k = msgpack.unpackb(key)
    if k[0] != _TXN:
        raise ValueError(f"unknown record kind {k[0]!r}")
    tid = str(k[1])
    if value is None:
        return TxnState(tid, -1, -1, 0, DEAD)
    pid, epoch, last_pid, last_epoch, timeout_ms, state, parts, start_ms, update_ms = \
        msgpack.unpackb(value)
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}")
    return TxnState(tid, int(pid), int(epoch), int(timeout_ms), str(state),
                    tuple((str(t), int(p)) for t, p in parts), int(start_ms), int(update_ms),
                    int(last_pid), int(last_epoch))
