"""A Fetch answer's records for a Kafka client: every batch as Kafka
RecordBatch v2 (docs/kafka.md §2, §3.3, §4).

Batches written by Kafka clients (magic 2) are stored as they were sent and
go out unchanged. A partition's slice whose batches are all Kafka batches
(``slice_kinds.KINDS`` tells, from the headers it walked, without reading
the slice) goes out as the file slice itself: ``sendfile`` on plain TCP,
read into the stream under TLS, exactly as our own listener sends a Fetch
(net/answering.py). A slice that holds a batch of ours (magic 1,
columnar) is read (``pread``) and its batches converted one by one:
decoded by ``records.decoder``, rebuilt by ``record_batch.build_batch`` with
the same base offset, timestamps, leader epoch, producer fields and
timestamp type, so a Kafka consumer sees the same offsets and records our
Consumer would; the runs of Kafka batches between them are passed through
as views, never copied twice. Either way the bytes start and end where the
slice does (whole batches from the first, the last one possibly cut by
``max_bytes``: Kafka clients drop that tail and fetch again).

``PATHS`` counts the partitions answered each way in this process
(``logbroker_kafka_fetch_slices_total``, docs/metrics.md).
"""

from __future__ import annotations

from ..errors import CorruptRecordError, StorageError
from ..records import format as fmt
from ..records.decoder import decode_batch
from ..records.walker import scan_fields
from ..storage.results import FileSlice
from .record_batch import TIMESTAMP_TYPE, KafkaRecord, build_batch
from .slice_kinds import KINDS

_F_MAGIC, _F_EPOCH = 3, 2  # indexes in format.read_fields' tuple (HEADER's order)
_NO_EPOCH = -1
SLICE, CONVERTED = "slice", "converted"
PATHS = {SLICE: 0, CONVERTED: 0}  # partitions with records answered each way (module docstring)


def kafka_records(data) -> tuple:
    """``(records, error code)`` for a partition's fetched ``data`` (a
    ``FileSlice`` or bytes of whole batches): the records to send (the
    ``FileSlice`` itself when it holds Kafka batches only; else bytes or a
    view, empty when nothing could be read) and 0, or the error of what
    could not be read (STORAGE_ERROR for a segment shorter than its slice,
    CORRUPT_RECORD for a batch that does not decode) with the batches
    before it."""
    if isinstance(data, FileSlice):
        if KINDS.kafka_only(data):
            PATHS[SLICE] += 1
            return data, 0
        PATHS[CONVERTED] += 1
        raw = data.read()
        if len(raw) != data.size:
            return b"", StorageError.code
    else:
        PATHS[CONVERTED] += 1
        raw = data
    view = memoryview(raw).cast("B")
    out, copied_to = [], 0  # pieces to send; bytes of ``view`` already in ``out``
    try:
        for pos, fields in scan_fields(view):
            if fields[_F_MAGIC] != fmt.MAGIC:
                continue  # a Kafka batch: sent as it lies, with its neighbours
            size = fields[fmt.F_BATCH_LENGTH] + fmt.LOG_OVERHEAD
            if pos > copied_to:
                out.append(view[copied_to:pos])
            out.append(to_kafka_batch(view[pos:pos + size], fields))
            copied_to = pos + size
    except CorruptRecordError:
        return _joined(out), CorruptRecordError.code
    if not out:
        return view, 0
    if copied_to < len(view):
        out.append(view[copied_to:])
    return _joined(out), 0


def _joined(pieces: list) -> bytes:
    return b"".join(pieces)


def to_kafka_batch(batch, fields: tuple) -> bytes:
    """One of our batches (magic 1, exactly its bytes) as a Kafka batch;
    raises ``CorruptRecordError``. An empty batch becomes nothing (b"").
    Our TRANSACTIONAL / CONTROL bits become Kafka's (0x10 / 0x20)."""
    decoded = decode_batch(batch, header=fmt.BatchHeader(*fields))
    h = decoded.header
    base, first = h.base_offset, h.first_timestamp
    records = [KafkaRecord(r.offset - base, r.timestamp - first, r.key, r.value, r.headers)
               for r in decoded.records()]
    if not records:
        return b""
    epoch = h.leader_epoch if h.leader_epoch < 1 << 31 else _NO_EPOCH
    return build_batch(records, base_offset=base, base_timestamp=first,
                       max_timestamp=h.max_timestamp, partition_leader_epoch=epoch,
                       producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                       base_sequence=h.base_sequence,
                       attributes=(TIMESTAMP_TYPE if h.timestamp_type else 0)
                       | (fmt.KAFKA_TRANSACTIONAL if h.attributes & fmt.TRANSACTIONAL else 0)
                       | (fmt.KAFKA_CONTROL if h.attributes & fmt.CONTROL else 0))
