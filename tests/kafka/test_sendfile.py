"""A Kafka Fetch of Kafka batches goes out as the segment's file slice
(issue 15, decision 80): real broker processes with ``--kafka-port 0`` and
``--metrics-port 0``, the path each partition took read from
``logbroker_kafka_fetch_slices_total``; the bytes a Kafka client gets
compared with the segment file; a topic mixing our batches (magic 1) and
Kafka's still converted and read whole by kafka-python; rolls and
retention; TLS. The per-segment record (kafka/slice_kinds.py) on a real
Log: a cut segment re-written is walked again, records are bounded and go
with their segments."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fixtures import FAST, BrokerProcess, batch, open_store, wait_until
from tests.support.tls import tls_files
from tests.support.kafka_raw import WAIT, Raw, kread
from logbroker import Admin, Producer
from logbroker.cli.serve import KAFKA_READY
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.kafka.slice_kinds import SliceKinds
from logbroker.records import format as fmt

FIRST_SEGMENT = "00000000000000000000.log"


@contextlib.contextmanager
def broker(data_dir, *extra: str, config: "dict | None" = None):
    """A broker process with the Kafka listener and metrics on free ports:
    yields (BrokerProcess, Kafka bootstrap, metrics URL); no traceback in
    its log at the end; killed by PID."""
    b = BrokerProcess(data_dir, "--kafka-port", "0", "--metrics-port", "0", *extra, config=config)
    try:
        b.start()
        metrics = b.proc.stdout.readline()
        assert metrics.startswith("logbroker metrics on http://"), metrics
        kafka_line = b.proc.stdout.readline()
        assert kafka_line.startswith(KAFKA_READY), kafka_line
        yield b, kafka_line[len(KAFKA_READY):].strip(), metrics.split(" on ", 1)[1].strip()
        assert "Traceback" not in b.log()
    finally:
        b.kill()


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    data = tmp_path_factory.mktemp("sendfile") / "data"
    with broker(data) as (b, bootstrap, url):
        yield b, bootstrap, url, data


def paths(url: str) -> dict:
    """{path: partitions answered} from logbroker_kafka_fetch_slices_total."""
    with urllib.request.urlopen(url, timeout=WAIT) as resp:
        text = resp.read().decode()
    return {s.labels["path"]: s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if s.name == "logbroker_kafka_fetch_slices_total"}


def moved(before: dict, after: dict) -> dict:
    return {path: after[path] - before.get(path, 0) for path in after}


def kbatch(values, ts: int = 5_000) -> bytes:
    """A Kafka batch (magic 2) as a Kafka client sends it."""
    return build_batch([KafkaRecord(i, i, b"k", v) for i, v in enumerate(values)],
                       base_timestamp=ts)


class Kafka(Raw):
    """Raw Produce and Fetch (v8 / v11) on one connection."""

    cid = 0

    def produce(self, topic: str, records: bytes) -> int:
        self.cid += 1
        # acks -1: answered once durable, so readable (acks 1 is answered before the fsync)
        self.sock.sendall(self.send(0, 8, self.cid, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}))
        part = self.recv(0, 8)[1].responses[0].partition_responses[0]
        assert part.error_code == 0, part
        return part.base_offset

    def fetch(self, topic: str, offset: int, max_bytes: int = 1 << 20) -> bytes:
        self.cid += 1
        self.sock.sendall(self.send(1, 11, self.cid, {
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                 "partition_max_bytes": max_bytes}]}]}))
        body = self.recv(1, 11)[1]
        part = body.responses[0].partitions[0]
        assert (body.error_code, part.error_code, part.aborted_transactions) == (0, 0, None)
        assert part.last_stable_offset == part.high_watermark
        return bytes(part.records or b"")


def read_from(bootstrap: str, topic: str, n: int, **conf) -> list:
    """(offset, value) of ``n`` records of partition 0 from offset 0, read by
    kafka-python with ``conf``."""
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **conf)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        return [(r.offset, r.value) for r in kread(c, n)]
    finally:
        c.close()


def batches(data: bytes) -> list:
    """(position, base offset, size, magic) of each whole batch in ``data``."""
    out, pos = [], 0
    while pos + fmt.HEADER_SIZE <= len(data):
        h = fmt.read_header(data, pos)
        if pos + h.size > len(data):
            break
        out.append((pos, h.base_offset, h.size, h.magic))
        pos += h.size
    return out


def segment_bytes(data_dir, topic: str) -> bytes:
    with open(os.path.join(data_dir, f"{topic}-0", FIRST_SEGMENT), "rb") as fh:
        return fh.read()


def test_kafka_batches_go_out_as_the_file_slice_they_lie_in(kbroker):
    """Only Kafka batches: every fetch is a file slice, byte for byte the
    segment's (a whole slice, one starting at the batch holding the offset,
    one cut by max bytes inside its second batch), and kafka-python reads
    every record; nothing converted."""
    pytest.importorskip("kafka")
    _, bootstrap, url, data = kbroker
    raw = Kafka(bootstrap)
    before = paths(url)
    try:
        for i in range(5):
            assert raw.produce("konly", kbatch([b"v%d-%d" % (i, j) for j in range(3)])) == 3 * i
        stored = segment_bytes(data, "konly")
        layout = batches(stored)
        assert [b[1] for b in layout] == [0, 3, 6, 9, 12] and all(b[3] == 2 for b in layout)
        assert raw.fetch("konly", 0) == stored
        assert raw.fetch("konly", 4) == stored[layout[1][0]:]  # the batch holding offset 4 first
        cut = layout[0][2] + 10  # ends 10 bytes into the second batch: as today, as Kafka
        assert raw.fetch("konly", 0, max_bytes=cut) == stored[:cut]
        assert raw.fetch("konly", 0, max_bytes=1) == stored[:layout[0][2]]  # the first, whole
    finally:
        raw.close()
    assert moved(before, paths(url)) == {"slice": 4, "converted": 0}
    assert read_from(bootstrap, "konly", 15) == [(3 * i + j, b"v%d-%d" % (i, j))
                                                 for i in range(5) for j in range(3)]
    after = moved(before, paths(url))
    assert after["slice"] > 4 and after["converted"] == 0


def test_a_topic_with_our_batches_is_converted_where_they_are(kbroker):
    """Our Producer's batches, then Kafka batches, then ours again: a slice
    holding one of ours is converted (kafka-python reads all at their
    offsets), a slice of the Kafka batches alone (before or after ours)
    goes as it lies."""
    pytest.importorskip("kafka")
    b, bootstrap, url, data = kbroker
    with Producer(b.bootstrap, **FAST) as p:
        for i in range(10):
            p.send("mixed", b"ours%d" % i, partition=0)
        p.flush(WAIT)
    raw = Kafka(bootstrap)
    try:
        for i in range(3):
            assert raw.produce("mixed", kbatch([b"kafka%d" % (10 + 3 * i + j)
                                                for j in range(3)])) == 10 + 3 * i
        stored = segment_bytes(data, "mixed")
        at = {base: pos for pos, base, _, _ in batches(stored)}
        before = paths(url)
        assert raw.fetch("mixed", 10) == stored[at[10]:]  # after ours: as it lies
        assert moved(before, paths(url)) == {"slice": 1, "converted": 0}
        with Producer(b.bootstrap, **FAST) as p:
            p.send("mixed", b"ours19", partition=0)
            p.flush(WAIT)
        stored = segment_bytes(data, "mixed")
        at = {base: pos for pos, base, _, _ in batches(stored)}
        before = paths(url)
        got = raw.fetch("mixed", 10)  # now ends with one of ours: converted
        assert got[:at[19] - at[10]] == stored[at[10]:at[19]]
        assert [(base, magic) for _, base, _, magic in batches(got)][-1] == (19, 2)
        assert moved(before, paths(url)) == {"slice": 0, "converted": 1}
        before = paths(url)  # the Kafka batches alone, ours just past the cut
        assert raw.fetch("mixed", 10, max_bytes=at[19] - at[10]) == stored[at[10]:at[19]]
        assert moved(before, paths(url)) == {"slice": 1, "converted": 0}
    finally:
        raw.close()
    before = paths(url)
    expected = [(i, b"ours%d" % i) for i in range(10)] + \
        [(i, b"kafka%d" % i) for i in range(10, 19)] + [(19, b"ours19")]
    assert read_from(bootstrap, "mixed", 20, max_partition_fetch_bytes=256) == expected
    assert moved(before, paths(url))["converted"] >= 1


def test_rolls_and_retention_keep_the_answers_right(tmp_path):
    """Small segments, rounds of Kafka batches and of ours (each round's
    records appended to segments already fetched), retention by size
    deleting the oldest: a kafka-python consumer reads every round as it
    comes, then a fresh one reads exactly what retention kept, both at
    their offsets; both paths were taken."""
    kafka = pytest.importorskip("kafka")
    with broker(tmp_path / "data", config={"housekeeping_ms": 100}) as (b, bootstrap, url):
        with Admin(b.bootstrap) as admin:
            assert admin.create_topics([("rolled", 1, {
                "segment_bytes": 1024, "retention_bytes": 3000, "retention_ms": -1,
                "file_delete_delay_ms": 0})]) == {"rolled": None}
        expected: dict = {}
        raw = Kafka(bootstrap)
        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=20)
        tp = kafka.TopicPartition("rolled", 0)
        c.assign([tp])
        c.seek(tp, 0)
        try:
            for round_ in range(12):
                first = len(expected)
                values = [b"r%d-%d-" % (round_, i) + b"x" * 60 for i in range(6)]
                if round_ % 3 == 2:  # ours (magic 1) into segments holding Kafka batches
                    with Producer(b.bootstrap, **FAST) as p:
                        for v in values:
                            p.send("rolled", v, partition=0)
                        p.flush(WAIT)
                else:
                    assert raw.produce("rolled", kbatch(values[:3])) == first
                    assert raw.produce("rolled", kbatch(values[3:])) == first + 3
                expected.update((first + i, v) for i, v in enumerate(values))
                got = kread(c, 6)
                assert [(r.offset, r.value) for r in got] == [(first + i, v)
                                                              for i, v in enumerate(values)]
        finally:
            c.close()
            raw.close()
        start = wait_until(lambda: log_start(bootstrap), timeout=WAIT, what="retention")
        fresh = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    auto_offset_reset="earliest")
        try:
            fresh.assign([tp])
            fresh.seek_to_beginning(tp)
            got = read_to(fresh, len(expected) - 1)
        finally:
            fresh.close()
        assert got[0].offset >= start
        assert [(r.offset, r.value) for r in got] == sorted(
            (o, v) for o, v in expected.items() if o >= got[0].offset)
        taken = paths(url)
        assert taken["slice"] > 0 and taken["converted"] > 0


def read_to(consumer, last: int) -> list:
    """Poll a KafkaConsumer until offset ``last`` came (bounded by WAIT)."""
    out, deadline = [], time.monotonic() + WAIT
    while (not out or out[-1].offset < last) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out += records
    return out


def log_start(bootstrap: str) -> int:
    """The log start offset of "rolled" (0 until retention moves it)."""
    raw = Kafka(bootstrap)
    try:
        raw.sock.sendall(raw.send(2, 5, 1, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "rolled", "partitions": [{"partition_index": 0, "timestamp": -2}]}]}))
        return raw.recv(2, 5)[1].topics[0].partitions[0].offset
    finally:
        raw.close()


def test_tls_answers_the_file_slice_read_into_the_stream(tmp_path):
    """Under TLS the slice path holds too (the connection reads the slice
    into the encrypted stream, as our listener does): kafka-python over
    SSL reads every record, nothing converted."""
    kafka = pytest.importorskip("kafka")
    ca_pem, cert, key = tls_files(tmp_path)
    with broker(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)) \
            as (_b, bootstrap, url):
        tls = dict(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=str(ca_pem))
        p = kafka.KafkaProducer(acks="all", linger_ms=5, **tls)
        for i in range(50):
            p.send("secure", value=b"s%d" % i, partition=0)
        p.flush(timeout=WAIT)
        p.close(timeout=WAIT)
        assert read_from(bootstrap, "secure", 50, max_partition_fetch_bytes=300,
                         security_protocol="SSL", ssl_cafile=str(ca_pem)) == \
            [(i, b"s%d" % i) for i in range(50)]
        taken = paths(url)
        assert taken["slice"] >= 1 and taken["converted"] == 0


# -- the per-segment record on a real Log ------------------------------------------------------
def _kafka_log(store, topic: str = "t"):
    store.create_topic(topic)
    return store.get_log(topic, 0)


def test_a_cut_segment_rewritten_is_walked_again(tmp_path):
    """Kafka batches walked, the log cut after the first and one of ours
    written where the others were (ending before the old walk's end): the
    same slice position now answers False (the segment's generation moved),
    the first batch alone still True."""
    s = open_store(tmp_path / "data")
    try:
        lg = _kafka_log(s)
        for i in range(3):
            lg.append([kbatch([b"v" * 200] * 3)], leader_epoch=0)
        kinds = SliceKinds()
        whole = lg.slice(0, 1 << 20)
        assert kinds.kafka_only(whole) and kinds.walked_bytes == whole.size
        lg.truncate_to(3)
        lg.append([batch([b"ours"])])
        again = lg.slice(0, 1 << 20)
        assert again.segment is whole.segment and again.size < whole.size  # inside the old walk
        assert not kinds.kafka_only(again)
        assert kinds.kafka_only(lg.slice(0, 1))  # the first batch, still a Kafka one
        assert not kinds.kafka_only(lg.slice(3, 1 << 20))  # ours alone
    finally:
        s.close()


def test_records_are_bounded_and_go_with_their_segments(tmp_path):
    """One record per segment fetched, never more than the bound; once
    retention's segments are removed and dropped, their records are gone;
    a walk extends forward only over what it has not seen."""
    s = open_store(tmp_path / "data", segment_bytes=1024, file_delete_delay_ms=0)
    try:
        lg = _kafka_log(s)
        for i in range(12):
            lg.append([kbatch([b"x" * 150] * 2)], leader_epoch=0)
        bases = [seg_base for seg_base in range(0, lg.log_end_offset, 2)]
        slices = [lg.slice(o, 1 << 20) for o in bases]
        segments = {id(p.segment) for p in slices}
        assert len(segments) >= 4
        small = SliceKinds(max_segments=2)
        assert all(small.kafka_only(p) for p in slices) and len(small) == 2
        kinds = SliceKinds()
        assert all(kinds.kafka_only(p) for p in slices) and len(kinds) == len(segments)
        walked = kinds.walked_bytes
        assert all(kinds.kafka_only(p) for p in slices) and kinds.walked_bytes == walked
        lg.delete_before(lg.log_end_offset - 2)
        lg.purge_deleted(now=1 << 62)
        del slices
        gc.collect()
        assert len(kinds) == 1  # the active segment's only
    finally:
        s.close()


def test_a_negative_fetch_offset_is_out_of_range_as_kafka_answers(kbroker):
    """Kafka answers a fetch at a negative offset OFFSET_OUT_OF_RANGE; our own
    Fetch reads -2 / -1 as the log's ends (decision 111), which a Kafka
    client must never get instead. The other partitions of the request are
    read as usual."""
    _, bootstrap, _, _ = kbroker
    raw = Kafka(bootstrap)
    try:
        assert raw.produce("kneg", kbatch([b"a", b"b"])) == 0
        raw.cid += 1
        raw.sock.sendall(raw.send(1, 11, raw.cid, {
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "topics": [
                {"topic": "kneg", "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    for offset in (-2, 0, -1)]}]}))
        parts = raw.recv(1, 11)[1].responses[0].partitions
        assert [p.error_code for p in parts] == [1, 0, 1]  # OFFSET_OUT_OF_RANGE, read, again
        assert not parts[0].records and not parts[2].records and parts[1].records
        assert parts[1].high_watermark == 2
    finally:
        raw.close()
