"""Kafka batches (magic 2) read by every reader: our Consumer, compaction,
the Spark reader, inspect; batches built by kafka-python for each codec it
can write; a fuzz of the append-time check (docs/format.md §9)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fixtures import FAST, RawConn, consume, open_store
from logbroker import Consumer, Producer
from logbroker.cli.main import main
from logbroker.errors import CorruptRecordError, LogbrokerError
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.protocol import messages as m
from logbroker.records import decode_batch
from logbroker.records import format as fmt
from logbroker.records.decoder import readable
from logbroker.records.walker import batch_timestamps
from logbroker.storage.incoming import parse_batches
from tests.support.compaction import compact_all, open_compacted, records_of

T0 = 1_700_000_000_000


def kbatch(pairs, ts=T0, compression=0, headers=()) -> bytes:
    recs = [KafkaRecord(i, i, k, v, headers) for i, (k, v) in enumerate(pairs)]
    return build_batch(recs, base_timestamp=ts, compression=compression)


def send(conn, topic, raw) -> None:
    resp = conn.call(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                               parts=((topic, 0, len(raw)),), payload=(raw,)))
    assert resp.parts[0][2] == 0, resp


def test_consumer_reads_kafka_batches_next_to_ours(broker):
    conn = RawConn(broker.port)
    with Producer(broker.bootstrap, **FAST) as p:
        p.send("mix", b"ours-0", key=b"o", partition=0, timestamp_ms=T0 - 1)
        p.flush()
    expect = [("mix", 0, 0, T0 - 1, b"o", b"ours-0", ())]
    for codec in range(5):
        pairs = [(b"k%d" % i, b"v%d-%d" % (codec, i)) for i in range(3)] + [(None, None)]
        send(conn, "mix", kbatch(pairs, ts=T0 + 10 * codec, compression=codec,
                                 headers=(("h", b"%d" % codec),)))
        base = 1 + 4 * codec
        expect += [("mix", 0, base + i, T0 + 10 * codec + i, k, v, (("h", b"%d" % codec),))
                   for i, (k, v) in enumerate(pairs)]
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("mix", 0)])
        got = consume(c, len(expect))
        assert [tuple(r) for r in got] == expect
        c.seek(("mix"), 0, 7)  # inside a Kafka batch
        assert consume(c, 2)[0].offset == 7
        c.seek_to_timestamp(T0 + 21)
        assert c.position("mix", 0) == 10


def test_compaction_of_kafka_batches_keeps_newest_values_and_drops_tombstones(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(30):
            lg.append([kbatch([(b"k%d" % (i % 3), b"v%d" % i), (b"j", b"w%d" % i)],
                              ts=1_000, compression=i % 5)])
        lg.append([kbatch([(b"j", None)], ts=1_000)])  # a tombstone
        lg.roll()
        lg.append([kbatch([(b"k0", b"active")], ts=1_000)])
        before = records_of(lg)
        compact_all(s, now=1_500)  # tombstones kept (delete_retention_ms not passed yet)
        after = records_of(lg)
        latest = {}
        for offset, key, value in before:
            latest[key] = (offset, key, value)
        assert sorted(after) == sorted(latest.values())
        assert (60, b"j", None) in after
        compact_all(s, now=100_000)
        assert (60, b"j", None) not in records_of(lg)


def test_inspect_shows_kafka_batches_and_their_records(tmp_path):
    s = open_store(tmp_path / "data")
    s.create_topic("t")
    s.get_log("t", 0).append([kbatch([(b"k", b"hello"), (None, b"x")], compression=1)])
    s.close()
    out = CliRunner().invoke(main, ["inspect", str(tmp_path / "data"), "--records", "--verify"])
    assert out.exit_code == 0, out.output
    assert "magic=2 compression=gzip" in out.stdout
    assert f"record offset=0 timestamp={T0} key=b'k' value=b'hello' headers=[]" in out.stdout
    assert f"record offset=1 timestamp={T0 + 1} key=null value=b'x'" in out.stdout
    assert "PROBLEM" not in out.stdout


@pytest.mark.spark
def test_spark_reads_kafka_batches(spark, tmp_path):
    s = open_store(tmp_path / "data")
    s.create_topic("t")
    lg = s.get_log("t", 0)
    lg.append([kbatch([(b"a", b"1"), (None, b"2")], compression=4, headers=(("h", b"x"),))])
    lg.append([kbatch([(b"c", b"3")], ts=T0 + 5)])
    s.close()
    df = spark.read.format("logbroker").option("path", str(tmp_path / "data")) \
        .option("subscribe", "t").option("includeHeaders", "true").load()
    rows = [(r.key, r.value, r.offset, r.headers) for r in df.orderBy("offset").collect()]
    assert [(k, bytes(v), o) for k, v, o, _ in rows] == [(b"a", b"1", 0), (None, b"2", 1),
                                                         (b"c", b"3", 2)]
    assert [(h.key, bytes(h.value)) for h in rows[0][3]] == [("h", b"x")]


kafka_records = pytest.importorskip("kafka.record.default_records")
kafka_codec = pytest.importorskip("kafka.codec")
# kafka-python's codec numbers are Kafka's; each runs when its library is installed
THEIRS = [(1, kafka_codec.has_gzip()), (2, kafka_codec.has_snappy()),
          (3, kafka_codec.has_lz4()), (4, kafka_codec.has_zstd()), (0, True)]


@pytest.mark.parametrize("codec", [c for c, ok in THEIRS if ok])
def test_batches_built_by_kafka_python_are_stored_and_read(store_factory, codec):
    b = kafka_records.DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                                is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1,
                                                batch_size=1 << 20)
    for i in range(20):
        b.append(i, timestamp=T0 + i, key=b"k%d" % i if i % 4 else None,
                 value=b"value %d " % i * 20, headers=[("h", b"%d" % i)] if i % 2 else [])
    raw = bytes(b.build())
    s = store_factory()
    s.create_topic("t")
    lg = s.get_log("t", 0)
    lg.append([raw])
    recs = decode_batch(lg.read(0, 1 << 20)).records()
    assert [r.value for r in recs] == [b"value %d " % i * 20 for i in range(20)]
    assert [r.key for r in recs[:2]] == [None, b"k1"] and recs[3].headers == (("h", b"3"),)
    assert lg.offset_for_timestamp(T0 + 13).offset == 13


def _valid_batches():
    pairs = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=20)),
                               st.one_of(st.none(), st.binary(max_size=40))), min_size=1, max_size=6)
    return st.tuples(pairs, st.sampled_from(range(5)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_valid_batches(), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                  min_size=1, max_size=4), st.booleans())
def test_fuzz_mutated_kafka_batches_raise_only_our_errors(batch, flips, fix_crc):
    pairs, codec = batch
    raw = bytearray(kbatch(pairs, compression=codec))
    for at, value in flips:
        raw[16 + at % (len(raw) - 16)] = value  # never the stamped bytes
    if fix_crc:  # reach the record checks behind the CRC
        raw[fmt.CRC_OFFSET:fmt.CRC_START] = \
            fmt.compute_crc(raw, 0, len(raw)).to_bytes(4, "big")
    try:
        parsed = parse_batches(bytes(raw), max_batch_bytes=1 << 16)
    except LogbrokerError:
        return
    for mv, h in parsed:  # accepted: it reads, or decoding raises only our error: ours (a
        # flipped magic byte, outside the CRC) is checked on append for header and CRC only
        # (§5), a Kafka batch's records are not walked (decision 78): the broker's readers
        # then go by its header
        try:
            assert len(decode_batch(mv).records()) == h.record_count
        except CorruptRecordError:
            if h.magic == fmt.KAFKA_MAGIC:
                assert readable(mv) is None
                assert list(batch_timestamps(mv)()) == [h.max_timestamp] * h.record_count


def test_a_consumer_stops_at_malformed_kafka_records_and_seeks_past(broker):
    """A CRC-valid Kafka batch of malformed records is stored (decision 78);
    the Consumer returns every record before it, then raises a
    CorruptRecordError naming the offset and where to seek, as Kafka's
    consumer does; past it, reading goes on."""
    bad = build_batch([KafkaRecord(1, 0, b"k", b"x"), KafkaRecord(1, 0, b"k", b"y")],
                      base_timestamp=T0)  # offset deltas 1, 1
    conn = RawConn(broker.port)
    for raw in (kbatch([(b"a", b"1"), (b"b", b"2")], ts=T0), bad, kbatch([(b"c", b"3")], ts=T0)):
        send(conn, "bad", raw)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("bad", 0)])
        assert [r.value for r in consume(c, 2)] == [b"1", b"2"]
        with pytest.raises(CorruptRecordError, match="offset 2.*offset delta 1, expected 0.*"
                                                     "next readable offset is 4") as err:
            for _ in range(50):  # bounded: the error comes with the next fetch
                assert c.poll(0.2) == []
        assert (err.value.offset, err.value.next_offset) == (2, 4)
        assert c.position("bad", 0) == 2
        c.seek("bad", 0, err.value.next_offset)
        assert [(r.offset, r.value) for r in consume(c, 1)] == [(4, b"3")]
