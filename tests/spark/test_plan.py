"""The Spark source's planning and reading, without a JVM: the reader's
partitions() and read() called directly over stores written by Store."""

from __future__ import annotations

import os
import pickle

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from tests.support.fixtures import T0, fill, open_store  # noqa: E402
from logbroker.records import build_batch  # noqa: E402
from logbroker.spark.plan import SparkSourceError  # noqa: E402
from logbroker.spark.source import LogbrokerReader, spark_schema  # noqa: E402




@pytest.fixture
def data(tmp_path):
    s = fill(tmp_path / "data")
    s.close()
    return str(tmp_path / "data")


def read_all(options) -> pa.Table:
    reader = LogbrokerReader(options)
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]
    batches = [rb for p in parts for rb in reader.read(p)]
    if not batches:
        return pa.table({"offset": pa.array([], pa.int64())})
    return pa.Table.from_batches(batches, batches[0].schema)


def test_reads_every_record_with_kafka_schema(data):
    t = read_all({"path": data, "subscribe": "orders", "includeHeaders": "true"})
    assert t.num_rows == 800
    assert t.schema.names == [f.name for f in spark_schema(True).fields]
    assert t.schema.field("key").type == pa.binary()
    assert t.schema.field("partition").type == pa.int32()
    assert t.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    rows = t.filter(pa.compute.equal(t["partition"], 1)).to_pylist()
    assert [r["offset"] for r in rows] == list(range(400))
    assert rows[123]["value"] == b"1-123" and rows[123]["key"] == b"k0"
    assert rows[123]["headers"] == [{"key": "h", "value": b"3"}]
    assert rows[123]["timestamp"].timestamp() * 1000 == T0 + 12 * 1000
    assert set(t["topic"].to_pylist()) == {"orders"}


def test_splits_are_cut_at_index_entries_and_cover_the_range(data):
    reader = LogbrokerReader({"path": data, "subscribe": "orders", "splitBytes": "3000"})
    splits = [p.split for p in reader.partitions()]
    assert len(splits) > 4
    for p in (0, 1):
        mine = [s for s in splits if s.partition == p]
        assert mine[0].start == 0 and mine[-1].end == 400
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    assert read_all({"path": data, "subscribe": "orders", "splitBytes": "3000"}).num_rows == 800


def test_min_partitions_and_batch_caps(data):
    reader = LogbrokerReader({"path": data, "assign": '{"orders":[0]}', "minPartitions": "7"})
    parts = reader.partitions()
    assert len(parts) == 7
    t = read_all({"path": data, "assign": '{"orders":[0]}', "minPartitions": "7"})
    assert sorted(t["offset"].to_pylist()) == list(range(400))
    sizes = [rb.num_rows for p in LogbrokerReader({"path": data, "subscribe": "orders",
                                                   "maxRecordsPerBatch": "33"}).partitions()
             for rb in LogbrokerReader({"path": data, "subscribe": "orders"}).read(p)]
    assert sum(sizes) == 800 and max(sizes) <= 10_000
    r = LogbrokerReader({"path": data, "subscribe": "orders", "maxRecordsPerBatch": "33",
                         "maxBytesPerBatch": "400"})
    got = [rb.num_rows for p in r.partitions() for rb in r.read(p)]
    assert sum(got) == 800 and max(got) <= 33 and len(got) > 800 // 33


def test_offsets_options(data):
    t = read_all({"path": data, "subscribe": "orders",
                  "startingOffsets": '{"orders":{"0":15,"1":-2}}',
                  "endingOffsets": '{"orders":{"0":27,"1":-1}}'})
    pairs = list(zip(t["offset"].to_pylist(), t["partition"].to_pylist()))
    offs = {p: sorted(o for o, q in pairs if q == p) for p in (0, 1)}
    assert offs[0] == list(range(15, 27)) and offs[1] == list(range(400))
    empty = {"path": data, "subscribe": "orders", "endingOffsets": '{"orders":{"0":0,"1":0}}'}
    assert read_all(empty).num_rows == 0


def test_timestamp_options(data):
    t = read_all({"path": data, "subscribe": "orders", "startingTimestamp": str(T0 + 5500),
                  "endingTimestamp": str(T0 + 9000)})
    assert sorted(set(t["offset"].to_pylist())) == list(range(60, 90))
    assert t.num_rows == 60
    assert read_all({"path": data, "subscribe": "orders",
                     "startingTimestamp": str(T0 + 10**9)}).num_rows == 0


