"""The inflation budget's logic (api/inflation.py, storage/incoming.inspect):
a request's budget shared by its batches, a connection's credit, the
warning gate, what ``inspect`` checks off the loop and what a Log then
takes from it; a follower's append never inflates."""

from __future__ import annotations

import time

import pytest

from tests.support.bombs import MiB, ZSTD, bomb
from logbroker.api.inflation import Budget, Credit, WarningGate
from logbroker.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.records import format as fmt
from logbroker.storage.incoming import inspect, inspection_bytes, kafka_sections, parse_batches


def zeros(n: int, codec: int, key: "bytes | None" = b"k") -> bytes:
    """A Kafka batch of one record of ``n`` zero bytes, compressed with ``codec``."""
    return build_batch([KafkaRecord(0, 0, key, bytes(n), (("h", b"v"),))], compression=codec)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_request_budget_is_shared_by_its_batches(codec):
    part = zeros(3 * MiB, codec) + zeros(3 * MiB, codec)
    budget = Budget(5 * MiB)
    got = inspect(part, max_batch_bytes=1 << 20, require_keys=False, budget=budget)
    assert isinstance(got.error, RecordTooLargeError) and budget.refused
    assert "max_inflated_bytes_per_request" in got.error.message and str(5 * MiB) in got.error.message
    assert budget.spent >= 5 * MiB and budget.left == 0
    # a later part of the same request gets nothing more
    again = inspect(zeros(10, codec), max_batch_bytes=1 << 20, require_keys=False, budget=budget)
    assert isinstance(again.error, RecordTooLargeError)
    with pytest.raises(RecordTooLargeError):
        parse_batches(got)


def test_within_budget_a_part_is_checked_once_and_taken_as_is():
    part = zeros(MiB, ZSTD) + build_batch([KafkaRecord(0, 0, b"k", b"plain")])
    budget = Budget(64 * MiB)
    got = inspect(part, max_batch_bytes=1 << 20, require_keys=True, budget=budget)
    assert got.error is None and budget.spent > MiB  # the compressed one only
    parsed = parse_batches(got, max_batch_bytes=1 << 20, require_keys=True)
    assert [h.record_count for _, h in parsed] == [1, 1]


def test_the_per_batch_limit_still_applies_below_the_budget():
    budget = Budget(64 * MiB)
    got = inspect(zeros(2 * MiB, ZSTD), max_batch_bytes=64 << 10, require_keys=False, budget=budget)
    assert isinstance(got.error, RecordTooLargeError) and not budget.refused  # 16 x 64 KiB


def test_a_compacted_topic_walks_the_inflated_records_off_the_loop():
    budget = Budget(64 * MiB)
    got = inspect(zeros(1000, ZSTD, key=None), max_batch_bytes=1 << 20, require_keys=True,
                  budget=budget)
    assert isinstance(got.error, InvalidRecordError)
    bad = bytearray(zeros(1000, ZSTD))
    bad[-3] ^= 0xFF  # the CRC no longer holds
    assert isinstance(inspect(bytes(bad), max_batch_bytes=1 << 20, require_keys=False,
                              budget=Budget(MiB)).error, CorruptRecordError)


def test_a_part_inspected_for_another_rule_is_checked_again():
    """The topic became compacted between the inspection and the append."""
    got = inspect(zeros(10, ZSTD, key=None), max_batch_bytes=1 << 20, require_keys=False,
                  budget=Budget(MiB))
    assert got.error is None
    with pytest.raises(InvalidRecordError):
        parse_batches(got, max_batch_bytes=1 << 20, require_keys=True)


def test_which_parts_are_inspected_and_their_size():
    plain = build_batch([KafkaRecord(0, 0, b"k", b"v")])
    zipped = zeros(10, ZSTD)
    assert inspection_bytes(zipped, False) == len(zipped) - fmt.HEADER_SIZE
    assert inspection_bytes(plain + zipped + zipped, False) == 2 * (len(zipped) - fmt.HEADER_SIZE)
    assert inspection_bytes(plain, False) == inspection_bytes(plain, True) == 0
    big_plain = build_batch([KafkaRecord(0, 0, b"k", bytes(100 << 10))])
    assert inspection_bytes(big_plain, True) > 100 << 10 and inspection_bytes(big_plain, False) == 0
    assert inspection_bytes(b"garbage", False) == 0  # the loop's check reports it


