"""The JVM split reader (src/logbroker/spark/jvm, org.logbroker.spark.records)
against the Python one (logbroker.spark.scan.iter_batches): segment files
written with the project's own writers (our columnar batches, Kafka v2
batches in every codec), read by the Java ``Dump`` harness and by Python,
compared record by record and error message by error message, and both
checked against the records as they were written.

The Java sources are compiled once per module into a temporary directory;
each test starts one JVM for all its splits (``Dump`` takes several).
"""

from __future__ import annotations

import base64
import glob
import json
import logging
import os
import shutil
import struct
import subprocess

import pytest

pytest.importorskip("pyarrow")
pyspark = pytest.importorskip("pyspark")
cramjam = pytest.importorskip("cramjam")
if shutil.which("javac") is None or shutil.which("java") is None:
    if os.environ.get("LOGBROKER_JVM_REQUIRED") == "1":
        raise RuntimeError("the JVM connector's tests must run here (LOGBROKER_JVM_REQUIRED=1): "
                           "javac/java not installed")
    pytest.skip("javac/java not installed", allow_module_level=True)

import crc32c  # noqa: E402

from tests.support.fixtures import T0, fill  # noqa: E402
from logbroker.errors import CorruptRecordError  # noqa: E402
from logbroker.kafka.record_batch import KafkaRecord  # noqa: E402
from logbroker.kafka.record_batch import build_batch as build_kafka  # noqa: E402
from logbroker.records import build_batch, stamp  # noqa: E402
from logbroker.spark.options import SparkSourceError, Split  # noqa: E402
from logbroker.spark.scan import iter_batches  # noqa: E402
from logbroker.storage.segment import segment_name  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JVM_SRC = os.path.join(ROOT, "src", "logbroker", "spark", "jvm")
JARS = os.path.join(os.path.dirname(pyspark.__file__), "jars")
LOG4J = """status = error
appender.e.type = Console
appender.e.name = E
appender.e.target = SYSTEM_ERR
appender.e.layout.type = PatternLayout
appender.e.layout.pattern = %p %c %m%n
rootLogger.level = warn
rootLogger.appenderRef.e.ref = E
"""
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
XERIAL_BLOCKS, RAW_SNAPPY = "xerial-blocks", "raw-snappy"
BIG = 1_600_000  # two values of this size make a batch larger than the reader's 2 MiB window


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    """(classpath, log4j config) with the Java sources compiled as the build does."""
    out = tmp_path_factory.mktemp("jrec")
    classes = out / "classes"
    sources = sorted(glob.glob(os.path.join(JVM_SRC, "**", "*.java"), recursive=True))
    assert any(s.endswith("records/SplitReader.java") for s in sources)
    run = subprocess.run(["javac", "--release", "17", "-d", str(classes), "-cp", JARS + "/*", *sources],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    config = out / "log4j2.properties"
    config.write_text(LOG4J)
    return f"{classes}:{JARS}/*", str(config)


# -- writing segment files ------------------------------------------------------------------

def make_records(first: int, count: int, ts: int, *, null_keys=False, null_values=False,
                 headers=False, big=False) -> list:
    """``(value, key, headers, timestamp)`` records: empty values, unordered
    timestamps, headers with a null value and a non-ASCII key."""
    out = []
    for i in range(count):
        o = first + i
        key = None if null_keys and i % 2 else b"k%d" % o
        value = b"v%d-" % o + b"x" * (i % 7)
        if i % 5 == 4:
            value = b""
        if null_values and i % 3 == 1:
            value = None
        if big:
            value = bytes([o % 251]) * BIG
        hdrs = (("h", b"%d" % i), ("n", None), ("\u00e9t\u00e9", b"\xff\x00")) if headers and i % 3 else ()
        out.append((value, key, hdrs, ts + 7 * i - 3 * (i % 2)))
    return out


def ours(base: int, recs: list, append_time: bool = False) -> bytes:
    raw = build_batch(recs, log_append_time=append_time)
    return stamp(raw, base, 0) + raw[16:]


def kafka(base: int, recs: list, codec=NONE, append_time: bool = False) -> bytes:
    """A Kafka v2 batch; ``codec`` a Kafka code, or XERIAL_BLOCKS (xerial
    framing, several blocks) or RAW_SNAPPY (one raw block, as librdkafka)."""
    ts0 = recs[0][3]
    krecs = [KafkaRecord(i, t - ts0, k, v, h) for i, (v, k, h, t) in enumerate(recs)]
    attrs = 0x08 if append_time else 0
    if codec in (XERIAL_BLOCKS, RAW_SNAPPY):
        plain = build_kafka(krecs, base_offset=base, base_timestamp=ts0, attributes=attrs)
        section = plain[61:]
        if codec == RAW_SNAPPY:
            body = bytes(cramjam.snappy.compress_raw(section))
        else:
            body = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
            for at in range(0, len(section), 100):
                block = bytes(cramjam.snappy.compress_raw(section[at:at + 100]))
                body += struct.pack(">I", len(block)) + block
        return reframe(plain, body, SNAPPY)
    return build_kafka(krecs, base_offset=base, base_timestamp=ts0, attributes=attrs, compression=codec)


def reframe(batch: bytes, body: bytes, codec: int) -> bytes:
    """``batch``'s header over a new records section ``body`` compressed with ``codec``."""
    head = bytearray(batch[:61])
    struct.pack_into(">I", head, 8, 49 + len(body))
    struct.pack_into(">H", head, 21, struct.unpack_from(">H", head, 21)[0] | codec)
    struct.pack_into(">I", head, 17, crc32c.crc32c(bytes(head[21:]) + body))
    return bytes(head) + body


def recrc(batch: bytes) -> bytes:
    """``batch`` with its CRC recomputed (a malformed section that passes the CRC)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def b64(raw):
    return None if raw is None else base64.b64encode(raw).decode()


def expect_rows(base: int, recs: list, append_time: bool) -> list:
    """The records as written, in Dump's shape (the oracle neither reader computed)."""
    return [{"offset": base + i, "timestamp": t, "timestampType": int(append_time), "key": b64(k),
             "value": b64(v), "headers": [[hk, b64(hv)] for hk, hv in h]}
            for i, (v, k, h, t) in enumerate(recs)]


# (writer, codec, record count, options): the partition "t-0", in three segments
LAYOUT = [
    [(ours, None, 3, {}), (ours, None, 5, dict(headers=True, null_keys=True)),
     (kafka, NONE, 4, dict(headers=True)), (kafka, GZIP, 6, dict(null_keys=True, headers=True))],
    [(kafka, SNAPPY, 5, dict(null_values=True)), (kafka, RAW_SNAPPY, 4, dict(headers=True)),
     (kafka, XERIAL_BLOCKS, 30, dict(headers=True, null_values=True)),
     (ours, None, 1, dict(null_keys=True, null_values=True))],
    [(kafka, LZ4, 6, dict(headers=True)), (kafka, ZSTD, 6, dict(null_keys=True, append=True)),
     (ours, None, 40, dict(headers=True, null_values=True, append=True)),
     (ours, None, 2, dict(big=True)), (kafka, ZSTD, 3, dict(big=True)), (ours, None, 4, {})],
]


def write_partition(directory: str, layout=LAYOUT, gaps: int = 0) -> tuple[list, list]:
    """Write ``layout`` (a list of segments); returns (rows as written,
    [(segment base, position, base offset, path)] of every batch)."""
    os.makedirs(directory)
    rows, where, offset = [], [], 0
    for s, segment in enumerate(layout):
        path = os.path.join(directory, segment_name(offset))  # where it was before cleaning
        seg_base, pos = offset, 0
        with open(path, "wb") as fh:
            for b, (writer, codec, count, opts) in enumerate(segment):
                offset += gaps
                opts = dict(opts)
                append = opts.pop("append", False)
                recs = make_records(offset, count, T0 + 1000 * (10 * s + b), **opts)
                raw = ours(offset, recs, append) if writer is ours else kafka(offset, recs, codec, append)
                fh.write(raw)
                rows += expect_rows(offset, recs, append)
                where.append((seg_base, pos, offset, path))
                pos += len(raw)
                offset += count
    return rows, where


# -- both readers -----------------------------------------------------------------------------

def split(data_dir: str, start: int, end: int, topic: str = "t", **kw) -> Split:
    return Split(data_dir, topic, 0, start, end, **kw)


def as_json(s: Split, headers_only: bool = False, columns: "list | None" = None) -> str:
    obj = {"data_dir": s.data_dir, "topic": s.topic, "partition": s.partition,
           "start": s.start, "end": s.end, "hint_segment": s.hint_segment,
           "hint_position": s.hint_position, "fail_on_data_loss": s.fail_on_data_loss,
           "compacted": s.compacted, "headers_only": headers_only}
    if columns is not None:
        obj["columns"] = columns
    return json.dumps(obj)


def python_read(s: Split) -> tuple:
    """("ok", rows) or ("error", Java exception name, message), by iter_batches."""
    rows = []
    try:
        for header, batch in iter_batches(s):
            for r in batch.records():
                if s.start <= r.offset < s.end:
                    rows.append({"offset": r.offset, "timestamp": r.timestamp,
                                 "timestampType": header.timestamp_type, "key": b64(r.key),
                                 "value": b64(r.value), "headers": [[k, b64(v)] for k, v in r.headers]})
    except SparkSourceError as exc:
        return ("error", "DataLossException", exc.message)
    except CorruptRecordError as exc:
        return ("error", "CorruptRecordException", exc.message)
    return ("ok", rows)


def java_read(jvm, splits, headers_only: bool = False, columns: "list | None" = None) -> tuple[list, str]:
    """One JVM over ``splits``: per split ("ok", lines) or ("error", name, message); and stderr.
    ``columns``: per split, the columns to decode (None: all)."""
    classpath, config = jvm
    columns = columns or [None] * len(splits)
    args = [as_json(s, headers_only, c) for s, c in zip(splits, columns)]
    if len(args) == 1:
        args.append(args[0])  # the several-splits framing, always
    run = subprocess.run(["java", f"-Dlog4j2.configurationFile={config}", "-cp", classpath,
                          "org.logbroker.spark.records.Dump", *args],
                         capture_output=True, text=True, timeout=120)
    results, lines, failed = [], [], False
    for line in run.stdout.splitlines():
        obj = json.loads(line)
        if "split" in obj:
            if "error" in obj:
                results.append(("error", obj["error"], obj["message"]))
                failed = True
            else:
                assert obj["records"] == len(lines)
                results.append(("ok", lines))
            lines = []
        else:
            lines.append(obj)
    assert run.returncode == (2 if failed else 0), run.stderr
    for r in results:
        if r[0] == "error":
            assert f"ERROR {r[1]}: {r[2]}" in run.stderr
    return results[:len(splits)], run.stderr


def compare(jvm, splits) -> tuple[list, str]:
    """Java's results for ``splits``, asserted equal to Python's."""
    got, err = java_read(jvm, splits)
    for s, g in zip(splits, got):
        assert g == python_read(s), (s.start, s.end)
    return got, err


@pytest.fixture
def part(tmp_path):
    """(data dir, rows as written, batch positions) of the LAYOUT partition t-0."""
    data = str(tmp_path / "data")
    rows, where = write_partition(os.path.join(data, "t-0"))
    return data, rows, where


# -- tests ------------------------------------------------------------------------------------

def test_every_codec_and_layout_reads_as_written_in_any_range(jvm, part):
    data, rows, where = part
    end = rows[-1]["offset"] + 1
    bases = sorted({w[2] for w in where})
    cuts = sorted({0, 9, 13, 17, 26, 58, 64, 69, 110, end - 2, end})
    splits = [split(data, lo, hi) for i, lo in enumerate(cuts) for hi in cuts[i + 1:]]
    splits += [split(data, b, b + 1) for b in bases]
    got, _ = compare(jvm, splits)
    for s, g in zip(splits, got):
        want = [r for r in rows if s.start <= r["offset"] < s.end]
        assert g == ("ok", want), (s.start, s.end)
    full = got[splits.index(split(data, 0, end))][1]
    assert [r["offset"] for r in full] == list(range(end))
    assert any(r["key"] is None for r in full) and any(r["value"] is None for r in full)
    assert any(r["value"] == "" for r in full) and any(r["timestampType"] == 1 for r in full)
    assert any(h[1] is None for r in full for h in r["headers"])
    assert any(h[0] == "\u00e9t\u00e9" for r in full for h in r["headers"])
    assert any(r["value"] and len(r["value"]) > BIG for r in full)


def test_a_store_written_log_reads_as_python_reads_it(jvm, tmp_path):
    store = fill(tmp_path / "store", topic="orders", partitions=1, batches=30, per=7)
    store.close()
    data = str(tmp_path / "store")
    assert len(os.listdir(os.path.join(data, "orders-0"))) > 2  # several segments (and indexes)
    splits = [split(data, lo, hi, topic="orders") for lo, hi in ((0, 210), (3, 200), (100, 101))]
    got, _ = compare(jvm, splits)
    assert [r["offset"] for r in got[1][1]] == list(range(3, 200))
    assert base64.b64decode(got[2][1][0]["value"]) == b"0-100"


def test_a_hint_position_is_used_when_valid(jvm, part):
    data, rows, where = part
    seg_b = [w for w in where if w[0] == 18]
    pos_27 = next(pos for base, pos, off, _ in seg_b if off == 27)
    pos_23 = next(pos for base, pos, off, _ in seg_b if off == 23)
    path = seg_b[0][3]
    with open(path, "r+b") as fh:  # the segment's first batch gets an invalid header
        fh.seek(16)
        fh.write(b"\x09")
    want = [r for r in rows if 28 <= r["offset"] < 40]
    cases = [split(data, 28, 40, hint_segment=18, hint_position=pos_27),
             split(data, 28, 40, hint_segment=18, hint_position=pos_23),
             split(data, 28, 40),  # no hint: the walk meets the bad header
             split(data, 28, 40, hint_segment=18, hint_position=pos_27 + 1),  # not a header
             split(data, 22, 40, hint_segment=18, hint_position=pos_23),  # a batch after start
             split(data, 28, 40, hint_segment=0, hint_position=pos_27),  # another segment's
             split(data, 28, 40, hint_segment=18, hint_position=10 ** 9)]  # past the end
    got, _ = compare(jvm, cases)
    assert got[0] == got[1] == ("ok", want)
    bad = ("error", "CorruptRecordException", f"{path} byte 0: unknown magic 9")
    assert got[2:] == [bad] * 5


def test_a_corrupted_byte_is_a_crc_mismatch_naming_file_and_offset(jvm, part):
    data, rows, where = part
    targets = [w for w in where if w[2] in (3, 12, 69)]  # ours, Kafka gzip, ours (append time)
    for _, pos, _, path in targets:
        with open(path, "r+b") as fh:
            fh.seek(pos + 70)
            byte = fh.read(1)
            fh.seek(pos + 70)
            fh.write(bytes([byte[0] ^ 0x20]))
    splits = [split(data, 0, 10), split(data, 10, 14), split(data, 70, 75), split(data, 0, 3),
              split(data, 18, 69)]
    got, _ = compare(jvm, splits)
    for g, (_, pos, base, path) in zip(got, targets):
        assert g[:2] == ("error", "CorruptRecordException")
        assert g[2].startswith(f"{path} byte {pos} (offset {base}): CRC mismatch at position 0 "
                               f"(offset {base}): stored 0x")
    assert got[3] == ("ok", rows[:3])  # batches before the damage
    assert got[4] == ("ok", [r for r in rows if 18 <= r["offset"] < 69])


def test_malformed_sections_with_valid_crcs_fail_as_python_fails(jvm, tmp_path):
    recs = make_records(0, 4, T0, headers=True)
    good = kafka(0, recs)
    plain_ours = ours(0, recs)
    cases = {
        "short ours": recrc(plain_ours[:8] + struct.pack(">I", len(plain_ours) - 13) + plain_ours[12:-1]),
        "trailing ours": recrc(plain_ours[:8] + struct.pack(">I", len(plain_ours) - 11) + plain_ours[12:]
                               + b"\x00"),
        "kafka offset delta": build_kafka([KafkaRecord(0, 0, b"k", b"v"), KafkaRecord(5, 0, b"k", b"v"),
                                           KafkaRecord(2, 0, b"k", b"v")]),
        "header count": build_kafka([KafkaRecord(0, 0, b"k", b"v"), KafkaRecord(5, 0, b"k", b"v")]),
        "kafka trailing": reframe(good, good[61:] + b"\x00", NONE),
        "gzip garbage": reframe(good, b"\x1f\x8b\x08\x00" + b"\x00" * 30, GZIP),
        "gzip trailing": reframe(good, __import__("gzip").compress(good[61:]) + b"xy", GZIP),
        "zstd garbage": reframe(good, b"\x28\xb5\x2f\xfd" + b"\x01" * 20, ZSTD),
        "snappy xerial short": reframe(good, b"\x82SNAPPY\x00\x00\x00\x00\x01", SNAPPY),
        "snappy block past": reframe(good, b"\x82SNAPPY\x00" + struct.pack(">iiI", 1, 1, 999) + b"ab", SNAPPY),
    }
    data = str(tmp_path / "data")
    splits, messages = [], {}
    for p, (name, raw) in enumerate(cases.items()):
        os.makedirs(os.path.join(data, f"t{p}-0"))
        with open(os.path.join(data, f"t{p}-0", segment_name(0)), "wb") as fh:
            fh.write(raw)
        splits.append(split(data, 0, 2, topic=f"t{p}"))
    got, _ = compare(jvm, splits)
    for name, g in zip(cases, got):
        assert g[:2] == ("error", "CorruptRecordException"), name
        messages[name] = g[2].split("): ", 1)[-1]
    assert messages["short ours"] == "records section too short for header values"
    assert messages["trailing ours"] == "1 unexpected bytes at the end of the records section"
    assert messages["kafka offset delta"] == "Kafka record 1: offset delta 5, expected 1"
    assert messages["header count"].endswith(" byte 0: record count 2 / last offset delta 5 mismatch")
    assert messages["kafka trailing"] == "1 bytes after the last Kafka record"
    assert messages["gzip trailing"] == "2 bytes after the gzip stream"
    assert messages["snappy xerial short"] == "snappy (xerial) header cut short"
    assert messages["snappy block past"] == "snappy (xerial) block of 999 bytes runs past the data"


def test_compacted_gaps_are_skipped_and_elsewhere_are_data_loss(jvm, tmp_path, caplog):
    data = str(tmp_path / "data")
    layout = [[(ours, None, 3, {}), (kafka, ZSTD, 4, dict(headers=True))], [(ours, None, 5, {})]]
    rows, _ = write_partition(os.path.join(data, "t-0"), layout, gaps=2)
    offsets = [r["offset"] for r in rows]
    assert offsets == [2, 3, 4, 7, 8, 9, 10, 13, 14, 15, 16, 17]
    compacted = [split(data, 0, 18, compacted=True), split(data, 3, 12, compacted=True),
                 split(data, 5, 30, compacted=True)]
    got, _ = compare(jvm, compacted)
    assert got[0] == ("ok", rows)
    assert got[1] == ("ok", [r for r in rows if 3 <= r["offset"] < 12])
    assert got[2] == ("ok", [r for r in rows if r["offset"] >= 5])  # the end too is a gap
    strict = [split(data, 3, 12), split(data, 3, 12, fail_on_data_loss=False)]
    with caplog.at_level(logging.WARNING, logger="logbroker.spark"):
        got, err = compare(jvm, strict)
    assert got[0] == ("error", "DataLossException", "t-0 offsets [5, 7) are missing from the segment "
                      "files; set failOnDataLoss=false to skip them")
    assert got[1] == ("ok", [r for r in rows if 3 <= r["offset"] < 12])
    warned = "t-0 offsets [5, 7) are missing from the segment files; skipping them (failOnDataLoss=false)"
    assert f"WARN org.logbroker.spark {warned}" in err
    assert warned in [r.getMessage() for r in caplog.records]
    # a gap at the end of the range, found at a batch that starts past it: still data loss
    got, _ = compare(jvm, [split(data, 8, 12)])
    assert got[0] == ("error", "DataLossException", "t-0 offsets [11, 12) are missing from the "
                      "segment files; set failOnDataLoss=false to skip them")


def test_missing_and_deleted_ranges_fail_or_are_skipped(jvm, part):
    data, rows, where = part
    os.remove(where[4][3])  # the second segment, offsets [18, 58)
    os.remove(where[0][3])  # the first, offsets [0, 18): start is before the log now
    end = rows[-1]["offset"] + 1
    splits = [split(data, 20, 60), split(data, 20, 60, fail_on_data_loss=False),
              split(data, 5, 60, fail_on_data_loss=False), split(data, 0, 10),
              split(data, 60, end + 5, fail_on_data_loss=False)]
    got, err = compare(jvm, splits)
    assert got[0] == ("error", "DataLossException", "t-0 offsets [20, 58) are gone (deleted by retention?); "
                      "set failOnDataLoss=false to skip them")
    assert got[1] == ("ok", [r for r in rows if 58 <= r["offset"] < 60])
    assert got[2] == got[1]
    assert got[3] == ("error", "DataLossException", "t-0 offsets [0, 10) are gone (deleted by retention?); "
                      "set failOnDataLoss=false to skip them")
    assert got[4] == ("ok", [r for r in rows if r["offset"] >= 60])
    assert f"t-0 offsets [{end}, {end + 5}) are missing from the segment files; skipping them" in err


def test_headers_only_reads_no_records_and_counts_the_range(jvm, part):
    data, rows, where = part
    _, pos, base, path = where[2]  # a Kafka batch: its records damaged, its header intact
    with open(path, "r+b") as fh:
        fh.seek(pos + 80)
        fh.write(b"\xff\xff\xff\xff")
    end = rows[-1]["offset"] + 1
    cases = [split(data, 0, end), split(data, 9, 60), split(data, 10, 11)]
    got, _ = java_read(jvm, cases, headers_only=True)
    for s, g in zip(cases, got):
        seen: list = []
        assert list(iter_batches(s, want=lambda h: seen.append(h))) == []  # headers only
        want = [{"baseOffset": h.base_offset, "lastOffset": h.last_offset,
                 "inRange": max(0, min(h.next_offset, s.end) - max(h.base_offset, s.start))}
                for h in seen]
        assert g == ("ok", want)
        assert sum(b["inRange"] for b in want) == len([r for r in rows if s.start <= r["offset"] < s.end])
    assert java_read(jvm, cases[1:2])[0][0][:2] == ("error", "CorruptRecordException")


def test_lz4_frames_as_any_client_writes_them(jvm, tmp_path):
    """Linked blocks (liblz4's default, which lz4-java's frame stream refuses)
    and independent ones, block and content checksums, a stored size, 256 KiB
    blocks, concatenated frames: read as cramjam reads them."""
    lz4_frame = pytest.importorskip("lz4.frame")
    recs = make_records(0, 300, T0, headers=True, null_keys=True)  # a section of several 64 KiB blocks
    for r in range(0, 300, 7):
        recs[r] = (os.urandom(900), *recs[r][1:])  # incompressible values among the rest
    plain = kafka(0, recs)
    section = plain[61:]
    variants = [dict(block_linked=True), dict(block_linked=False),
                dict(block_linked=True, block_checksum=True, content_checksum=False, store_size=False),
                dict(block_linked=False, block_checksum=False, content_checksum=True, store_size=True),
                dict(block_linked=True, block_size=lz4_frame.BLOCKSIZE_MAX256KB)]
    bodies = [lz4_frame.compress(section, **v) for v in variants]
    half = len(section) // 2
    bodies.append(lz4_frame.compress(section[:half]) + lz4_frame.compress(section[half:]))
    data = str(tmp_path / "data")
    splits = []
    for i, body in enumerate(bodies):
        os.makedirs(os.path.join(data, f"z{i}-0"))
        with open(os.path.join(data, f"z{i}-0", segment_name(0)), "wb") as fh:
            fh.write(reframe(plain, body, LZ4))
        splits.append(split(data, 0, 300, topic=f"z{i}"))
    got, _ = compare(jvm, splits)
    assert got == [("ok", expect_rows(0, recs, False))] * len(bodies)


def test_damaged_batches_fail_as_corrupt_records_and_nothing_else(jvm, tmp_path):
    """Random bytes of CRC-valid batches changed: the JVM reads what Python
    reads, or fails with a CorruptRecordException where Python does (or where
    only Arrow's full validation would: offsets behind a null entry)."""
    import random

    rng = random.Random(7)
    recs = make_records(0, 6, T0, headers=True, null_keys=True, null_values=True)
    sources = [ours(0, recs), kafka(0, recs), kafka(0, recs, GZIP), kafka(0, recs, LZ4), kafka(0, recs, ZSTD)]
    data = str(tmp_path / "data")
    splits = []
    for k in range(250):
        raw = bytearray(sources[k % len(sources)])
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(21, len(raw))] = rng.randrange(256)
        os.makedirs(os.path.join(data, f"f{k}-0"))
        with open(os.path.join(data, f"f{k}-0", segment_name(0)), "wb") as fh:
            fh.write(recrc(bytes(raw)))
        splits.append(split(data, 0, 6, topic=f"f{k}"))
    got, _ = java_read(jvm, splits)
    outcomes = set()
    for s, g in zip(splits, got):
        p = python_read(s)
        outcomes.add((g[0], p[0]))
        if p[0] == "ok" and g[0] == "error":
            assert "column offsets out of order" in g[2], (s.topic, g)
        else:
            assert g[:2] == p[:2], (s.topic, g, p)
        if p[0] == "ok" == g[0]:
            assert g == p
    assert {("ok", "ok"), ("error", "error")} <= outcomes


