"""The nemesis run's checker (tests/support/log_checker.py) on small hand-made
histories: a clean one, then one injected anomaly of each kind."""

import copy

import pytest

from tests.support.log_checker import ERROR, KINDS, OK, UNKNOWN, Poll, Send, Window, check


def clean(n=5, partitions=(0, 1), brokers=(1, 2, 3)):
    """Producer ``p<P>`` sends ``n`` values to partition P, all acknowledged at
    offsets 0..n-1; every replica holds them; one consumer session read them
    all in two polls per partition."""
    sends, polls, final = [], [], {}
    for p in partitions:
        for i in range(n):
            sends.append(Send(f"p{p}", p, i, f"{p}-{i}".encode(), OK, i, ack_time=float(i)))
        log = {i: f"{p}-{i}".encode() for i in range(n)}
        final[p] = {b: dict(log) for b in brokers}
        half = n // 2
        polls.append(Poll("c1", tuple((p, o, log[o]) for o in range(half))))
        polls.append(Poll("c1", tuple((p, o, log[o]) for o in range(half, n))))
    return sends, polls, final


def only(report, kind):
    """The report has anomalies of ``kind`` and of no other kind."""
    assert report.anomalies[kind], report.summary()
    others = {k: n for k, n in report.found().items() if k != kind}
    assert not others, report.summary()
    return report.anomalies[kind]


def replace_send(sends, value, **changes):
    out = []
    for s in sends:
        if s.value == value:
            s = Send(**{**s.__dict__, **changes})
        out.append(s)
    return out


def test_a_clean_history_has_no_anomaly():
    sends, polls, final = clean()
    report = check(sends, polls, final, hw={0: 5, 1: 5})
    assert report.ok, report.summary()
    assert report.found() == {}
    assert report.counts["acked"] == 10 and report.counts["unseen"] == 0
    assert report.counts["read_final"] == {0: 5, 1: 5} and report.counts["polled"] == 10
    assert "anomalies: none" in report.summary()


def test_indeterminate_sends_are_no_anomaly_whether_written_or_not():
    sends, polls, final = clean()
    sends.append(Send("p0", 0, 5, b"0-5", ERROR))      # failed, but in the log: a retry wrote it
    sends.append(Send("p0", 0, 6, b"0-6", UNKNOWN))    # never written
    for b in final[0]:
        final[0][b][5] = b"0-5"
    report = check(sends, polls, final)
    assert report.ok, report.summary()
    assert report.counts["failed"] == 2 and report.counts["indeterminate_written"] == 1


def test_lost_an_acknowledged_value_missing_from_the_final_read():
    sends, polls, final = clean()
    sends.append(Send("p0", 0, 5, b"0-5", OK, 5))
    lost = only(check(sends, polls, final), "lost")
    assert lost == [{"value": b"0-5", "partition": 0, "offset": 5, "missing_on": [1, 2, 3]}]


def test_lost_on_one_replica_is_also_a_divergence():
    sends, polls, final = clean()
    del final[1][2][4]
    report = check(sends, polls, final)
    assert report.anomalies["lost"] == [{"value": b"1-4", "partition": 1, "offset": 4,
                                         "missing_on": [2]}]
    assert report.anomalies["divergent"] == [{"partition": 1, "offset": 4, "missing_on": [2]}]


def test_duplicated_one_value_at_two_offsets():
    sends, polls, final = clean()
    for b in final[0]:
        final[0][b][5] = b"0-3"  # a retry written again
    dup = only(check(sends, polls, final), "duplicated")
    assert dup == [{"value": b"0-3", "at": [(0, 3), (0, 5)]}]


def test_inconsistent_offsets_across_replicas():
    sends, polls, final = clean()
    final[0][3][4] = b"0-4x"  # replica 3 holds another value at offset 4
    report = check(sends, polls, final)
    assert report.anomalies["inconsistent"] == [{"partition": 0, "offset": 4, "values": {
        b"0-4": ["ack", "poll:c1", "replica:1", "replica:2"], b"0-4x": ["replica:3"]}}]
    assert report.anomalies["phantom"]  # nobody sent 0-4x
    assert report.anomalies["lost"]  # 0-4 is not on replica 3


def test_inconsistent_an_ack_at_another_offset_than_the_log():
    sends, polls, final = clean()
    sends = replace_send(sends, b"1-2", offset=7)
    report = check(sends, polls, final)
    # acked at 7 but stored at 2: one value at two offsets, and the log has nothing at 7
    # (with another value at 7, that offset would be inconsistent too)
    assert report.anomalies["duplicated"] == [{"value": b"1-2", "at": [(1, 2), (1, 7)]}]
    report = check(replace_send(sends, b"1-2", offset=4), polls, final)  # where 1-4 is
    assert report.anomalies["inconsistent"] == [{"partition": 1, "offset": 4, "values": {
        b"1-2": ["ack"], b"1-4": ["ack", "poll:c1", "replica:1", "replica:2", "replica:3"]}}]


def test_inconsistent_a_poll_that_saw_another_value():
    sends, polls, final = clean()
    polls.append(Poll("c2", ((0, 1, b"0-2"),)))
    report = check(sends, polls, final)
    assert report.anomalies["inconsistent"] == [{"partition": 0, "offset": 1, "values": {
        b"0-1": ["ack", "poll:c1", "replica:1", "replica:2", "replica:3"],
        b"0-2": ["poll:c2"]}}]
    assert report.anomalies["duplicated"] == [{"value": b"0-2", "at": [(0, 1), (0, 2)]}]