def test_only_a_part_holding_a_kafka_batch_is_looked_at_further():
    """``kafka_sections`` spares the common part (our batches only) the
    settings lookup and the header decode of ``inspection_bytes``."""
    from logbroker.records import build_batch as ours

    mine, zipped = ours([b"a", b"b"]), zeros(10, ZSTD)
    assert not kafka_sections(mine) and not kafka_sections(memoryview(mine + mine))
    assert kafka_sections(mine + zipped) and kafka_sections(zipped + mine)
    assert not kafka_sections(b"") and not kafka_sections(b"garbage")
    assert kafka_sections([mine])  # another form of a part: the full inspection decides


def test_a_connection_credit_makes_it_wait_once_in_debt():
    credit = Credit(rate=100 * MiB, depth=64 * MiB, now=0.0)
    assert credit.wait_s(0.0) == 0.0
    credit.spend(64 * MiB)
    assert credit.wait_s(0.0) == 0.0  # the burst: one full budget
    credit.spend(64 * MiB)
    assert credit.wait_s(0.0) == pytest.approx(0.64)
    assert credit.wait_s(0.64) == 0.0
    assert credit.wait_s(100.0) == 0.0 and credit.tokens == 64 * MiB  # never above its depth


def test_the_warning_gate_lets_one_line_through_per_period_and_counts_the_rest():
    gate = WarningGate(every=10.0)
    assert gate.allow(100.0) == 0
    assert gate.allow(101.0) is None and gate.allow(109.9) is None
    assert gate.allow(110.0) == 2


def test_a_follower_copies_a_bomb_without_inflating_it(store_factory):
    """append_replicated checks header and CRC only: a batch whose records
    would inflate past any limit (and the 256 MiB read limit) is taken as the
    leader stored it, at once."""
    s = store_factory()
    s.create_topic("t")
    lg = s.get_log("t", 0)
    batch = bytearray(bomb(ZSTD, 300 * MiB))
    with pytest.raises(RecordTooLargeError):
        lg.append([bytes(batch)])
    start = time.thread_time()
    info = lg.append_replicated([fmt.stamp(batch, 0, 0) + bytes(batch[fmt.STAMP_SIZE:])])
    assert info.last_offset == 0 and time.thread_time() - start < 0.2


def test_the_transactional_bit_is_found_in_every_form_of_a_part():
    """``api.produce.transactional`` (the ACL rule's look at a part) takes a
    part as the handler gets it: bytes, a compressed part checked off the
    loop (``Inspected``), a refused one (False: storage raises its error),
    an unconverted legacy set (``Convert``: no transactional bit)."""
    from logbroker.api.produce import transactional
    from logbroker.storage.incoming import Convert

    plain = zeros(10, 1)
    txn = build_batch([KafkaRecord(0, 0, b"k", b"v", ())], producer_id=7, producer_epoch=0,
                      base_sequence=0, attributes=fmt.KAFKA_TRANSACTIONAL, compression=1)
    budget = Budget(64 * MiB)
    assert transactional(plain + txn) and not transactional(plain)
    assert transactional(inspect(plain + txn, max_batch_bytes=1 << 20, require_keys=False,
                                 budget=budget))
    assert not transactional(inspect(plain, max_batch_bytes=1 << 20, require_keys=False,
                                     budget=budget))
    refused = inspect(txn[:-1], max_batch_bytes=1 << 20, require_keys=False, budget=budget)
    assert refused.error is not None and not transactional(refused)
    assert not transactional(Convert(b"\x00" * 80, lambda: txn))
    assert transactional([plain, txn]) and not transactional([plain])
