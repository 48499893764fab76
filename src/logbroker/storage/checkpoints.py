"""Per-partition checkpoints, sealed-segment summaries and leader epochs.

A checkpoint is primary state: where recovery may start (the recovery point:
every byte before it was fsynced), the log start offset, the high watermark,
and, written only at a clean close, the log end and the active segment's
size so a clean reopen reads no segment data.

Segment summaries (``segs``) are derived: a sealed segment's size, max
timestamp and end offset, rebuilt by scanning the segment when missing.
Leader epochs: epoch -> first offset written in that epoch. They are stored
with checkpoints (and at once by truncation and recovery), not per append;
the batch headers carry the epoch, so recovery re-adds the epochs of the
batches it scans past the recovery point.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields

import msgpack

from .metastore import PID, PID_U64, MetaStore, delete_prefix, iter_prefix

_EPOCH_KEY = struct.Struct(">II")
_U64 = struct.Struct(">Q")


@dataclass(frozen=True)
class Checkpoint:
    recovery_point: int  # offset: every batch before it is fsynced
    rp_segment: int  # base offset of the segment holding the recovery point
    rp_position: int  # byte position of the recovery point in that segment
    log_start_offset: int
    high_watermark: int
    clean: bool = False  # the fields below are valid (written by a clean close)
    log_end_offset: int = 0
    active_segment: int = 0
    active_size: int = 0
    active_max_ts: int = -1
    active_created_ms: int = -1


@dataclass(frozen=True)
class SegmentInfo:
    size: int
    next_offset: int
    max_timestamp: int
    created_ms: int


def load_checkpoint(meta: MetaStore, pid: int) -> "Checkpoint | None":
    with meta.read() as txn:
        raw = txn.get(PID.pack(pid), db=meta.db("ckpt"))
    return None if raw is None else Checkpoint(**msgpack.unpackb(raw))


_CKPT_FIELDS = tuple(f.name for f in fields(Checkpoint))


def store_checkpoint(txn, meta: MetaStore, pid: int, ckpt: Checkpoint) -> None:
    # the fields by name, not dataclasses.asdict: its deep copy cost ~50 µs a partition
    value = {name: getattr(ckpt, name) for name in _CKPT_FIELDS}
    txn.put(PID.pack(pid), msgpack.packb(value), db=meta.db("ckpt"))


def load_segment_infos(meta: MetaStore, pid: int) -> dict[int, SegmentInfo]:
    with meta.read() as txn:
        return {PID_U64.unpack(key)[1]: SegmentInfo(*msgpack.unpackb(value))
                for key, value in iter_prefix(txn, meta.db("segs"), PID.pack(pid))}


def store_segment_info(txn, meta: MetaStore, pid: int, base: int, info: SegmentInfo) -> None:
    value = [info.size, info.next_offset, info.max_timestamp, info.created_ms]
    txn.put(PID_U64.pack(pid, base), msgpack.packb(value), db=meta.db("segs"))


def delete_segment_infos(txn, meta: MetaStore, pid: int, *, below: "int | None" = None,
                         from_: "int | None" = None) -> None:
    """Drop summaries of segments with base < ``below`` or base >= ``from_``."""
    prefix = PID.pack(pid)
    if below is not None:
        delete_prefix(txn, meta.db("segs"), prefix, stop=PID_U64.pack(pid, below))
    if from_ is not None:
        delete_prefix(txn, meta.db("segs"), prefix, start=PID_U64.pack(pid, from_))


def load_epochs(meta: MetaStore, pid: int) -> list[tuple[int, int]]:
    """Leader-epoch history: ``[(epoch, start offset)]`` ascending."""
    with meta.read() as txn:
        return [(_EPOCH_KEY.unpack(key)[1], _U64.unpack(value)[0])
                for key, value in iter_prefix(txn, meta.db("epochs"), PID.pack(pid))]


def store_epochs(txn, meta: MetaStore, pid: int, epochs: list[tuple[int, int]]) -> None:
    """Replace the stored history with ``epochs``."""
    delete_prefix(txn, meta.db("epochs"), PID.pack(pid))
    for epoch, start in epochs:
        txn.put(_EPOCH_KEY.pack(pid, epoch), _U64.pack(start), db=meta.db("epochs"))


def write_checkpoints(meta: MetaStore, parts: list, *, clean: bool) -> None:
    """Persist, in ONE LMDB transaction (one fsync of LMDB for all: the
    creation of many partitions, a clean close), the checkpoints of
    ``parts`` = [(pid, segs, index, epochs, txns)]: each from its
    ``Segments``, the pending index entries, new segment summaries, (if
    changed) the leader epochs and (``txns``, txn_store.Transactions) the
    transaction snapshot and aborted index; all or none is written.
    ``clean`` only at a clean close. On failure nothing is lost from
    memory: the summaries are put back for the next try."""
    taken = [(part, part[1].take_new_infos()) for part in parts]
    try:
        with meta.write() as txn:
            stored = [_write(txn, meta, *part, infos, clean) for part, infos in taken]
    except BaseException:
        for part, infos in taken:
            part[1].restore_new_infos(infos)
        raise
    for (part, _), epochs_stored in zip(taken, stored):
        if epochs_stored:  # only once the commit succeeded
            part[3].stored()


def _write(txn, meta: MetaStore, pid: int, segs, index, epochs, txns, infos: dict,
           clean: bool) -> bool:
    a, rp = segs.active, segs.recovery_point
    c = Checkpoint(rp.offset, rp.segment, rp.position, segs.log_start, segs.high_watermark,
                   clean, segs.log_end, a.base_offset, a.size, a.max_timestamp, a.created_ms)
    index.persist(txn)
    if txns is not None:
        txns.persist(txn, segs.log_end, rp.offset)
    for base, info in infos.items():
        store_segment_info(txn, meta, pid, base, info)
    delete_segment_infos(txn, meta, pid, below=segs.first.base_offset, from_=a.base_offset)
    store_checkpoint(txn, meta, pid, c)
    return epochs.store(txn, meta, pid)
