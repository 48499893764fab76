"""Record batch codec: pure bytes, no I/O (docs/format.md)."""

from .builder import BatchBuilder, build_batch
from .decoder import Column, Record, RecordBatch, decode_batch
from .format import HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader, check_crc, read_header, stamp
from .walker import scan_batches

__all__ = [
    "BatchBuilder", "BatchHeader", "Column", "HEADER_SIZE", "LOG_OVERHEAD", "MAGIC", "Record",
    "RecordBatch", "build_batch", "check_crc", "decode_batch", "read_header", "scan_batches", "stamp",
]
