"""Log compaction: the records helpers, the storage passes, gaps, tombstones,
the bounded key map, and a model-based property test against a dict."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.errors import InvalidConfigError, InvalidRecordError
from logbroker.limits import check_topic_configs
from logbroker.records import decode_batch, read_header, scan_batches
from logbroker.records import format as fmt
from logbroker.records.compact import encode_runs, has_null_key, runs_of
from logbroker.records.encoder import encode_batch
from logbroker.storage.config import LogConfig
from tests.support.compaction import compact_all, keyed, open_compacted, records_of


# -- records level --------------------------------------------------------------------------
def test_encode_runs_splits_a_batch_into_runs_of_kept_records():
    raw = encode_batch([10, 11, 12, 13, 14, 15], [b"a", b"b", None, b"d", b"e", b"f"],
                       [b"1", None, b"3", b"4", b"5", b"6"], {2: [("h", b"x")], 4: [("g", None)]},
                       producer_id=7, producer_epoch=2, base_sequence=100, log_append_time=True)
    raw = fmt.stamp(raw, 50, 9) + raw[fmt.STAMP_SIZE:]
    batch = decode_batch(raw)
    keep = [True, False, True, True, False, True]
    assert runs_of(keep) == [(0, 1), (2, 4), (5, 6)]
    runs = encode_runs(raw, batch, keep)
    decoded = [decode_batch(r) for r in runs]  # each CRC-checked
    assert [(d.header.base_offset, d.header.record_count, d.header.base_sequence)
            for d in decoded] == [(50, 1, 100), (52, 2, 102), (55, 1, 105)]
    for d in decoded:
        h = d.header
        assert (h.leader_epoch, h.producer_id, h.producer_epoch, h.timestamp_type) == (9, 7, 2, 1)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for d in decoded for r in d.records()]
    want = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [w for w, k in zip(want, keep) if k]
    assert encode_runs(raw, batch, [True] * 6) == [raw]
    assert encode_runs(raw, batch, [False] * 6) == []


def test_null_key_check_reads_only_the_key_column_mode_and_bitmap():
    cases = {(b"a", b"b"): False, (None, None): True, (b"a", None): True,
             tuple([b"k"] * 9): False, tuple([b"k"] * 8 + [None]): True}
    for keys, expected in cases.items():
        raw = encode_batch([1] * len(keys), list(keys), [b"v"] * len(keys), {})
        assert has_null_key(raw, read_header(raw)) is expected, keys


def test_config_names_and_values():
    assert LogConfig(cleanup_policy="compact,delete").compacts
    assert LogConfig(cleanup_policy="compact,delete").deletes
    assert not LogConfig().compacts and LogConfig().deletes
    assert LogConfig().delete_retention_ms == 86_400_000
    with pytest.raises(InvalidConfigError):
        LogConfig(cleanup_policy="compress")
    with pytest.raises(InvalidConfigError):
        LogConfig(min_cleanable_dirty_percent=101)
    check_topic_configs({"cleanup_policy": "compact,delete", "min_compaction_lag_ms": 0,
                         "delete_retention_ms": 5, "min_cleanable_dirty_percent": 50})
    with pytest.raises(InvalidConfigError):
        check_topic_configs({"cleanup_policy": "compacted"})


# -- storage --------------------------------------------------------------------------------
def test_a_compacted_topic_refuses_records_without_a_key(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("c", cleanup_policy="compact")
        s.create_topic("d", cleanup_policy="delete")
        with pytest.raises(InvalidRecordError, match="key"):
            s.get_log("c", 0).append([keyed([(b"k", b"v"), (None, b"w")])])
        assert s.get_log("c", 0).log_end_offset == 0
        s.get_log("d", 0).append([keyed([(None, b"w")])])


def test_compaction_keeps_the_newest_value_per_key_and_the_offsets(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(40):
            lg.append([keyed([(b"k%d" % (i % 4), b"v%d" % i), (b"j%d" % (i % 3), b"w%d" % i)])])
        lg.roll()
        lg.append([keyed([(b"k0", b"active")])])  # newest k0: in the active segment
        sealed = [seg.base_offset for seg in lg.segments]
        before = records_of(lg)
        compact_all(s)
        after = records_of(lg)
        latest = {}
        for offset, key, value in before:
            latest[key] = (offset, key, value)
        kept_sealed = [r for r in after if r[0] < lg.active.base_offset]
        assert sorted(after) == sorted(latest.values())
        assert all(r in before for r in after)  # offsets unchanged
        assert kept_sealed and lg.log_end_offset == 81
        assert lg.segments[-1].base_offset == sealed[-1]  # the active segment was not touched
        gap = next(o for o in range(81) if o not in {r[0] for r in after})
        first_after = min(r[0] for r in after if r[0] > gap)
        data = lg.read(gap, 1 << 20)  # a read in a gap starts at the next batch
        assert read_header(data).base_offset == first_after
    with open_compacted(tmp_path / "d") as s:  # clean reopen
        assert records_of(s.get_log("t", 0)) == after


def test_tombstones_go_after_delete_retention_ms(tmp_path):
    with open_compacted(tmp_path / "d", delete_retention_ms=5_000) as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(30):
            lg.append([keyed([(b"a", b"a%d" % i), (b"b", b"b%d" % i)])])
        lg.append([keyed([(b"a", None)])])  # the tombstone of a
        for i in range(30):
            lg.append([keyed([(b"c", b"c%d" % i)])])
        lg.roll()
        compact_all(s, now=100_000)
        assert {k: v for _, k, v in records_of(lg)} == {b"a": None, b"b": b"b29", b"c": b"c29"}
        compact_all(s, now=104_999)  # not yet
        assert (b"a", None) in [(k, v) for _, k, v in records_of(lg)]
        compact_all(s, now=105_000)
        assert {k: v for _, k, v in records_of(lg)} == {b"b": b"b29", b"c": b"c29"}


def test_a_small_key_map_compacts_a_prefix_per_pass(tmp_path):
    with open_compacted(tmp_path / "d", map_bytes=4096) as s:  # ~30 keys of ~8 bytes
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(400):
            lg.append([keyed([(b"key%04d" % (i % 90), b"v%d" % i)])])
        lg.roll()
        compact_all(s, ticks=100)
        got = {k: v for _, k, v in records_of(lg)}
        assert got == {b"key%04d" % k: b"v%d" % max(i for i in range(400) if i % 90 == k)
                       for k in range(90)}
        assert len(records_of(lg)) == 90


def test_a_replaced_segment_stays_readable_through_a_slice_taken_before(tmp_path):
    with open_compacted(tmp_path / "d", file_delete_delay_ms=60_000) as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(30):
            lg.append([keyed([(b"k", b"v%d" % i)])])
        lg.roll()
        piece = lg.slice(0, 1 << 20)
        old = piece.read()
        compact_all(s)
        assert records_of(lg) == [(29, b"k", b"v29")]
        assert piece.read() == old and piece.segment.path.endswith(".deleted")
        with piece.fd() as fd:
            assert os.pread(fd, len(old), piece.position) == old
        assert lg.purge_deleted(now=10**13) >= 1


def test_compact_only_topics_have_no_time_retention(tmp_path):
    with open_compacted(tmp_path / "d", retention_ms=1, segment_bytes=200) as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(10):
            lg.append([keyed([(b"k%d" % i, b"v")])])
        s.tick(10**12)
        assert lg.log_start_offset == 0 and len(records_of(lg)) == 10


def test_a_follower_takes_batches_past_its_end_and_rolls_where_the_leader_did(tmp_path):
    with open_compacted(tmp_path / "l") as leader_store, open_compacted(tmp_path / "f") as fs:
        leader_store.create_topic("t")
        fs.create_topic("t")
        leader, follower = leader_store.get_log("t", 0), fs.get_log("t", 0)
        for i in range(30):
            leader.append([keyed([(b"k%d" % (i % 2), b"v%d" % i)])])
        leader.roll()
        leader.append([keyed([(b"x", b"y")])])
        compact_all(leader_store)
        offset = 0
        while offset < leader.log_end_offset:
            seg = next(s for s in reversed(leader.segments) if s.base_offset <= offset) \
                if offset >= leader.segments[0].base_offset else leader.segments[0]
            data = leader.read(offset, 1 << 20)
            follower.append_replicated(data, segment_base=seg.base_offset if
                                       read_header(data).base_offset >= seg.base_offset else None)
            offset = list(scan_batches(data))[-1][1].next_offset
        assert records_of(follower) == records_of(leader)
        assert follower.log_end_offset == leader.log_end_offset == 31
        assert [s.base_offset for s in follower.segments if s.size][1:] == \
            [s.base_offset for s in leader.segments if s.size][1:]  # (the first: its own base)


def test_truncation_inside_a_gap_ends_the_log_there(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(30):
            lg.append([keyed([(b"k%d" % (i % 3), b"v%d" % i)])])
        lg.roll()
        lg.append([keyed([(b"z", b"z")])])
        compact_all(s)
        offsets = [r[0] for r in records_of(lg)]
        assert offsets == [27, 28, 29, 30]
        lg.truncate_to(10)  # inside the gap [0, 27)
        assert lg.log_end_offset == 10 and records_of(lg) == []
        assert lg.append([keyed([(b"n", b"new")])]).first_offset == 10


def test_producer_state_rebuilt_after_compaction_accepts_the_next_sequence(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        for i in range(20):
            lg.append([keyed([(b"a", b"%d" % i), (b"b", b"%d" % i), (b"a", b"x")],
                             producer_id=5, producer_epoch=0, base_sequence=3 * i)])
        lg.roll()
        compact_all(s)
    with open_compacted(tmp_path / "d") as s:  # producer state comes back from the log
        lg = s.get_log("t", 0)
        info = lg.append([keyed([(b"c", b"c")], producer_id=5, producer_epoch=0,
                                base_sequence=60)])
        assert info.first_offset == 60


# -- model-based property test ------------------------------------------------------------------
KEYS = [b"k%d" % i for i in range(6)]
op = st.one_of(
    st.tuples(st.just("produce"), st.lists(st.tuples(st.sampled_from(KEYS),
                                                     st.one_of(st.none(), st.binary(max_size=12))),
                                           min_size=1, max_size=6)),
    st.tuples(st.just("roll"), st.none()),
    st.tuples(st.just("compact"), st.integers(0, 3_000)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40))
def test_compaction_matches_a_dict(ops):
    with tempfile.TemporaryDirectory() as tmp:
        s = open_compacted(tmp, map_bytes=4096, segment_bytes=300, delete_retention_ms=1000)
        try:
            s.create_topic("t")
            lg = s.get_log("t", 0)
            model, produced, now = {}, {}, 0
            for kind, arg in ops:
                if kind == "produce":
                    first = lg.append([keyed(arg)]).first_offset
                    for i, (key, value) in enumerate(arg):
                        model[key] = value
                        produced[first + i] = (key, value)
                elif kind == "roll":
                    lg.roll()
                else:
                    now += arg
                    s.tick(now)
            got = records_of(lg)
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            assert all(produced[o] == (k, v) for o, k, v in got)  # offsets as produced
            latest = {}
            for _, key, value in got:
                latest[key] = value
            assert {k: v for k, v in latest.items() if v is not None} == \
                {k: v for k, v in model.items() if v is not None}
            lg.roll()
            compact_all(s, now=now + 10_000)  # everything sealed, every tombstone old enough:
            compact_all(s, now=now + 20_000)  # exactly the live keys, once each
            final = records_of(lg)
            assert sorted((k, v) for _, k, v in final) == \
                sorted((k, v) for k, v in model.items() if v is not None)
        finally:
            s.close()


# -- readers outside storage: inspect, Spark, the consumer's fetch buffer -----------------------
def compacted_dir(path) -> dict:
    """A closed data dir with a compacted topic "t"; returns the newest value per key."""
    latest = {}
    with open_compacted(path) as s:
        s.create_topic("t", cleanup_policy="compact")
        lg = s.get_log("t", 0)
        for i in range(60):
            pairs = [(b"k%d" % (i % 6), b"v%d" % i), (b"u%d" % i, b"once")]
            lg.append([keyed(pairs)])
            latest.update(pairs)
        lg.roll()
        compact_all(s)
        assert len(records_of(lg)) == len(latest)
    return latest


def test_inspect_verify_shows_a_compacted_logs_gaps_as_normal(tmp_path):
    from click.testing import CliRunner

    from logbroker.cli.main import main

    compacted_dir(tmp_path / "d")
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "d" / "t-0"), "--verify"])
    assert result.exit_code == 0, result.output
    assert "PROBLEM" not in result.output and "a gap (records removed by compaction)" in result.output


def test_spark_reads_a_compacted_log_skipping_gaps(tmp_path):
    pytest.importorskip("pyarrow")
    from logbroker.spark.source import LogbrokerReader

    latest = compacted_dir(tmp_path / "d")
    reader = LogbrokerReader({"path": str(tmp_path / "d"), "assign": '{"t":[0]}'})
    rows = [row for p in reader.partitions() for rb in reader.read(p) for row in rb.to_pylist()]
    assert {r["key"]: r["value"] for r in rows} == latest and len(rows) == len(latest)
    assert [r["offset"] for r in rows] == sorted({r["offset"] for r in rows})


def test_the_fetch_buffer_moves_the_position_past_a_gap():
    from logbroker.client.consumer.fetch_buffer import FetchBuffer

    data = b"".join(fmt.stamp(keyed([(b"k", b"v%d" % b)]), b, 0)
                    + keyed([(b"k", b"v%d" % b)])[fmt.STAMP_SIZE:] for b in (3, 9))
    buf = FetchBuffer(1 << 20)
    buf.assign([("t", 0)])
    buf.seek("t", 0, 0)
    gen = buf.state("t", 0).gen
    buf.absorb([("t", 0, 0, "", 10, 0, len(data))], [gen], [data])
    assert [(r.offset, r.value) for r in buf.take(10)] == [(3, b"v3"), (9, b"v9")]
    assert buf.state("t", 0).position == 10 and buf.state("t", 0).fetch_pos == 10