def test_pattern_assign_and_errors(tmp_path, data):
    s = fill(tmp_path / "d2", topic="orders", partitions=1, batches=2)
    s.create_topic("payments", 1)
    s.create_topic("__consumer_offsets", 2)
    s.get_log("__consumer_offsets", 1).append(build_batch([(b"v", b"k")]))
    s.close()
    d2 = str(tmp_path / "d2")
    r = LogbrokerReader({"path": d2, "subscribePattern": "pay.*|ord.*"})
    assert {(p.split.topic, p.split.partition) for p in r.partitions()} == {("orders", 0)}
    r = LogbrokerReader({"path": d2, "subscribePattern": ".*"})  # internal topics by name only
    assert {p.split.topic for p in r.partitions()} == {"orders"}
    bad = [({"path": data}, "exactly one"),
           ({"path": data, "subscribe": "orders", "assign": '{"orders":[0]}'}, "exactly one"),
           ({"path": data, "subscribe": "nope"}, "unknown topic"),
           ({"path": data, "assign": '{"orders":[7]}'}, "unknown partition"),
           ({"path": data, "assign": "[0]"}, "assign must be JSON"),
           ({"path": str(tmp_path / "missing"), "subscribe": "x"}, "does not exist"),
           ({"path": str(tmp_path), "subscribe": "x"}, "not a logbroker data dir"),
           ({"subscribe": "x"}, "path"),
           ({"path": data, "subscribe": "orders", "startingOffsets": "soon"}, "startingOffsets"),
           ({"path": data, "subscribe": "orders", "failOnDataLoss": "maybe"}, "failOnDataLoss")]
    for opts, text in bad:
        with pytest.raises(SparkSourceError, match=text):
            LogbrokerReader(opts).partitions()


def test_reads_stop_at_checkpointed_high_watermark(tmp_path):
    s = fill(tmp_path / "data", partitions=1, batches=5)
    s.close()
    path = str(tmp_path / "data")
    reader = LogbrokerReader({"path": path, "subscribe": "orders"})
    parts = reader.partitions()
    s = open_store(path, segment_bytes=4096)  # a "broker" appends after planning
    lg = s.get_log("orders", 0)
    lg.append([build_batch([(b"late", None, (), T0)] * 5)])
    with open(lg.active.path, "ab") as fh:  # and leaves a torn tail
        fh.write(b"\x00" * 30)
    rows = [rb.num_rows for p in parts for rb in reader.read(p)]
    assert sum(rows) == 50
    s.close()


def test_corrupt_batch_is_an_error(data):
    seg = os.path.join(data, "orders-0", "00000000000000000000.log")
    with open(seg, "r+b") as fh:
        fh.seek(100)
        b = fh.read(1)
        fh.seek(100)
        fh.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(Exception, match="(?i)crc"):
        read_all({"path": data, "assign": '{"orders":[0]}'})


def test_retention_deleted_ranges(tmp_path):
    s = fill(tmp_path / "data", partitions=1)
    lg = s.get_log("orders", 0)
    lg.delete_before(200)
    lso = lg.log_start_offset
    lg.purge_deleted(now=1 << 62)
    s.close()
    path = str(tmp_path / "data")
    explicit = {"path": path, "subscribe": "orders", "startingOffsets": '{"orders":{"0":0}}'}
    with pytest.raises(SparkSourceError, match="deleted by retention"):
        read_all(explicit)
    t = read_all({**explicit, "failOnDataLoss": "false"})
    assert t["offset"].to_pylist() == list(range(lso, 400))
    assert read_all({"path": path, "subscribe": "orders"}).num_rows == 400 - lso
    # deleted between planning and reading
    reader = LogbrokerReader({"path": path, "subscribe": "orders"})
    parts = reader.partitions()
    for name in sorted(os.listdir(os.path.join(path, "orders-0")))[:2]:
        os.unlink(os.path.join(path, "orders-0", name))
    with pytest.raises(SparkSourceError, match="gone"):
        [rb for p in parts for rb in reader.read(p)]
    lenient = LogbrokerReader({"path": path, "subscribe": "orders", "failOnDataLoss": "false"})
    got = [rb for p in lenient.partitions() for rb in lenient.read(p)]
    assert 0 < sum(rb.num_rows for rb in got) < 400 - lso



