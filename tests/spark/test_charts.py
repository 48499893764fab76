"""The charts of the tools/ jobs (logbroker.spark.buckets, .charts), from plain
rows, no Spark: bucket choice, and the figures' objects (panels, axis limits,
bar widths, labels) for data spanning about 1 s, 10 min and 3 days."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("matplotlib")

from logbroker.spark.buckets import LADDER, Bucket, choose_bucket, format_span  # noqa: E402
from logbroker.spark.charts import key_label, panel_groups, timeline_figure, to_num  # noqa: E402
from logbroker.spark.charts import top_keys_figure  # noqa: E402

T0 = 1_700_000_000.25  # epoch seconds, not on a bucket edge
DAY = 86400
SPANS = [  # (span in seconds, the bucket it gets, its unit in the y label)
    (0.95, 1, "second"),
    (600, 5, "5 seconds"),
    (3 * DAY, 900, "15 minutes"),
]


def records(topics: dict[str, int], span: float) -> list[tuple[str, float, int]]:
    """(topic, timestamp, bytes) of ``n`` records per topic spread evenly over ``span``."""
    return [(t, T0 + span * i / max(n - 1, 1), 100 + len(t)) for t, n in topics.items()
            for i in range(n)]


def bucketed(recs, bucket: Bucket) -> list[dict]:
    """What topic_stats.per_bucket computes in Spark, in Python."""
    counts, sizes = Counter(), Counter()
    for topic, ts, size in recs:
        counts[topic, bucket.start(ts)] += 1
        sizes[topic, bucket.start(ts)] += size
    return [{"topic": t, "start": s, "records": n, "bytes": sizes[t, s]} for (t, s), n in counts.items()]


def bars(ax):
    (container,) = ax.containers
    return list(container)


@pytest.mark.parametrize("span,seconds,name", SPANS)
def test_the_bucket_fits_the_span(span, seconds, name):
    b = choose_bucket(T0, T0 + span)
    assert (b.seconds, b.name) == (seconds, name)
    assert b.count(T0, T0 + span) <= 300
    if span >= 300:
        assert b.count(T0, T0 + span) >= 30


def test_every_span_gets_at_most_300_buckets_and_at_least_30_past_five_minutes():
    span = 0.5
    while span < 5 * 365 * DAY:
        n = choose_bucket(T0, T0 + span).count(T0, T0 + span)
        assert n <= 300 and (n >= 30 or span < 300), (span, n)
        span *= 1.37
    assert choose_bucket(T0, T0).count(T0, T0) == 1
    assert choose_bucket(T0, T0 + 400 * DAY).name == "2 days"
    assert [b.seconds for b in LADDER] == sorted(b.seconds for b in LADDER)
    with pytest.raises(ValueError, match="before first"):
        choose_bucket(T0, T0 - 1)


def test_spans_read_as_people_say_them():
    assert [format_span(s) for s in (0, 0.95, 42, 600, 7500, 3 * DAY, 3 * DAY + 4 * 3600 + 5)] == \
        ["0.00 s", "0.95 s", "42 s", "10 min", "2 h 5 min", "3 d", "3 d 4 h"]


@pytest.mark.parametrize("span,seconds,name", SPANS)
@pytest.mark.parametrize("value", ["records", "bytes"])
def test_each_topic_gets_a_panel_over_the_data_span(span, seconds, name, value):
    topics = {"orders": 3000, "clicks": 1200}
    recs = records(topics, span)
    bucket = choose_bucket(T0, T0 + span)
    fig = timeline_figure(bucketed(recs, bucket), bucket, T0, T0 + span, value)
    assert [ax.get_title(loc="left").split(":")[0] for ax in fig.axes] == ["clicks", "orders"]
    lo, hi = to_num(bucket.start(T0)), to_num(bucket.start(T0 + span) + seconds)
    for ax, topic in zip(fig.axes, ["clicks", "orders"]):
        left, right = ax.get_xlim()
        assert (left, right) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
        assert left <= to_num(T0) and to_num(T0 + span) <= right
        assert right - left <= (span + 2 * seconds) / DAY
        assert ax.get_ylim()[0] == 0
        drawn = bars(ax)
        assert all(b.get_width() == pytest.approx(seconds / DAY) for b in drawn)
        assert all(left <= b.get_x() and b.get_x() + b.get_width() <= right + 1e-9 for b in drawn)
        heights = sum(b.get_height() for b in drawn)
        if value == "records":
            assert ax.get_ylabel() == f"records per {name}"
            assert heights == topics[topic]
            assert ax.get_title(loc="left") == f"{topic}: {topics[topic]:,} records"
        else:
            assert ax.get_ylabel() == f"kB per {name}"
            assert heights * 1000 == pytest.approx(topics[topic] * (100 + len(topic)))
    assert "UTC" in fig.get_suptitle()


def test_one_second_of_two_topics_draws_a_labelled_bar_each():
    """The issue's case: two topics of 20,000 records within one second."""
    bucket = choose_bucket(T0, T0 + 0.7)
    rows = [{"topic": t, "start": bucket.start(T0), "records": 20_000, "bytes": 2_040_000}
            for t in ("clicks", "orders")]
    fig = timeline_figure(rows, bucket, T0, T0 + 0.7)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        (bar,) = bars(ax)
        assert (bar.get_height(), bar.get_width()) == (20_000, pytest.approx(1 / DAY))
        assert ax.get_xlim() == (pytest.approx(to_num(bucket.start(T0))),
                                 pytest.approx(to_num(bucket.start(T0) + 1)))
        assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 20_000
        assert ax.get_ylabel() == "records per second"
        assert [t.get_text() for t in ax.texts] == ["20,000"]
        assert not ax.lines  # a bar, not a lone dot