def test_out_of_order_acked_offsets():
    sends, polls, final = clean()
    # the producer sent 1-1 before 1-2, but the acks say 1-2 went first; the log agrees
    sends = replace_send(replace_send(sends, b"1-1", offset=2), b"1-2", offset=1)
    for b in final[1]:
        final[1][b][1], final[1][b][2] = b"1-2", b"1-1"
    polls = [Poll(p.session, tuple((pp, o, final[pp][1][o]) for pp, o, _ in p.records))
             for p in polls]
    ooo = only(check(sends, polls, final), "out_of_order")
    assert {x["in"] for x in ooo} == {"ack", "final"}
    assert ooo[0]["earlier"] == (1, 2) and ooo[0]["later"] == (2, 1)


def test_nonmonotonic_poll():
    sends, polls, final = clean()
    polls.append(Poll("c1", ((0, 3, b"0-3"),)))  # the session went back to offset 3
    bad = only(check(sends, polls, final), "nonmonotonic_poll")
    assert bad == [{"session": "c1", "partition": 0, "from": 4, "to": 3}]


def test_a_new_session_may_start_anywhere():
    sends, polls, final = clean()
    polls.append(Poll("c2", ((0, 3, b"0-3"), (0, 4, b"0-4"))))
    assert check(sends, polls, final).ok


def test_poll_skip():
    sends, polls, final = clean()
    polls = [Poll("c1", ((0, 0, b"0-0"), (0, 1, b"0-1"), (0, 3, b"0-3"), (0, 4, b"0-4"))),
             Poll("c1", ((0, 2, b"0-2"),))]
    report = check(sends, polls, final)
    assert report.anomalies["poll_skip"] == [{"session": "c1", "partition": 0, "from": 1,
                                              "to": 3, "expected": 2}]
    assert report.anomalies["nonmonotonic_poll"]  # and then it went back
    sends2, _, final2 = clean()
    skip = only(check(sends2, [Poll("c1", ((0, 0, b"0-0"), (0, 2, b"0-2")))], final2),
                "poll_skip")
    assert skip[0]["expected"] == 1


def test_a_session_must_start_where_it_was_told():
    sends, polls, final = clean()
    ok = [Poll("c2", seek={0: 2, 1: 0}), Poll("c2", ((0, 2, b"0-2"), (1, 0, b"1-0")))]
    assert check(sends, polls + ok, final).ok
    late = [Poll("c2", seek={0: 2}), Poll("c2", ((0, 3, b"0-3"),))]
    assert only(check(sends, polls + late, final), "poll_skip") == [
        {"session": "c2", "partition": 0, "from": 1, "to": 3, "expected": 2}]
    early = [Poll("c2", seek={0: 2}), Poll("c2", ((0, 1, b"0-1"),))]
    assert only(check(sends, polls + early, final), "nonmonotonic_poll") == [
        {"session": "c2", "partition": 0, "from": 1, "to": 1}]
    # a seek past the end: nothing more to expect
    assert check(sends, polls + [Poll("c2", seek={0: 9})], final).ok


def test_unseen_counts_acked_values_no_poll_returned():
    sends, polls, final = clean()
    report = check(sends, polls[:1], final)
    assert report.ok and report.counts["unseen"] == 10 - 2


def test_phantom_a_value_nobody_sent():
    sends, polls, final = clean()
    polls.append(Poll("c2", ((9, 0, b"ghost"),)))
    assert only(check(sends, polls, final), "phantom") == [{"value": b"ghost", "at": [(9, 0)]}]


def test_divergent_replicas_below_the_hw_but_not_beyond_it():
    sends, polls, final = clean()
    final[0][1][5] = b"0-5"  # replica 1 has an unacknowledged tail the others lack
    sends.append(Send("p0", 0, 5, b"0-5", UNKNOWN))
    assert only(check(sends, polls, final), "divergent") == [
        {"partition": 0, "offset": 5, "missing_on": [2, 3]}]
    report = check(sends, polls, final, hw={0: 5, 1: 5})  # beyond the HW: only counted
    assert report.ok and report.counts["beyond_hw"] == 1


def test_acked_while_the_isr_was_below_min_insync_replicas():
    sends, polls, final = clean()
    bad = only(check(sends, polls, final, windows=[Window(2.5, 3.5)]), "acked_below_min_isr")
    assert sorted(x["value"] for x in bad) == [b"0-3", b"1-3"]


def test_not_on_quorum_an_ack_neither_down_replica_had():
    sends, polls, final = clean()
    # the down replicas' logs read while they were down: replica 3 lagged (no 0-4)
    snaps = copy.deepcopy({b: {p: final[p][b] for p in final} for b in (2, 3)})
    del snaps[3][0][4]
    assert check(sends, polls, final, windows=[Window(10, 11, snaps)]).ok
    del snaps[2][0][4]  # neither down replica had 0-4 although it was acknowledged before
    bad = only(check(sends, polls, final, windows=[Window(10, 11, snaps)]), "not_on_quorum")
    assert bad == [{"value": b"0-4", "partition": 0, "offset": 4, "ack_time": 4.0,
                    "down": [2, 3]}]
    # acknowledged after the window ended: not judged by it
    assert check(sends, polls, final, windows=[Window(1, 3.5, snaps)]).anomalies[
        "not_on_quorum"] == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_reported(kind):
    assert kind in check(*clean()).anomalies