def test_register_and_default_source_hook():
    import pyspark_logbroker
    import pyspark_logbroker_python
    from logbroker.spark import LogbrokerDataSource, register
    from logbroker.spark.source import LogbrokerPythonSource

    assert pyspark_logbroker.DefaultSource is LogbrokerDataSource
    assert pyspark_logbroker_python.DefaultSource is LogbrokerPythonSource
    assert LogbrokerDataSource.name() == "logbroker"
    assert LogbrokerPythonSource.name() == "logbroker_python"
    seen = []

    class FakeSession:
        class dataSource:  # noqa: N801 - mimics SparkSession.dataSource
            register = staticmethod(seen.append)

    register(FakeSession())
    assert seen == [LogbrokerDataSource, LogbrokerPythonSource]
    assert LogbrokerDataSource({"includeHeaders": "TRUE"}).schema() == spark_schema(True)


def test_spark_modules_import_only_records_and_storage():
    import subprocess
    import sys

    code = ("import sys, logbroker.spark.source, pyspark_logbroker, logbroker.spark.jobs;"
            "bad = [m for m in sys.modules if m.startswith('logbroker.') and m.split('.')[1] "
            "not in ('spark', 'records', 'storage', 'errors', 'limits', 'protocol')];"
            "assert not bad, bad;"
            "assert not any(m.startswith('logbroker.client') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_min_partitions_halves_get_index_hints(data):
    splits = [p.split for p in LogbrokerReader({"path": data, "assign": '{"orders":[1]}',
                                                "minPartitions": "4"}).partitions()]
    assert [(s.start, s.end) for s in splits] == [(0, 100), (100, 200), (200, 300), (300, 400)]
    assert all(s.hint_segment >= 0 for s in splits[1:])
    assert all(s.hint_segment <= s.start for s in splits)


def test_a_hole_in_the_middle_is_data_loss(data):
    reader = LogbrokerReader({"path": data, "assign": '{"orders":[0]}'})
    parts = reader.partitions()
    segs = sorted(os.listdir(os.path.join(data, "orders-0")))
    os.unlink(os.path.join(data, "orders-0", segs[len(segs) // 2]))
    with pytest.raises(SparkSourceError, match="missing from the segment files"):
        [rb for p in parts for rb in reader.read(p)]
    lenient = LogbrokerReader({"path": data, "assign": '{"orders":[0]}', "failOnDataLoss": "false"})
    offsets = [o for p in lenient.partitions() for rb in lenient.read(p)
               for o in rb.column("offset").to_pylist()]
    assert 0 < len(offsets) < 400 and offsets == sorted(set(offsets))


def test_a_given_schema_picks_columns(data):
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    by_name = {f.name: f for f in spark_schema(True).fields}

    def ddl(*cols):  # StructType.fromDDL needs a JVM
        return StructType([by_name[c] if isinstance(c, str) else c for c in cols])

    schema = ddl("offset", "value", "headers")
    reader = LogbrokerReader({"path": data, "assign": '{"orders":[1]}'}, schema)
    t = pa.Table.from_batches([rb for p in reader.partitions() for rb in reader.read(p)])
    assert t.schema.names == ["offset", "value", "headers"]
    assert t["offset"].to_pylist() == list(range(400))
    assert t["value"][123].as_py() == b"1-123"
    assert t["headers"][123].as_py() == [{"key": "h", "value": b"3"}]
    full = read_all({"path": data, "assign": '{"orders":[1]}', "startingOffsets": '{"orders":{"1":5}}'})
    some = LogbrokerReader({"path": data, "assign": '{"orders":[1]}', "startingOffsets": '{"orders":{"1":5}}'},
                           ddl("topic", "partition"))
    t2 = pa.Table.from_batches([rb for p in some.partitions() for rb in some.read(p)])
    assert t2.to_pylist() == full.select(["topic", "partition"]).to_pylist()
    for bad in (StructField("key", StringType()), StructField("nope", BinaryType()),
                StructField("offset", IntegerType()), StructField("value", BinaryType(), nullable=False)):
        with pytest.raises(SparkSourceError, match="pick from: key binary, value binary"):
            LogbrokerReader({"path": data, "subscribe": "orders"}, ddl(bad))
    with pytest.raises(SparkSourceError, match="at least one"):
        LogbrokerReader({"path": data, "subscribe": "orders"}, StructType([]))
