"""The pure parts of our clients' transactions: the consumer's batch filter
(control batches, Kafka's aborted-transaction rule) and the transactional
producer's state machine."""

from __future__ import annotations

import pytest

from logbroker.client.consumer.txn_filter import CONTROL, TRANSACTIONAL, BatchFilter, txn_flags
from logbroker.client.producer.txn_state import (TransactionAbortableError, TxnState,
                                                  TxnStateMachine, classify)
from logbroker.errors import (ConcurrentTransactionsError, InvalidProducerEpochError,
                              InvalidTxnStateError, NotCoordinatorError, ProducerFencedError,
                              TopicAuthorizationFailedError)
from logbroker.records import format as fmt

OURS, KAFKA = fmt.MAGIC, fmt.KAFKA_MAGIC
TXN, CTRL = TRANSACTIONAL, TRANSACTIONAL | CONTROL
K_TXN, K_CTRL = fmt.KAFKA_TRANSACTIONAL, fmt.KAFKA_TRANSACTIONAL | fmt.KAFKA_CONTROL


def kept(batches, aborted=None, magic=OURS) -> list:
    """The base offsets of ``(base, last, producer_id, attributes)`` batches kept."""
    f = BatchFilter(aborted)
    return [b for b, last, pid, attrs in batches if not f.skip(magic, attrs, pid, last)]


def test_flags_of_both_magics():
    assert txn_flags(OURS, TXN) == (True, False)
    assert txn_flags(OURS, CTRL) == (True, True)
    assert txn_flags(OURS, 0) == (False, False)
    assert txn_flags(KAFKA, K_CTRL) == (True, True)
    assert txn_flags(KAFKA, K_TXN) == (True, False)
    assert txn_flags(KAFKA, 0x07) == (False, False)  # a codec, nothing transactional


def test_read_uncommitted_skips_only_control_batches():
    batches = [(0, 1, 7, TXN), (2, 2, 7, CTRL), (3, 5, -1, 0), (6, 6, 8, TXN), (7, 7, 8, CTRL)]
    assert kept(batches) == [0, 3, 6]
    assert kept(batches, aborted=[(7, 0)]) == [3, 6]  # read_committed: 7's are aborted


def test_aborted_transactions_dropped_until_their_marker():
    # producer 1: aborted txn at 0..3 (marker at 4), then a committed one at 5 (marker at 7);
    # producer 2 interleaved, committed; a non-transactional batch in between
    batches = [(0, 1, 1, TXN), (2, 2, 2, TXN), (3, 3, 1, TXN), (4, 4, 1, CTRL),
               (5, 5, 1, TXN), (6, 6, -1, 0), (7, 7, 1, CTRL), (8, 8, 2, CTRL)]
    assert kept(batches, aborted=[(1, 0)]) == [2, 5, 6]
    assert kept(batches, aborted=[]) == [0, 2, 3, 5, 6]


def test_an_aborted_transaction_starts_only_at_its_first_offset():
    # producer 3's earlier batches (before first_offset 10) belong to a committed transaction
    batches = [(0, 4, 3, TXN), (5, 5, 3, CTRL), (10, 12, 3, TXN), (13, 13, 3, CTRL),
               (14, 14, 3, TXN)]
    assert kept(batches, aborted=[(3, 10)]) == [0, 14]


def test_two_aborted_transactions_of_one_producer_and_kafka_bits():
    batches = [(0, 0, 5, K_TXN), (1, 1, 5, K_CTRL), (2, 2, 5, K_TXN), (3, 3, 5, K_CTRL),
               (4, 4, 5, K_TXN), (5, 5, 5, K_CTRL)]
    assert kept(batches, aborted=[(5, 2), (5, 0)], magic=KAFKA) == [4]


def test_a_range_ending_inside_an_aborted_transaction():
    batches = [(100, 109, 9, TXN), (110, 119, 9, TXN)]  # its marker lies past the answer
    assert kept(batches, aborted=[(9, 95)]) == []
    assert kept([(120, 120, 9, CTRL), (121, 121, 9, TXN)], aborted=[(9, 95)]) == [121]


def test_state_machine_happy_path_and_order_errors():
    sm = TxnStateMachine("t")
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        sm.begin()
    with pytest.raises(InvalidTxnStateError, match="open transaction"):
        sm.check_send()
    sm.begin_init()
    sm.initialized(42, 3)
    assert sm.state is TxnState.READY and (sm.producer_id, sm.producer_epoch) == (42, 3)
    sm.begin()
    sm.check_send()
    with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
        sm.begin()
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        sm.begin_init()
    assert not sm.started
    sm.partitions.add(("a", 0))
    assert sm.started
    sm.begin_commit()
    sm.begin_commit()  # a retry after a timeout resumes
    with pytest.raises(InvalidTxnStateError):
        sm.check_send()
    with pytest.raises(InvalidTxnStateError, match="abort"):
        sm.begin_abort()
    sm.completed()
    assert sm.state is TxnState.READY and not sm.partitions
    with pytest.raises(InvalidTxnStateError):
        sm.begin_commit()


def test_abortable_errors_need_an_abort_then_the_producer_goes_on():
    sm = TxnStateMachine("t")
    sm.begin_init()
    sm.initialized(1, 0)
    sm.begin()
    sm.failed(TopicAuthorizationFailedError("no"))
    assert sm.state is TxnState.ABORTABLE_ERROR
    for call in (sm.check_send, sm.begin_commit, sm.raise_failure):
        with pytest.raises(TransactionAbortableError, match="abort_transaction"):
            call()
    sm.begin_abort()
    sm.failed(TopicAuthorizationFailedError("late"))  # while aborting: the abort goes on
    assert sm.state is TxnState.ABORTING
    sm.completed()
    sm.begin()
    assert sm.state is TxnState.IN_TRANSACTION and sm.error is None


