"""The streaming source's offsets and trigger rules without Spark: the
reader's driver-side methods called as Spark calls them, over data dirs
written by Store (offsets.py, stream.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,  # noqa: E402
                                              ReadMinRows)

from tests.support.fixtures import fill, open_store  # noqa: E402
from logbroker.records.builder import build_batch  # noqa: E402
from logbroker.spark import offsets as lo  # noqa: E402
from logbroker.spark.plan import SparkSourceError  # noqa: E402
from logbroker.spark.scan import read_split  # noqa: E402
from logbroker.spark.stream import LogbrokerStreamReader, TriggerLimits, duration_ms  # noqa: E402


def test_offsets_json_round_trip_is_kafka_shaped():
    offsets = {("orders", 1): 7, ("orders", 0): 42, ("audit", 0): 0}
    js = lo.to_json(offsets)
    assert js == {"audit": {"0": 0}, "orders": {"0": 42, "1": 7}}
    assert list(js) == ["audit", "orders"]
    assert lo.from_json(js) == offsets


@pytest.mark.parametrize("bad", [[1], {"orders": 3}, {"orders": {"x": 1}}, {"orders": {"0": -1}},
                                 {"orders": {"-1": 0}}, {"orders": {"0": "abc"}}, "nope"])
def test_malformed_offsets_are_named_errors(bad):
    with pytest.raises(SparkSourceError, match="start offsets"):
        lo.from_json(bad, "start offsets")


def test_rate_limit_shares_by_backlog_as_kafka_does():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 5}
    capped = lo.rate_limit(start, latest, 100)
    assert capped == {("t", 0): 90, ("t", 1): 110, ("t", 2): 5}  # 90% and 10% of the backlog
    assert lo.pending(start, capped) == 100
    # a share below one still moves the partition; nothing passes latest
    tiny = lo.rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10_000, ("t", 1): 1}, 10)
    assert tiny == {("t", 0): 9, ("t", 1): 1}
    assert lo.rate_limit(start, latest, 10_000) == latest
    # a partition behind its start (offsets gone back) is not hidden by the cap:
    # partitions() must see it as without a limit, to report it
    behind = lo.rate_limit({("t", 0): 0, ("t", 1): 500}, {("t", 0): 1_000, ("t", 1): 40}, 10)
    assert behind == {("t", 0): 10, ("t", 1): 40}


def test_durations_and_trigger_limits():
    assert duration_ms("15m", "d") == 900_000 and duration_ms("250", "d") == 250
    assert duration_ms("2s", "d") == 2000 and duration_ms("1h", "d") == 3_600_000
    with pytest.raises(SparkSourceError, match="maxTriggerDelay"):
        TriggerLimits.parse({"maxTriggerDelay": "soon"})
    with pytest.raises(SparkSourceError, match="maxOffsetsPerTrigger"):
        TriggerLimits.parse({"maxOffsetsPerTrigger": "0"})
    limits = TriggerLimits.parse({"MAXOFFSETSPERTRIGGER": "5", "minOffsetsPerTrigger": "3"})
    assert (limits.max_offsets, limits.min_offsets, limits.max_delay_ms) == (5, 3, 900_000)


def _reader(data, **options) -> LogbrokerStreamReader:
    return LogbrokerStreamReader({"path": str(data), **options})


def _append(data, topic, partition, count, start_value=1000, create=0):
    s = open_store(data, segment_bytes=4096, index_interval_bytes=512)
    try:
        if create:
            s.create_topic(topic, create)
        lg = s.get_log(topic, partition)
        lg.append([build_batch([(b"v%d" % (start_value + i), b"k", (), 1) for i in range(count)])])
        lg.set_high_watermark(lg.log_end_offset)
    finally:
        s.close()


def _rows(reader, start, end) -> list[tuple]:
    out = []
    for part in reader.partitions(start, end):
        for rb in read_split(part.split):
            d = rb.to_pydict()
            out += list(zip(d["partition"], d["offset"], d["value"]))
    return sorted(out)


def test_starting_offsets_default_latest_then_batches_see_only_new_records(tmp_path):
    fill(tmp_path, batches=3, per=10).close()
    r = _reader(tmp_path, subscribe="orders")
    start = r.initialOffset()
    assert start == {"orders": {"0": 30, "1": 30}}
    assert r.latestOffset(start, r.getDefaultReadLimit()) == start  # nothing new
    _append(tmp_path, "orders", 1, 4)
    assert r.initialOffset() == start  # Spark asks again when it plans batch 0: "latest" stays put
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"orders": {"0": 30, "1": 34}}
    assert _rows(r, start, end) == [(1, 30 + i, b"v%d" % (1000 + i)) for i in range(4)]


def test_starting_from_json_and_timestamps(tmp_path):
    fill(tmp_path, batches=4, per=10).close()  # batch b has timestamp T0 + b * 1000
    from tests.support.fixtures import T0

    r = _reader(tmp_path, subscribe="orders", startingOffsets='{"orders":{"0":5,"1":-2}}')
    assert r.initialOffset() == {"orders": {"0": 5, "1": 0}}
    r = _reader(tmp_path, subscribe="orders", startingTimestamp=str(T0 + 2000))
    assert r.initialOffset() == {"orders": {"0": 20, "1": 20}}
    r = _reader(tmp_path, subscribe="orders",
                startingOffsetsByTimestamp='{"orders":{"1":%d}}' % (T0 + 3000),
                startingOffsets="earliest")
    assert r.initialOffset() == {"orders": {"0": 0, "1": 30}}
    with pytest.raises(SparkSourceError, match="endingOffsets is for batch"):
        _reader(tmp_path, subscribe="orders", endingOffsets="latest")
    with pytest.raises(SparkSourceError, match="startingOffsetsByTimestamp"):
        _reader(tmp_path, subscribe="orders", startingOffsetsByTimestamp="[1]")
    for bad in ('{"orders":{"0":-5}}', '{"orders":{"-1":3}}', '{"orders":[1]}', "[]", "soon"):
        with pytest.raises(SparkSourceError, match="option startingOffsets must be earliest, latest"):
            _reader(tmp_path, subscribe="orders", startingOffsets=bad)


def test_max_offsets_per_trigger_caps_each_batch_and_covers_everything(tmp_path):
    fill(tmp_path, batches=5, per=10).close()
    r = _reader(tmp_path, subscribe="orders", startingOffsets="earliest", maxOffsetsPerTrigger="30")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(30)
    start, seen = r.initialOffset(), []
    for _ in range(10):
        end = r.latestOffset(start, limit)
        if end == start:
            break
        rows = _rows(r, start, end)
        assert 0 < len(rows) <= 30
        seen += rows
        start = end
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 100
    assert r.latestOffset(start, ReadAllAvailable()) == start


def test_min_offsets_holds_the_trigger_until_enough_or_the_delay(tmp_path):
    fill(tmp_path, batches=1, per=10).close()
    r = _reader(tmp_path, subscribe="orders", minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    assert r.getDefaultReadLimit() == ReadMinRows(5)
    start = r.initialOffset()
    _append(tmp_path, "orders", 0, 3)
    assert r.latestOffset(start, ReadMinRows(5)) == start  # 3 < 5: held back
    assert r.latestOffset(start, ReadAllAvailable()) == {"orders": {"0": 13, "1": 10}}
    _append(tmp_path, "orders", 1, 2)
    assert r.latestOffset(start, ReadMinRows(5)) == {"orders": {"0": 13, "1": 12}}
    quick = _reader(tmp_path, subscribe="orders", minOffsetsPerTrigger="500", maxTriggerDelay="0s")
    begin = quick.initialOffset()
    _append(tmp_path, "orders", 0, 1)
    assert quick.latestOffset(begin, ReadMinRows(500)) != begin  # the delay (0) has passed


def test_available_now_stops_at_the_target(tmp_path):
    fill(tmp_path, batches=2, per=10).close()
    r = _reader(tmp_path, subscribe="orders", startingOffsets="earliest")
    r.prepareForTriggerAvailableNow()
    start = r.initialOffset()
    _append(tmp_path, "orders", 0, 5)  # after the target: not part of this run
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"orders": {"0": 20, "1": 20}}
    assert r.latestOffset(end, r.getDefaultReadLimit()) == end


def test_new_topics_and_partitions_are_read_from_their_start(tmp_path):
    fill(tmp_path, topic="orders-a", partitions=1, batches=1, per=10).close()
    r = _reader(tmp_path, subscribePattern="orders-.*", startingOffsets="latest")
    start = r.initialOffset()
    assert start == {"orders-a": {"0": 10}}
    _append(tmp_path, "orders-b", 0, 3, create=2)
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"orders-a": {"0": 10}, "orders-b": {"0": 3, "1": 0}}
    assert [(p, o) for p, o, _ in _rows(r, start, end)] == [(0, 0), (0, 1), (0, 2)]
    missing = _reader(tmp_path, subscribe="later")  # a stream may wait for its topic
    assert missing.initialOffset() == {}


def test_data_loss_is_an_error_unless_allowed(tmp_path):
    fill(tmp_path, batches=2, per=10).close()
    r = _reader(tmp_path, subscribe="orders")
    end = {"orders": {"0": 20, "1": 20}}
    with pytest.raises(SparkSourceError, match="went back"):
        r.partitions({"orders": {"0": 25, "1": 0}}, end)
    lenient = _reader(tmp_path, subscribe="orders", failOnDataLoss="false")
    assert len(_rows(lenient, {"orders": {"0": 25, "1": 0}}, end)) == 20


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats(allow_nan=False)
                     | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4),
                                                                                 inner, max_size=3),
                     max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_offsets_from_json_takes_any_json_or_names_the_problem(spec):
    try:
        got = lo.from_json(spec, "offsets")
    except SparkSourceError as exc:
        assert "offsets" in exc.message
    else:
        assert all(p >= 0 and o >= 0 for (_, p), o in got.items())
        assert lo.from_json(lo.to_json(got)) == got


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 3)),
                       st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=8),
       st.integers(1, 2000))
def test_rate_limit_never_passes_latest_nor_goes_back(ranges, limit):
    start = {tp: min(a, b) for tp, (a, b) in ranges.items()}
    latest = {tp: max(a, b) for tp, (a, b) in ranges.items()}
    capped = lo.rate_limit(start, latest, limit)
    assert set(capped) == set(latest)
    assert all(start[tp] <= capped[tp] <= latest[tp] for tp in latest)
    waiting = [tp for tp in latest if latest[tp] > start[tp]]
    assert lo.pending(start, capped) <= limit + len(waiting)  # shares below one round up
    assert all(capped[tp] > start[tp] for tp in waiting)  # every backlog moves


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["startingOffsets", "startingOffsetsByTimestamp",
                                        "startingTimestamp", "maxOffsetsPerTrigger",
                                        "minOffsetsPerTrigger", "maxTriggerDelay",
                                        "failOnDataLoss", "endingOffsets"]),
                       st.text(max_size=12), max_size=4))
def test_stream_options_fail_only_with_named_errors(tmp_path_factory, options):
    data = tmp_path_factory.getbasetemp() / "fuzz-data"
    if not data.exists():
        fill(data, batches=1, per=2).close()
    try:
        r = _reader(data, subscribe="orders", **options)
        start = r.initialOffset()
        end = r.latestOffset(start, r.getDefaultReadLimit())
        r.partitions(start, end)
    except SparkSourceError as exc:
        assert exc.message  # a named option or value, never a traceback of another type


def test_a_micro_batch_covers_its_whole_range_even_above_the_high_watermark_seen_now(tmp_path):
    fill(tmp_path, batches=2, per=10).close()  # high watermarks 20
    r = _reader(tmp_path, subscribe="orders")
    splits = [p.split for p in r.partitions({"orders": {"0": 10}}, {"orders": {"0": 25}})]
    assert [(s.start, s.end) for s in splits] == [(10, 25)]  # not silently cut at 20
    with pytest.raises(SparkSourceError, match=r"offsets \[20, 25\) are missing"):
        [rb for s in splits for rb in read_split(s)]


def test_a_high_watermark_behind_the_stream_is_waited_out_then_reported(tmp_path, monkeypatch):
    from logbroker.spark import stream

    fill(tmp_path, batches=2, per=10).close()  # high watermarks 20
    r = _reader(tmp_path, subscribe="orders")
    ahead = {"orders": {"0": 25, "1": 20}}  # as after a failover to a leader that lags
    assert r.latestOffset(ahead, ReadAllAvailable()) == ahead  # held: no batch, no error
    monkeypatch.setattr(stream, "BEHIND_GRACE_S", 0.0)
    end = r.latestOffset(ahead, ReadAllAvailable())
    assert end == {"orders": {"0": 20, "1": 20}}
    with pytest.raises(SparkSourceError, match="went back from 25 to 20"):
        r.partitions(ahead, end)