def test_beyond_twelve_topics_the_largest_eleven_and_other():
    topics = {f"t{i:02d}": 100 * (i + 1) for i in range(15)}
    bucket = choose_bucket(T0, T0 + 600)
    fig = timeline_figure(bucketed(records(topics, 600), bucket), bucket, T0, T0 + 600)
    titles = [ax.get_title(loc="left").split(":")[0] for ax in fig.axes]
    assert titles == [f"t{i:02d}" for i in range(14, 3, -1)] + ["other (4 topics)"]
    assert sum(b.get_height() for b in bars(fig.axes[-1])) == 100 + 200 + 300 + 400
    assert panel_groups({"b": 1, "a": 2}) == [("a", ["a"]), ("b", ["b"])]


def test_top_keys_are_horizontal_bars_with_their_share():
    rows = [{"topic": t, "key": k, "records": n, "share": n / 100, "rank": r + 1,
             "topic_records": 100}
            for t in ("orders", "clicks") for r, (k, n) in enumerate([(b"k0", 50), (None, 30), (b"", 5)])]
    fig = top_keys_figure(rows)
    assert [ax.get_title(loc="left") for ax in fig.axes] == \
        ["clicks: 100 records, top 3 keys 85.0%", "orders: 100 records, top 3 keys 85.0%"]
    for ax in fig.axes:
        drawn = bars(ax)
        assert [b.get_width() for b in drawn] == [50, 30, 5]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["k0", "(no key)", '""']
        assert [t.get_text() for t in ax.texts] == ["50 (50.0%)", "30 (30.0%)", "5 (5.0%)"]
        assert ax.get_xlim()[0] == 0 and ax.get_xlabel() == "records"
        assert ax.get_ylim()[0] > ax.get_ylim()[1]  # rank 1 on top


def test_top_keys_of_many_topics_show_the_largest_twelve():
    rows = [{"topic": f"t{i:02d}", "key": b"k", "records": i + 1, "share": 1.0, "rank": 1,
             "topic_records": i + 1} for i in range(14)]
    fig = top_keys_figure(rows)
    assert [ax.get_title(loc="left").split(":")[0] for ax in fig.axes] == \
        [f"t{i:02d}" for i in range(2, 14)]
    assert "2 smaller topics not shown" in fig.get_suptitle()
    assert key_label(b"\xff" + b"x" * 30) == "\\xffxxxxxxxxxxxxxxxxxxx…"
