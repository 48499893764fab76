"""The Spark reader's read path (src/logbroker/spark/scan.py ``read_split``)
called directly over hand-written segment files: exactly the right rows for
splits over big and small batches, ranges cutting batches, compacted gaps,
headers and pruned schemas; big batches yielded without a copy. One Spark
end-to-end test: a reused DataFrame keeps the snapshot of its first action."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from tests.support.fixtures import T0, fill, open_store  # noqa: E402
from logbroker.errors import CorruptRecordError  # noqa: E402
from logbroker.records import build_batch, decode_batch, stamp  # noqa: E402
from logbroker.records import format as fmt  # noqa: E402
from logbroker.spark import scan
from logbroker.spark.plan import SparkSourceError, Split  # noqa: E402
from logbroker.storage.segment import segment_name  # noqa: E402

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ALL = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def records(count: int, first: int, *, headers: bool, null_keys: bool, ts: int) -> list:
    out = []
    for i in range(count):
        key = None if null_keys and i % 2 else b"k%d" % ((first + i) % 5)
        hdrs = (("h", b"%d" % i), ("n", None)) if headers and i % 3 else ()
        out.append((b"v%d-" % (first + i) + b"x" * (i % 7), key, hdrs, ts + i))
    return out


# (records, headers, null keys, log append time): big ones (>= 10, i.e.
# max_rows // 2 of the splits below) go alone, runs of small ones are grouped
LAYOUT = [(1, False, False, False), (3, True, False, False), (30, True, True, False),
          (2, False, True, True), (2, True, False, False), (50, False, False, False),
          (7, True, True, False), (1, False, False, True), (40, True, False, True),
          (5, False, False, False), (5, True, True, False), (5, False, False, False),
          (9, True, False, False), (9, False, True, False), (9, False, False, False)]


def write_log(directory, layout=LAYOUT, gaps: int = 0, per_segment: int = 5) -> list[dict]:
    """Batches of ``layout`` in segment files of ``per_segment`` batches,
    ``gaps`` offsets skipped before each batch (a compacted log); returns
    every record as the reader must return it (all columns)."""
    os.makedirs(directory)
    expect, offset, fh = [], 0, None
    for b, (count, headers, null_keys, append_time) in enumerate(layout):
        if b % per_segment == 0:  # a segment's base stays where its first batch was before cleaning
            if fh:
                fh.close()
            fh = open(os.path.join(directory, segment_name(offset)), "wb")
        offset += gaps
        raw = build_batch(records(count, offset, headers=headers, null_keys=null_keys, ts=T0 + b * 100),
                          log_append_time=append_time)
        raw = stamp(raw, offset, 0) + raw[16:]
        fh.write(raw)
        batch = decode_batch(raw)
        kind = batch.header.timestamp_type
        for r in batch.records():
            expect.append({"key": r.key, "value": r.value, "topic": "t", "partition": 3, "offset": r.offset,
                           "timestamp": EPOCH + timedelta(milliseconds=r.timestamp),
                           "timestampType": kind,
                           "headers": [{"key": k, "value": v} for k, v in r.headers]})
        offset += count
    fh.close()
    return expect


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "d"), write_log(str(tmp_path / "d" / "t-3"))


def split(data_dir, start, end, **kw) -> Split:
    kw.setdefault("max_rows", 20)
    return Split(data_dir, "t", 3, start, end, **kw)


def read(s: Split) -> list:
    out = list(scan.read_split(s))
    for rb in out:
        assert rb.schema.equals(scan.split_schema(s))  # what PySpark checks of the first one
        assert 0 < rb.num_rows <= s.max_rows
        rb.validate(full=True)
    return out


def rows(batches, columns=ALL) -> list:
    got = [r for rb in batches for r in rb.to_pylist()]
    for r in got:
        assert list(r) == list(columns)
    return got


def expected(expect, start, end, columns=ALL) -> list:
    return [{c: r[c] for c in columns} for r in expect if start <= r["offset"] < end]


def test_every_range_returns_exactly_its_records(log_dir):
    data, expect = log_dir
    end = expect[-1]["offset"] + 1
    cuts = sorted({0, 1, 2, 4, 5, 20, 35, 36, 60, 86, 100, 110, 140, 145, 151, 160, 170, end - 1, end})
    for i, lo in enumerate(cuts):
        for hi in cuts[i + 1:]:
            s = split(data, lo, hi, include_headers=True)
            assert rows(read(s)) == expected(expect, lo, hi), (lo, hi)


def test_big_batches_are_yielded_alone_without_a_copy(log_dir, monkeypatch):
    data, expect = log_dir
    s = split(data, 0, len(expect), include_headers=True)
    read(s)  # grows the cached ranges and repeats first
    joins = []
    real = pa.concat_arrays
    monkeypatch.setattr(pa, "concat_arrays", lambda arrays, *a, **k: joins.append(len(arrays))
                        or real(arrays, *a, **k))
    sizes = [rb.num_rows for rb in read(s)]
    # 1+3 | 30 cut at max_rows | 2+2 | 50 cut | 7+1 | 40 cut | 5+5+5 | 9+9 | 9
    assert sizes == [4, 20, 10, 4, 20, 20, 10, 8, 20, 20, 15, 18, 9]
    assert len(joins) <= 5 * len(ALL) and all(n > 1 for n in joins)  # only the 5 groups copy
    joins.clear()
    big_only = split(data, 4, 34, include_headers=True)  # exactly the 30-record batch
    assert [rb.num_rows for rb in read(big_only)] == [20, 10] and joins == []
    assert rows(read(big_only)) == expected(expect, 4, 34)


def test_a_batch_of_many_bytes_goes_alone(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "d" / "t-3")
    with open(tmp_path / "d" / "t-3" / segment_name(0), "wb") as fh:  # 160 kB >= half of max_bytes
        fh.write(build_batch([(b"a" * 80_000, b"k", (), T0), (b"b" * 80_000, None, (), T0 + 1)]))
    joins = []
    monkeypatch.setattr(pa, "concat_arrays", lambda *a, **k: joins.append(1))
    got = read(split(str(tmp_path / "d"), 0, 2, max_rows=10_000, max_bytes=300_000))
    assert len(got) == 1 and joins == []
    assert got[0].column("value").to_pylist() == [b"a" * 80_000, b"b" * 80_000]
    assert got[0].column("key").to_pylist() == [b"k", None]


def test_byte_cap_cuts_big_and_small_batches(tmp_path):
    layout = [(40, True, False, False), (3, False, False, False), (3, False, False, False)]
    expect = write_log(str(tmp_path / "d" / "t-3"), layout=layout)
    s = split(str(tmp_path / "d"), 0, 46, max_rows=1000, max_bytes=120, include_headers=True)
    got = read(s)
    assert rows(got) == expected(expect, 0, 46)
    assert len(got) > 46 * 30 // 120 and max(rb.num_rows for rb in got) < 40


@pytest.mark.parametrize("columns", [("offset", "value", "headers"), ("topic", "partition"),
                                     ("key", "value"), ("timestampType", "timestamp", "key")])
def test_pruned_schemas(log_dir, columns):
    data, expect = log_dir
    for lo, hi in ((0, len(expect)), (3, 97), (36, 37)):
        s = split(data, lo, hi, columns=columns, include_headers="headers" in columns)
        got = read(s)
        assert [f.name for f in got[0].schema] == list(columns)
        assert rows(got, columns) == expected(expect, lo, hi, columns)


def test_compacted_gaps_are_skipped(tmp_path):
    expect = write_log(str(tmp_path / "d" / "t-3"), gaps=3)
    data, last = str(tmp_path / "d"), expect[-1]["offset"]
    offsets = [r["offset"] for r in expect]
    for lo, hi in ((0, last + 1), (1, last + 4), (offsets[4] - 1, offsets[40] + 1), (offsets[40] - 2, offsets[41])):
        s = split(data, lo, hi, compacted=True, include_headers=True)
        got = read(s)
        assert rows(got) == expected(expect, lo, hi)
        for rb in got:
            assert rb.column("offset").to_pylist() == sorted(rb.column("offset").to_pylist())
    with pytest.raises(SparkSourceError, match="missing from the segment files"):
        read(split(data, 0, last + 1))  # the same gaps in a topic that is not compacted: data loss
    assert list(scan.read_split(split(data, 0, 2, compacted=True))) == []  # only a gap


def test_offsets_come_from_a_cached_run_and_are_always_right():
    from logbroker.records.arrow import offsets_from

    for first, n in ((10, 5), (5, 3), (10, 70_000), (70_005, 10), (2**40, 3), (65_530, 20), (0, 0)):
        assert offsets_from(first, n).to_pylist() == list(range(first, first + n))


@pytest.mark.parametrize("batch_index", [1, 2])  # a grouped one and one yielded alone
def test_every_batch_is_crc_checked(tmp_path, batch_index):
    write_log(str(tmp_path / "d" / "t-3"), per_segment=100)
    path = tmp_path / "d" / "t-3" / segment_name(0)
    buf = bytearray(path.read_bytes())
    pos = 0
    for _ in range(batch_index):
        pos += fmt.read_header(bytes(buf), pos).size
    buf[pos + fmt.read_header(bytes(buf), pos).size - 1] ^= 0x01  # a record byte
    path.write_bytes(bytes(buf))
    with pytest.raises(CorruptRecordError, match="(?i)crc"):
        read(split(str(tmp_path / "d"), 0, 10_000))


@pytest.mark.spark
@pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                    reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_a_reused_dataframe_and_new_data(spark, tmp_path, engine):
    """The Python source (PythonDataSourceV2 caches the planned partitions):
    a DataFrame's second count() after appends gives the first count, a
    fresh load() re-plans. The JVM connector plans every action, as Spark's
    Kafka source does, so the same DataFrame sees the new high watermark."""
    from logbroker.spark import connector

    if engine == "jvm" and not connector.on_classpath(spark):
        pytest.skip(connector.why_python())
    s = fill(tmp_path / "data", partitions=1, batches=5)
    s.close()
    path = str(tmp_path / "data")
    load = spark.read.format("logbroker").option("path", path).option("subscribe", "orders") \
        .option("engine", engine).load
    df = load()
    assert df.count() == 50
    s = open_store(path, segment_bytes=4096, index_interval_bytes=512)
    lg = s.get_log("orders", 0)
    lg.append([build_batch([(b"late", None, (), T0)] * 7)])
    lg.set_high_watermark(lg.log_end_offset)
    s.close()  # checkpoints the new high watermark
    assert df.count() == (50 if engine == "python" else 57)
    assert load().count() == 57  # the fix: a fresh load() plans again
