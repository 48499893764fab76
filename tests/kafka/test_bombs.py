"""Compression bombs against a real broker (issue 29, item 1; docs/security.md,
"Compression bombs"): a raw Kafka Produce of zstd and gzip batches that each
inflate to 255 MiB is refused with RECORD_TOO_LARGE within the request's
inflation budget, a rate-limited warning names the connection and the rule,
another client's round trips stay short meanwhile, and the broker's peak RSS
stays within the budget; our own listener refuses the same batch; ordinary
compressed batches still land, in the order sent; a legacy message set, a
compacted topic's records and a search by time are worked off the loop."""

from __future__ import annotations

import contextlib
import time

import pytest

from tests.support.bombs import GZIP, MiB, ZSTD, Pinger, api_versions, bomb, rss_peak
from tests.support.fixtures import RawConn
from tests.support.kafka_raw import Raw, kafka_broker
from logbroker.errors import RecordTooLargeError
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.protocol import messages as m
from logbroker.protocol.parts import ProducePart

BUDGET = 64 * MiB  # max_inflated_bytes_per_request's default
RULE = "max_inflated_bytes_per_request"


def _produce(raw: Raw, cid: int, topic: str, records: bytes, acks: int = 1) -> None:
    raw.sock.sendall(raw.send(0, 8, cid, {"transactional_id": None, "acks": acks,
                                          "timeout_ms": 30_000, "topic_data": [
                                              {"name": topic, "partition_data": [
                                                  {"index": 0, "records": records}]}]}))


def _answer(raw: Raw):
    _, resp = raw.recv(0, 8)
    return resp.responses[0].partition_responses[0]


@pytest.mark.parametrize("codec,count", [(ZSTD, 20), (GZIP, 2)], ids=["zstd", "gzip"])
def test_a_bomb_is_refused_within_budget_and_others_are_not_stalled(tmp_path, codec, count):
    records = bomb(codec, 255 * MiB) * count  # zstd: 20 x 8 KB = 165 KB; gzip: 2 x 260 KB
    with kafka_broker(tmp_path / "data") as (b, addr), \
            contextlib.closing(Raw(addr)) as ping, contextlib.closing(Raw(addr)) as attacker:
        round_trip = api_versions(ping)
        _produce(attacker, 1, "bomb", build_batch([KafkaRecord(0, 0, None, b"x")]))
        assert _answer(attacker).error_code == 0  # the topic exists: the bomb hits a real log
        before = rss_peak(b.pid)
        answers = []
        with Pinger(round_trip, every=0.002) as pinger:
            for cid in range(2, 6):  # four bombs on one connection: its credit paces them
                _produce(attacker, cid, "bomb", records)
                answers.append(_answer(attacker))
        peak = rss_peak(b.pid)
        assert {a.error_code for a in answers} == {RecordTooLargeError.code}
        assert RULE in answers[0].error_message and str(BUDGET) in answers[0].error_message
        pinger.check(at_least=50)  # unbounded, one such request stalled every client 0.8-24 s
        assert peak - before < BUDGET + 48 * MiB, (before >> 20, peak >> 20)
        warnings = [line for line in b.log().splitlines() if RULE in line and "WARNING" in line]
        assert len(warnings) == 1, warnings  # four refusals within LOG_EVERY_S: one line
        assert "User:ANONYMOUS" in warnings[0] and "127.0.0.1:" in warnings[0]
        # the connection goes on: an ordinary compressed batch lands after the refusals
        _produce(attacker, 9, "bomb", build_batch([KafkaRecord(0, 0, None, b"fine")],
                                                  compression=codec))
        ok = _answer(attacker)
        assert (ok.error_code, ok.base_offset) == (0, 1)


def test_our_listener_refuses_a_kafka_bomb_too(tmp_path):
    data = bomb(ZSTD, 255 * MiB) * 4
    with kafka_broker(tmp_path / "data") as (b, _addr):
        conn = RawConn(b.port)
        resp = conn.call(m.Produce(acks=1, timeout_ms=30_000,
                                   parts=(ProducePart("ours", 0, len(data)),), payload=(data,)))
        part = resp.parts[0]
        assert part.error == RecordTooLargeError.code and RULE in part.message


def test_pipelined_produces_keep_their_order_across_the_inflation_thread(tmp_path):
    """A compressed batch goes through the inflation thread, the plain one
    sent right behind it on the same connection does not: the connection
    holds its reading meanwhile, so they are stored in the order sent."""
    with kafka_broker(tmp_path / "data") as (_b, addr), contextlib.closing(Raw(addr)) as raw:
        zipped = build_batch([KafkaRecord(i, i, None, b"z%d" % i) for i in range(3)],
                             compression=ZSTD)
        plain = build_batch([KafkaRecord(0, 0, None, b"p")])
        _produce(raw, 1, "order", plain)
        assert _answer(raw).error_code == 0
        wire = b"".join(raw.send(0, 8, cid, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [
                {"name": "order", "partition_data": [{"index": 0, "records": rec}]}]})
            for cid, rec in ((2, zipped), (3, plain), (4, zipped), (5, plain)))
        raw.sock.sendall(wire)
        got = [_answer(raw) for _ in range(4)]
        assert [(a.error_code, a.base_offset) for a in got] == [(0, 1), (0, 4), (0, 5), (0, 8)]


