"""Transaction state machine of a partition (storage/txn_state.py) and the
control batch format (records/control.py): pure, no files."""

from __future__ import annotations

import pytest

from logbroker.errors import (CorruptRecordError, InvalidProducerEpochError, InvalidRecordError,
                              TransactionCoordinatorFencedError)
from logbroker.kafka.fetch_records import to_kafka_batch
from logbroker.records import format as fmt
from logbroker.records.builder import build_batch
from logbroker.records.control import marker_batch, marker_of_ours, read_marker
from logbroker.records.decoder import decode_batch
from logbroker.records.kafka_v2 import check_transactional
from logbroker.storage.txn_state import AbortedTxn, TxnState, replay


def header(pid=-1, epoch=-1, seq=-1, txn=False, base=0, count=1):
    raw = build_batch([b"v"] * count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      transactional=txn)
    h = fmt.read_header(raw)
    return fmt.BatchHeader(*(base, *list(fmt.HEADER.unpack_from(raw))[1:]))


def marker_header(pid, epoch, commit, coord, base):
    raw = bytearray(marker_batch(pid, epoch, commit, coord, 5))
    raw[:fmt.STAMP_SIZE] = fmt.stamp(raw, base, 0)
    return fmt.read_header(raw), bytes(raw)


@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch_both_layouts_read_back(commit):
    raw = marker_batch(7, 3, commit, 11, 1234)
    h = fmt.read_header(raw)
    fmt.check_crc(raw, 0, h)
    assert (h.magic, h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == \
        (2, 7, 3, -1, 1)
    assert fmt.txn_flags(h.magic, h.attributes) == (True, True) and h.is_control
    assert read_marker(raw) == (commit, 11)
    rec = decode_batch(raw).records()[0]  # every reader decodes it (Kafka's record layout)
    assert rec.key == bytes([0, 0, 0, int(commit)]) and rec.value == bytes([0, 0, 0, 0, 0, 11])
    ours = marker_of_ours(7, 3, commit, 11, 1234)
    ho = fmt.read_header(ours)
    fmt.check_crc(ours, 0, ho)
    assert ho.magic == 1 and fmt.txn_flags(1, ho.attributes) == (True, True)
    assert read_marker(ours) == (commit, 11)
    kafka = to_kafka_batch(ours, fmt.HEADER.unpack_from(ours))
    hk = fmt.read_header(kafka)
    assert hk.attributes & 0x30 == 0x30 and read_marker(kafka) == (commit, 11)
    data = build_batch([b"d"], producer_id=7, producer_epoch=3, base_sequence=0, transactional=True)
    hd = fmt.read_header(to_kafka_batch(data, fmt.HEADER.unpack_from(data)))
    assert (hd.magic, hd.attributes & 0x30, hd.producer_id) == (2, 0x10, 7)


def test_read_marker_refuses_what_is_no_marker():
    with pytest.raises(CorruptRecordError):
        read_marker(build_batch([b"x"]))
    bad = bytearray(marker_batch(1, 0, True, 0, 1))
    bad[fmt.HEADER_SIZE + 8] = 7  # the marker type's low byte (no CRC check here)
    with pytest.raises(CorruptRecordError, match="unknown marker"):
        read_marker(bytes(bad))


def test_flags_and_produce_rule_both_magics():
    assert fmt.txn_flags(1, fmt.TRANSACTIONAL) == (True, False)
    assert fmt.txn_flags(2, fmt.KAFKA_TRANSACTIONAL) == (True, False)
    assert fmt.txn_flags(2, fmt.TRANSACTIONAL) == (False, False)
    check_transactional(header(5, 0, 0, txn=True))
    with pytest.raises(InvalidRecordError):
        check_transactional(header(5, 0, -1, txn=True))
    with pytest.raises(InvalidRecordError):
        check_transactional(header(-1, -1, -1, txn=True))
    with pytest.raises(InvalidRecordError, match="control"):
        check_transactional(fmt.read_header(marker_batch(1, 0, True, 0, 0)))


def test_open_commit_abort_lso_and_aborted_entries():
    st = TxnState()
    assert st.first_unstable() is None
    st.on_batch(header(1, 0, 0, True, base=10), 10)
    st.on_batch(header(2, 0, 0, True, base=12), 12)
    st.on_batch(header(1, 0, 1, True, base=14), 14)  # same transaction: stays at 10
    assert st.open_transactions() == [(1, 0, 10), (2, 0, 12)] and st.first_unstable() == 10
    h, raw = marker_header(1, 0, True, 0, 20)
    assert st.on_batch(h, 20, raw) is None  # commit: nothing aborted
    assert st.first_unstable() == 12
    h, raw = marker_header(2, 0, False, 0, 21)
    assert st.on_batch(h, 21, raw) == AbortedTxn(2, 12, 21, 22)
    assert st.first_unstable() is None and st.open_transactions() == []
    h, raw = marker_header(3, 0, False, 0, 22)  # nothing open: written, no entry
    assert st.on_batch(h, 22, raw) is None and st.epoch_of(3) == 0


def test_abort_lso_is_the_oldest_still_open():
    st = TxnState()
    st.on_transactional(1, 0, 5)
    st.on_transactional(2, 0, 7)
    assert st.on_marker(2, 0, False, 0, 9) == AbortedTxn(2, 7, 9, 5)


def test_marker_fencing():
    st = TxnState()
    st.on_transactional(1, 4, 0)
    st.on_marker(1, 5, True, 3, 1)  # the epoch bumps with the marker
    assert st.epoch_of(1) == 5
    with pytest.raises(InvalidProducerEpochError):
        st.check_marker(1, 4, 3)
    with pytest.raises(TransactionCoordinatorFencedError):
        st.check_marker(1, 5, 2)
    st.check_marker(1, 5, 3)
    st.check_marker(2, 0, 0)
    with pytest.raises(InvalidProducerEpochError):
        st.check_marker(2, 0, 0, known_epoch=1)  # the idempotent state knows newer


def test_snapshot_round_trip_and_replay():
    st = TxnState()
    st.on_transactional(3, 1, 30)
    st.on_transactional(1, 0, 31)
    st.on_marker(9, 2, True, 4, 32)
    again = TxnState.from_snapshot(st.snapshot())
    assert again.open_transactions() == st.open_transactions()
    assert again.producers == st.producers
    h1, h2 = header(4, 0, 0, True, base=40), header(-1, base=41)
    mh, mraw = marker_header(4, 0, False, 0, 42)
    aborted = []
    replay(again, [(h1, None), (h2, None), (mh, lambda: mraw)], aborted.append)
    assert aborted == [AbortedTxn(4, 40, 42, 30)]


def test_forget_producers_keeps_open_ones():
    st = TxnState()
    for pid in range(10):
        st.on_marker(pid, 0, True, 0, pid)
    st.on_transactional(100, 0, 50)
    assert st.forget_producers(3) == 8
    assert 100 in st.producers and len(st.producers) == 3


def test_an_open_transaction_keeps_its_first_timestamp_through_a_snapshot():
    st = TxnState()
    st.on_transactional(1, 0, 5, 1_700_000_000_000)
    st.on_transactional(1, 0, 6, 1_700_000_009_000)  # a later batch: the first one's time stays
    st.on_transactional(2, 3, 7)  # unknown time
    assert st.open_detail() == [(1, 0, 5, 1_700_000_000_000), (2, 3, 7, -1)]
    again = TxnState.from_snapshot(st.snapshot())
    assert again.open_detail() == st.open_detail()
    old = {k: v for k, v in st.snapshot().items() if k != "opened"}  # written before it existed
    assert TxnState.from_snapshot(old).open_detail() == [(1, 0, 5, -1), (2, 3, 7, -1)]
    st.on_marker(1, 0, True, 0, 9)
    assert st.open_detail() == [(2, 3, 7, -1)] and 1 not in st.opened