@pytest.mark.parametrize("fatal", [ProducerFencedError("newer"), InvalidProducerEpochError("old")])
def test_fatal_errors_refuse_everything_after(fatal):
    sm = TxnStateMachine("t")
    sm.begin_init()
    sm.initialized(1, 0)
    sm.begin()
    sm.begin_commit()
    sm.failed(fatal)
    assert sm.state is TxnState.FATAL_ERROR
    sm.failed(TopicAuthorizationFailedError("later"))  # stays fatal
    for call in (sm.check_send, sm.begin, sm.begin_commit, sm.begin_abort, sm.begin_init):
        with pytest.raises(type(fatal), match="failed for good"):
            call()


def test_classify():
    assert classify(ProducerFencedError()) == "fatal"
    assert classify(ConcurrentTransactionsError()) == "retriable"
    assert classify(NotCoordinatorError()) == "retriable"
    assert classify(TopicAuthorizationFailedError()) == "abortable"
    assert classify(TimeoutError()) == "abortable"


# -- the fetch buffer: skipped batches are never records, the position moves past them ----------
import struct  # noqa: E402

import crc32c  # noqa: E402

from logbroker.client.consumer.fetch_buffer import FetchBuffer  # noqa: E402
from logbroker.records.encoder import encode_batch  # noqa: E402


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def kafka_batch(base: int, values: list, producer_id: int, attributes: int) -> bytes:
    """A Kafka magic-2 batch (uncompressed) of ``values`` at ``base``."""
    body = b""
    for i, v in enumerate(values):
        rec = b"\0" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        body += _varint(len(rec)) + rec
    n = len(values)
    fields = [base, fmt.HEADER_SIZE - fmt.LOG_OVERHEAD + len(body), 0, KAFKA, 0, attributes,
              n - 1, 1000, 1000, producer_id, 0, 0, n]
    head = fmt.HEADER.pack(*fields)
    fields[4] = crc32c.crc32c(body, crc32c.crc32c(head[fmt.CRC_START:]))
    return fmt.HEADER.pack(*fields) + body


def ours(base: int, values: list) -> bytes:
    data = encode_batch([1000] * len(values), [None] * len(values), values, {})
    return struct.pack(">Q", base) + data[8:]


def absorb_and_take(read_committed: bool, chunk: bytes, aborted) -> tuple:
    buf = FetchBuffer(1 << 20, read_committed)
    buf.assign([("t", 0)])
    buf.seek("t", 0, 0)
    st = buf.states[("t", 0)]
    failed = buf.absorb([("t", 0, 0, "", 9, 0, len(chunk))], [st.gen], [chunk],
                        [("t", 0, 7, aborted)])
    assert not failed
    records = buf.take(100)
    return [(r.offset, r.value) for r in records], st.position, st.last_stable_offset


def test_fetch_buffer_skips_markers_and_aborted_batches_and_moves_past_them():
    chunk = (kafka_batch(0, [b"a0", b"a1"], 7, K_TXN) + ours(2, [b"plain"])
             + kafka_batch(3, [b"\0\0\0\0"], 7, K_CTRL) + kafka_batch(4, [b"c4"], 8, K_TXN)
             + kafka_batch(5, [b"\0\0\0\1"], 8, K_CTRL))
    assert absorb_and_take(True, chunk, [(7, 0)]) == ([(2, b"plain"), (4, b"c4")], 6, 7)
    records, position, _ = absorb_and_take(False, chunk, ())
    assert records == [(0, b"a0"), (1, b"a1"), (2, b"plain"), (4, b"c4")] and position == 6


def test_fetch_buffer_answer_of_markers_only_still_advances():
    chunk = kafka_batch(0, [b"x"], 7, K_TXN) + kafka_batch(1, [b"\0\0\0\0"], 7, K_CTRL)
    assert absorb_and_take(True, chunk, [(7, 0)]) == ([], 2, 7)


# -- arguments: refused at once, nothing started ------------------------------------------------
from logbroker import Consumer, Producer  # noqa: E402


@pytest.mark.parametrize("kwargs, error", [
    (dict(transactional_id=""), ValueError), (dict(transactional_id="a\nb"), ValueError),
    (dict(transactional_id=5), TypeError), (dict(transactional_id="t", acks=1), ValueError),
    (dict(transactional_id="t", idempotent=False), ValueError),
    (dict(transactional_id="t", transaction_timeout_ms=0), ValueError)])
def test_bad_transactional_settings(kwargs, error):
    with pytest.raises(error):
        Producer("127.0.0.1:1", **kwargs)


def test_bad_isolation_level_and_calls_out_of_place():
    with pytest.raises(ValueError, match="isolation_level"):
        Consumer("127.0.0.1:1", isolation_level="committed")
    with Producer("127.0.0.1:1") as plain:
        with pytest.raises(InvalidTxnStateError, match="transactional_id"):
            plain.begin_transaction()
    with Producer("127.0.0.1:1", transactional_id="t") as p:
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            p.send("t", b"x")
        with pytest.raises(InvalidTxnStateError, match="commit_transaction"):
            p.commit_transaction()
        with pytest.raises(TypeError, match="group_metadata"):
            p.send_offsets_to_transaction({("t", 0): 1}, 42)
    with Consumer("127.0.0.1:1") as c, pytest.raises(ValueError, match="group"):
        c.group_metadata()