def test_a_legacy_message_set_is_up_converted_off_the_loop(tmp_path):
    """Produce v2's gzip wrapper of a 15 MiB message (within the legacy
    budget, 16 MiB): converting it inflates, re-encodes and re-compresses
    all of it, in the inflation thread; the other client's round trips stay
    short (on the loop, this one stalled them 0.3 s; 60 MiB, 1.1 s)."""
    legacy = pytest.importorskip("kafka.record.legacy_records")
    builder = legacy.LegacyRecordBatchBuilder(magic=1, compression_type=GZIP, batch_size=1 << 27)
    assert builder.append(0, timestamp=1_000, key=None, value=bytes(15 * MiB)) is not None
    wrapper = bytes(builder.build())
    assert len(wrapper) < MiB
    with kafka_broker(tmp_path / "data") as (_b, addr), \
            contextlib.closing(Raw(addr)) as ping, contextlib.closing(Raw(addr)) as raw:
        raw.sock.settimeout(60)

        round_trip = api_versions(ping)
        with Pinger(round_trip, every=0.002) as pinger:
            raw.sock.sendall(raw.send(0, 2, 1, {"acks": 1, "timeout_ms": 30_000, "topic_data": [
                {"name": "legacy-bomb", "partition_data": [{"index": 0, "records": wrapper}]}]}))
            part = raw.recv(0, 2)[1].responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
        pinger.check(at_least=20)


def test_a_search_by_time_decodes_a_bounded_batch(tmp_path):
    """ListOffsets by time on a stored batch of 200,000 tiny records (zstd,
    2 MB inflated: within the produce budget): the search runs off the
    loop and decodes no batch of more than 10,000 records, so it lands on
    the batch's first offset at once; the other client's round trips stay
    short (decoded on the loop, it stalled them ~0.5 s per search)."""
    tiny = build_batch([KafkaRecord(i, 0, None, None) for i in range(200_000)],
                       base_timestamp=5_000, compression=ZSTD)
    with kafka_broker(tmp_path / "data") as (_b, addr), \
            contextlib.closing(Raw(addr)) as ping, contextlib.closing(Raw(addr)) as raw:
        raw.sock.settimeout(60)
        _produce(raw, 1, "tiny", build_batch([KafkaRecord(0, 0, None, b"a")], base_timestamp=1_000))
        assert _answer(raw).base_offset == 0
        _produce(raw, 2, "tiny", tiny)
        assert _answer(raw).base_offset == 1

        round_trip = api_versions(ping)
        found, deadline = [], time.monotonic() + 1.0
        with Pinger(round_trip, every=0.002) as pinger:
            for cid in range(3, 300):  # searches for a second (bounded by count too)
                raw.sock.sendall(raw.send(2, 1, cid, {"replica_id": -1, "topics": [
                    {"name": "tiny", "partitions": [{"partition_index": 0, "timestamp": 5_000}]}]}))
                found.append(raw.recv(2, 1)[1].topics[0].partitions[0])
                if time.monotonic() > deadline:
                    break
        assert {(p.error_code, p.offset) for p in found} == {(0, 1)}
        pinger.check(at_least=10)


def test_a_compacted_topic_walks_compressed_records_off_the_loop(tmp_path):
    """A compacted topic's records are walked (a key on each) on append:
    500,000 tiny keyed records in one zstd batch (400 KB) are walked in the
    inflation thread, the other client's round trips stay short (walked on
    the loop, they stalled them ~1 s)."""
    from logbroker import Admin

    batch = build_batch([KafkaRecord(i, 0, b"k", None) for i in range(500_000)], compression=ZSTD)
    with kafka_broker(tmp_path / "data") as (b, addr), \
            contextlib.closing(Raw(addr)) as ping, contextlib.closing(Raw(addr)) as raw:
        admin = Admin(b.bootstrap)
        try:
            admin.create_topic("compacted", 1, {"cleanup_policy": "compact"})
        finally:
            admin.close()
        raw.sock.settimeout(60)

        round_trip = api_versions(ping)
        with Pinger(round_trip, every=0.002) as pinger:
            _produce(raw, 1, "compacted", batch)
            part = _answer(raw)
        assert (part.error_code, part.base_offset) == (0, 0)
        pinger.check(at_least=10)