# -- column subsets -----------------------------------------------------------------------------

def project(result: tuple, columns: list) -> tuple:
    """A read's result with only offset, timestampType and ``columns`` of each record."""
    if result[0] != "ok":
        return result
    keep = {"offset", "timestampType", *columns}
    return ("ok", [{k: v for k, v in r.items() if k in keep} for r in result[1]])


SUBSETS = [["key"], ["timestamp"], ["value", "headers"], ["headers"], []]


def test_a_column_subset_decodes_only_those_columns_as_python_reads_them(jvm, part):
    """Our batches (nulls, headers, a batch larger than the window) and Kafka
    batches in every codec: each subset's values are Python's, and Dump
    fails if a batch of ours decoded a column not asked for."""
    data, rows, where = part
    end = rows[-1]["offset"] + 1
    ranges = [(0, end), (9, 60), (67, 112)]
    cases = [(split(data, lo, hi), cols) for cols in SUBSETS for lo, hi in ranges]
    got, _ = java_read(jvm, [s for s, _ in cases], columns=[c for _, c in cases])
    for (s, cols), g in zip(cases, got):
        assert g == project(python_read(s), cols), (cols, s.start, s.end)
        assert g == project(("ok", [r for r in rows if s.start <= r["offset"] < s.end]), cols)
    full = got[0][1]
    assert all(set(r) == {"offset", "timestampType", "key"} for r in full)
    assert any(r["key"] is None for r in full)


