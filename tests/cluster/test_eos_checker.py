"""The exactly-once checker finds each anomaly it names (pure, fast)."""

from __future__ import annotations

from tests.support.eos_checker import Batch, check, outcomes


def origin(value: bytes):
    p, off = value.decode().split(":")[:2]
    return int(p), int(off)


def out(p: int, off: int) -> bytes:
    return f"{p}:{off}:x".encode()


def clean_run():
    """Inputs 0..3 of partition 0; two committed transactions and one
    aborted attempt between them (a processor killed and fenced)."""
    raw = {0: [
        Batch(7, True, records=((0, out(0, 0)), (1, out(0, 1)))),
        Batch(7, True, control=True, marker="commit"),
        Batch(8, True, records=((3, out(0, 2)),)),
        Batch(8, True, control=True, marker="abort"),
        Batch(9, True, records=((5, out(0, 2)), (6, out(0, 3)))),
        Batch(9, True, control=True, marker="commit"),
    ]}
    return {0: [0, 1, 2, 3]}, {0: 4}, raw, [(0, 0), (0, 1), (0, 5), (0, 6)]


def test_a_clean_run_has_no_anomaly():
    inputs, committed, raw, seen = clean_run()
    rep = check(inputs, committed, raw, seen, origin)
    assert rep.ok, rep.summary()
    assert rep.counts["committed_outputs"] == 4 and rep.counts["aborted_records"] == 1
    assert rep.counts["commit_markers"] == 2 and rep.counts["abort_markers"] == 1


def test_each_anomaly_is_found():
    inputs, committed, raw, seen = clean_run()
    assert check(inputs, committed, raw, seen + [(0, 3)], origin).anomalies["aborted_read"]
    assert check(inputs, committed, raw, seen[:-1], origin).anomalies["missed"] == [(0, 6)]
    assert check(inputs, {0: 3}, raw, seen, origin).anomalies["ahead_of_offsets"] == [((0, 3), 3)]
    lost = check({0: [0, 1, 2, 3, 4]}, {0: 5}, raw, seen, origin)
    assert lost.anomalies["lost"] == [(0, 4)]
    twice = {0: raw[0] + [Batch(10, True, records=((8, out(0, 1)),)),
                          Batch(10, True, control=True, marker="commit")]}
    dup = check(inputs, committed, twice, seen + [(0, 8)], origin)
    assert dup.anomalies["duplicated"] == [((0, 1), [(0, 1), (0, 8)])]
    hanging = {0: raw[0] + [Batch(11, True, records=((8, out(0, 3)),))]}
    rep = check(inputs, committed, hanging, seen, origin)
    assert rep.anomalies["open"] == [(0, 11, 8)] and not rep.anomalies["duplicated"]
    ghost = {0: raw[0] + [Batch(-1, False, records=((8, out(0, 9)),))]}
    assert check(inputs, committed, ghost, seen + [(0, 8)], origin).anomalies["phantom"]


def test_interleaved_producers_are_told_apart_by_their_own_markers():
    raw = {0: [Batch(1, True, records=((0, b"a"),)), Batch(2, True, records=((1, b"b"),)),
               Batch(1, True, control=True, marker="abort"), Batch(2, True, records=((3, b"c"),)),
               Batch(2, True, control=True, marker="commit")]}
    fate, still_open = outcomes(raw)
    assert fate == {(0, 0): "abort", (0, 1): "commit", (0, 3): "commit"} and not still_open
