"""Pushed-down filters as offset ranges (spark/narrow.py): never fewer rows
than the predicates keep, exactly the range for the simple shapes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.spark.narrow import MAX_BOXES, narrowing

TOPICS = ("a", "b")
STEP_MS = 10  # row offset o has timestamp o * STEP_MS ms


def leaf(col, op, value):
    return {"col": col, "op": op, "value": value}


def ts_offset(ms):
    return -(-ms // STEP_MS)


def evaluate(tree, topic, partition, offset):
    if "and" in tree:
        return all(evaluate(t, topic, partition, offset) for t in tree["and"])
    if "or" in tree:
        return any(evaluate(t, topic, partition, offset) for t in tree["or"])
    row = {"topic": topic, "partition": partition, "offset": offset,
           "timestamp": offset * STEP_MS * 1000}
    if tree.get("col") not in row:
        return True  # a leaf the planner does not know narrows nothing
    v = row[tree["col"]]
    op = tree["op"]
    if op == "in":
        return v in tree["values"]
    return {"=": v == tree.get("value"), "<": v < tree["value"], "<=": v <= tree["value"],
            ">": v > tree["value"], ">=": v >= tree["value"]}[op]


def admitted(narrow, topic, partition, offset, start=0, end=60):
    if narrow is None:
        return True
    return any(lo <= offset < hi for lo, hi in narrow.ranges(topic, partition, start, end, ts_offset))


def test_offset_between_is_one_range():
    n = narrowing({"and": [leaf("offset", ">=", 10), leaf("offset", "<=", 19)]})
    assert n.ranges("a", 0, 0, 100, ts_offset) == [(10, 20)]
    assert n.ranges("a", 0, 15, 100, ts_offset) == [(15, 20)]  # the options' range still holds
    assert n.ranges("a", 0, 30, 100, ts_offset) == []


def test_partition_ranges_or():
    tree = {"or": [{"and": [leaf("partition", "=", 0), leaf("offset", ">=", 5), leaf("offset", "<", 8)]},
                   {"and": [leaf("partition", "=", 1), leaf("offset", ">", 40)]}]}
    n = narrowing(tree)
    assert n.admits("a", 0) and n.admits("b", 1) and not n.admits("a", 2)
    assert n.ranges("a", 0, 0, 100, ts_offset) == [(5, 8)]
    assert n.ranges("a", 1, 0, 100, ts_offset) == [(41, 100)]
    assert n.ranges("a", 2, 0, 100, ts_offset) == []


def test_topics_in_and_timestamp_bound():
    n = narrowing({"and": [{"col": "topic", "op": "in", "values": ["b"]},
                           leaf("timestamp", ">=", 205_000)]})  # 205 ms -> offset 21
    assert not n.admits("a", 0) and n.admits("b", 3)
    assert n.ranges("b", 3, 0, 100, ts_offset) == [(21, 100)]
    # an upper timestamp bound narrows nothing (CreateTime is not ordered)
    assert narrowing(leaf("timestamp", "<", 5)) is None


def test_unknown_leaves_and_or_with_unknown_narrow_nothing():
    assert narrowing(None) is None
    assert narrowing(leaf("key", "=", "x")) is None
    assert narrowing({"or": [leaf("offset", "=", 3), leaf("value", "=", "x")]}) is None
    n = narrowing({"and": [leaf("offset", "=", 3), leaf("value", "=", "x")]})
    assert n.ranges("a", 0, 0, 10, ts_offset) == [(3, 4)]


def test_contradiction_reads_nothing_and_too_many_boxes_narrow_nothing():
    n = narrowing({"and": [leaf("offset", "<", 3), leaf("offset", ">", 5)]})
    assert n is not None and not n.admits("a", 0)
    wide = {"and": [{"col": "offset", "op": "in", "values": list(range(0, 40, 2))},
                    {"col": "partition", "op": "in", "values": list(range(MAX_BOXES))}]}
    assert narrowing(wide) is None


leaves = st.one_of(
    st.builds(leaf, st.sampled_from(["offset", "partition", "timestamp", "key"]),
              st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(0, 600_000)).map(
        lambda t: {**t, "value": t["value"] if t["col"] == "timestamp" else t["value"] % 60}),
    st.builds(lambda vs: {"col": "topic", "op": "in", "values": vs},
              st.lists(st.sampled_from(TOPICS), max_size=2)),
    st.builds(lambda vs: {"col": "offset", "op": "in", "values": vs},
              st.lists(st.integers(0, 59), max_size=4)),
)
trees = st.recursive(leaves, lambda sub: st.one_of(
    st.builds(lambda xs: {"and": xs}, st.lists(sub, min_size=1, max_size=3)),
    st.builds(lambda xs: {"or": xs}, st.lists(sub, min_size=1, max_size=3))), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(trees)
def test_never_fewer_rows_than_the_predicates_keep(tree):
    n = narrowing(tree)
    for topic in TOPICS:
        for partition in range(3):
            for offset in range(60):
                if evaluate(tree, topic, partition, offset):
                    assert admitted(n, topic, partition, offset), (topic, partition, offset)
