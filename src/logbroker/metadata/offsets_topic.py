"""The internal topics as both metadata implementations host them: their
settings (``InternalTopic``: the offsets topic, the transaction state
topic), and the lag row of one committed offset read from the local log."""

from __future__ import annotations

from dataclasses import dataclass

from .. import limits
from ..errors import LogbrokerError
from ..protocol.parts import LagRow
from ..records import format as fmt
from ..storage.store import Store


@dataclass(frozen=True)
class InternalTopic:
    """An internal compacted topic a coordinator lives in, created on first
    use: its name, partition count, replication factor (capped by the live
    brokers) and segment size, from the broker's settings."""

    name: str
    partitions: int
    replication_factor: int
    segment_bytes: int

    def configs(self) -> dict:
        return {"cleanup_policy": "compact", "segment_bytes": self.segment_bytes}


def offsets_topic(config) -> InternalTopic:
    return InternalTopic(limits.OFFSETS_TOPIC, config.offsets_topic_num_partitions,
                         config.offsets_topic_replication_factor,
                         config.offsets_topic_segment_bytes)


def transaction_topic(config) -> InternalTopic:
    return InternalTopic(limits.TRANSACTION_STATE_TOPIC, config.transaction_state_num_partitions,
                         config.transaction_state_replication_factor,
                         config.transaction_state_segment_bytes)


def lag_row(store: Store, topic: str, partition: int, c, now: int) -> LagRow:
    """The LagRow of one committed offset: the log end is the high watermark, the lag in ms how
    long ago the next record to read was written (-1: caught up); -1 where
    the partition is not in ``store``, and for a negative committed offset
    (a reset request some Kafka clients commit: no position yet)."""
    try:
        lg = store.get_log(topic, partition)
        end = lg.high_watermark
    except LogbrokerError:
        return LagRow(topic, partition, c.offset, -1, -1, c.commit_ms, -1)
    if c.offset < 0:
        return LagRow(topic, partition, c.offset, end, -1, c.commit_ms, -1)
    lag = max(0, end - c.offset)
    return LagRow(topic, partition, c.offset, end, lag, c.commit_ms,
                  _lag_ms(lg, c.offset, now) if lag else -1)


def _lag_ms(lg, offset: int, now: int) -> int:
    try:
        data = lg.read(max(offset, lg.log_start_offset), 1, upto=lg.high_watermark)
    except LogbrokerError:
        return -1
    if len(data) < fmt.HEADER_SIZE:
        return -1
    return max(0, now - fmt.read_header(data).first_timestamp)