def _value_offsets_at(recs: list) -> int:
    """Byte position, in ``ours(0, recs)`` (keys dense, values nullable), of the value offsets."""
    n = len(recs)
    keys = sum(len(k) for _, k, _, _ in recs)
    return 61 + 4 * n + 4 * (n + 1) + keys + (n + 7) // 8


def test_a_column_subset_still_checks_every_byte_and_the_whole_layout(jvm, tmp_path):
    """A key-only (or timestamp-only) read of a batch damaged in its values:
    the CRC over all its bytes fails it as a full read does; a layout error
    after the keys (CRC valid) fails it too; an entry rule of a column not
    read (value offsets out of order, CRC valid) is not checked, as Python
    checks entries only when it reads them."""
    recs = make_records(0, 6, T0, headers=True, null_values=True)
    good = ours(0, recs)
    assert good.count(b"v2-") == 1
    at = good.index(b"v2-")
    crc_bad = good[:at] + b"w" + good[at + 1:]
    trailing = recrc(good[:8] + struct.pack(">I", len(good) - 11) + good[12:] + b"\x00")
    offs = bytearray(good)
    struct.pack_into("<i", offs, _value_offsets_at(recs) + 8, 10 ** 6)  # value offsets[2]
    offs = recrc(bytes(offs))
    data = str(tmp_path / "data")
    cases = []
    for name, raw in (("crc", crc_bad), ("trailing", trailing), ("offsets", offs)):
        os.makedirs(os.path.join(data, f"{name}-0"))
        with open(os.path.join(data, f"{name}-0", segment_name(0)), "wb") as fh:
            fh.write(raw)
        for cols in (["key"], ["timestamp"], [], None):
            cases.append((name, split(data, 0, 6, topic=name), cols))
    got, _ = java_read(jvm, [s for _, s, _ in cases], columns=[c for _, _, c in cases])
    results = {(name, str(cols)): g for (name, _, cols), g in zip(cases, got)}
    path = os.path.join(data, "crc-0", segment_name(0))
    for cols in (["key"], ["timestamp"], [], None):
        g = results[("crc", str(cols))]
        assert g[:2] == ("error", "CorruptRecordException")
        assert g[2].startswith(f"{path} byte 0 (offset 0): CRC mismatch at position 0 (offset 0): stored 0x")
        assert g == python_read(split(data, 0, 6, topic="crc"))
        assert results[("trailing", str(cols))] == python_read(split(data, 0, 6, topic="trailing"))
        assert results[("trailing", str(cols))][2].endswith(
            "): 1 unexpected bytes at the end of the records section")
    want = expect_rows(0, recs, False)
    assert results[("offsets", "['key']")] == project(("ok", want), ["key"])
    assert results[("offsets", "['timestamp']")] == project(("ok", want), ["timestamp"])
    assert results[("offsets", "[]")] == project(("ok", want), [])
    assert results[("offsets", "None")][:2] == ("error", "CorruptRecordException")
    assert results[("offsets", "None")][2].endswith("): column offsets out of order at entry 1")
    assert python_read(split(data, 0, 6, topic="offsets"))[0] == "error"
