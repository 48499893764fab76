"""The transaction APIs on the Kafka wire, sans I/O: golden bytes of the
flexible versions, and each translator (kafka/serve_txn.py, serve_data.py's
Fetch / ListOffsets / Produce, serve_groups.py's FindCoordinator) from the
decoded Kafka request to our request, and from our response to the Kafka
answer, encoded and decoded again at the request's version. Kafka's rules
for older clients: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below the
version that knows it, TxnOffsetCommit's COORDINATOR_LOAD_IN_PROGRESS as
COORDINATOR_NOT_AVAILABLE below v2. (Every API x version's round trip and
kafka-python's bytes: tests/kafka/test_codec.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from logbroker.errors import UnknownTopicOrPartitionError
from logbroker.kafka import serve_data, serve_groups, serve_txn
from logbroker.kafka.codec import (RequestHeader, ResponseHeader, decode_request,
                                   decode_response, encode_request, encode_response)
from logbroker.kafka.errors import KafkaDecodeError
from logbroker.kafka.plan import KafkaSite
from logbroker.metadata.interface import Directory, KafkaBroker
from logbroker.protocol import messages as m
from logbroker.protocol.parts import (AbortedTxn, OffsetCommit, TopicPartition, TxnDescription,
                                      TxnListing, TxnPartState)

FENCED, EPOCH, LOADING, NOT_AVAILABLE = 90, 47, 14, 15
LSO = {("t", 0): 15}  # the logs' last stable offsets SITE's metadata answers


def _log_for(topic: str, partition: int):
    if (topic, partition) not in LSO:
        raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
    return SimpleNamespace(last_stable_offset=LSO[(topic, partition)])


SITE = KafkaSite(0, "h", 1, None, meta=SimpleNamespace(
    directory=lambda: Directory({0: KafkaBroker(0, ("h", 9092))}, 0), log_for=_log_for))


def request(key: int, version: int, body: dict):
    """``(header, decoded body)`` of ``body`` as a client sends it."""
    return decode_request(encode_request(RequestHeader(key, version, 7, "c"), body)[4:])


def plan_of(translator, key: int, version: int, body: dict):
    header, decoded = request(key, version, body)
    return translator(SITE, header, decoded)


def answered(plan, resp, key: int, version: int):
    """The plan's answer to ``resp`` as the client decodes it."""
    wire = encode_response(ResponseHeader(7), key, version, plan.answer(resp))
    return decode_response(wire[4:], key, version)[1]


# -- golden bytes ---------------------------------------------------------------------------
def test_golden_end_txn_v3_is_flexible_and_v2_is_not():
    # header v2: api 26, v3, correlation 1, client "c" (non-compact), no tags |
    # compact "t", producer id 7, epoch 1, committed, no tags
    flexible = bytes.fromhex("001a" "0003" "00000001" "000163" "00"
                             "0274" "0000000000000007" "0001" "01" "00")
    header, body = decode_request(flexible)
    assert (header.api_version, body.transactional_id, body.producer_id, body.producer_epoch,
            body.committed) == (3, "t", 7, 1, True)
    assert encode_request(header, body)[4:] == flexible
    plain = bytes.fromhex("001a" "0002" "00000001" "000163"
                          "000174" "0000000000000007" "0001" "00")
    assert decode_request(plain)[1].committed is False
    # the answer: header v1 (tags) at v3, then throttle, error, tags
    wire = encode_response(ResponseHeader(1), 26, 3, {"throttle_time_ms": 0, "error_code": 90})
    assert wire == bytes.fromhex("0000000c" "00000001" "00" "00000000" "005a" "00")
    # bytes after a request's body are ignored (as Kafka does); after a response's refused
    assert decode_request(flexible + b"\x00")[1] == body
    with pytest.raises(KafkaDecodeError, match="bytes after the body"):
        decode_response(wire[4:] + b"\x00", 26, 3)


def test_golden_add_partitions_v3_and_list_transactions_v1():
    frame = bytes.fromhex("0018" "0003" "00000002" "000163" "00"
                          "0274" "0000000000000009" "0002"  # "t", producer 9, epoch 2
                          "02" "0278" "03" "00000000" "00000001" "00"  # [x: [0, 1]]
                          "00")
    header, body = decode_request(frame)
    assert [(t.name, t.partitions) for t in body.v3_and_below_topics] == [("x", (0, 1))]
    assert encode_request(header, body)[4:] == frame
    # ListTransactions is flexible from v0; v1 adds the duration filter
    frame = bytes.fromhex("0042" "0001" "00000003" "000163" "00"
                          "02" "084f6e676f696e67" "01" "00000000000003e8" "00")
    _, body = decode_request(frame)
    assert (body.state_filters, body.producer_id_filters, body.duration_filter) == \
        (("Ongoing",), (), 1000)
    with pytest.raises(KafkaDecodeError, match="ListTransactions v1 request"):
        decode_request(frame[:-3])


# -- InitProducerId ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(5))
def test_init_producer_id_carries_the_transactional_fields(version):
    body = {"transactional_id": "tx", "transaction_timeout_ms": 30000,
            "producer_id": 5 if version >= 3 else -1, "producer_epoch": 2 if version >= 3 else -1}
    plan = plan_of(serve_txn.init_producer_id, 22, version, body)
    assert plan.request == m.InitProducerId(transactional_id="tx", transaction_timeout_ms=30000,
                                            producer_id=body["producer_id"],
                                            producer_epoch=body["producer_epoch"])
    got = answered(plan, m.InitProducerIdResponse(producer_id=5, producer_epoch=3), 22, version)
    assert (got.error_code, got.producer_id, got.producer_epoch) == (0, 5, 3)
    got = answered(plan, m.InitProducerIdResponse(error=FENCED), 22, version)
    assert (got.error_code, got.producer_id, got.producer_epoch) == \
        (FENCED if version >= 4 else EPOCH, -1, -1)
    # an idempotent producer's request is today's: a new id from the allocator
    idem = plan_of(serve_txn.init_producer_id, 22, version,
                   dict(body, transactional_id=None))
    assert idem.request == m.InitProducerId()


def test_init_producer_id_needs_both_or_neither_of_id_and_epoch_and_a_named_id():
    for tid, pid, epoch in (("tx", 5, -1), ("tx", -1, 3), ("", -1, -1)):
        plan = plan_of(serve_txn.init_producer_id, 22, 3, {
            "transactional_id": tid, "transaction_timeout_ms": 1, "producer_id": pid,
            "producer_epoch": epoch})
        assert plan.request is None and answered(plan, None, 22, 3).error_code == 42


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ------------------------------------------------
@pytest.mark.parametrize("version", range(4))
def test_add_partitions_answers_every_partition_once_in_request_order(version):
    body = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 4,
            "v3_and_below_producer_epoch": 1, "v3_and_below_topics": [
                {"name": "b", "partitions": [1, 0, 1]}, {"name": "a", "partitions": [2]}]}
    plan = plan_of(serve_txn.add_partitions_to_txn, 24, version, body)
    parts = (TopicPartition("b", 1), TopicPartition("b", 0), TopicPartition("a", 2))
    assert plan.request == m.AddPartitionsToTxn(transactional_id="tx", producer_id=4,
                                                producer_epoch=1, parts=parts)

    def codes(resp):
        got = answered(plan, resp, 24, version).results_by_topic_v3_and_below
        return [(t.name, [(p.partition_index, p.partition_error_code)
                          for p in t.results_by_partition]) for t in got]
    resp = m.AddPartitionsToTxnResponse(parts=(("a", 2, 3, "no such topic"), ("b", 0, 55, ""),
                                               ("b", 1, 55, "")))
    assert codes(resp) == [("b", [(1, 55), (0, 55)]), ("a", [(2, 3)])]
    # our coordinator answers OPERATION_NOT_ATTEMPTED itself: nothing is rewritten
    # (an INVALID_TXN_STATE beside another partition's error stays what it is)
    kept = m.AddPartitionsToTxnResponse(parts=(("a", 2, 3, ""), ("b", 0, 48, ""),
                                               ("b", 1, 48, "")))
    assert codes(kept) == [("b", [(1, 48), (0, 48)]), ("a", [(2, 3)])]
    state = m.AddPartitionsToTxnResponse(parts=(("a", 2, 48, ""), ("b", 0, 48, ""),
                                                ("b", 1, 48, "")))
    assert codes(state) == [("b", [(1, 48), (0, 48)]), ("a", [(2, 48)])]
    fenced = EPOCH if version < 2 else FENCED
    assert codes(m.AddPartitionsToTxnResponse(error=FENCED)) == [
        ("b", [(1, fenced), (0, fenced)]), ("a", [(2, fenced)])]
    # a broker cut off from the cluster: the client finds its coordinator again
    assert codes(m.AddPartitionsToTxnResponse(error=1005))[0][1][0][1] == NOT_AVAILABLE


@pytest.mark.parametrize("version", range(4))
def test_add_offsets_and_end_txn(version):
    plan = plan_of(serve_txn.add_offsets_to_txn, 25, version, {
        "transactional_id": "tx", "producer_id": 4, "producer_epoch": 1, "group_id": "g"})
    assert plan.request == m.AddOffsetsToTxn(transactional_id="tx", producer_id=4,
                                             producer_epoch=1, group="g")
    fenced = EPOCH if version < 2 else FENCED
    assert answered(plan, m.AddOffsetsToTxnResponse(error=FENCED), 25, version).error_code \
        == fenced
    for committed in (True, False):
        plan = plan_of(serve_txn.end_txn, 26, version, {
            "transactional_id": "tx", "producer_id": 4, "producer_epoch": 1,
            "committed": committed})
        assert plan.request == m.EndTxn(transactional_id="tx", producer_id=4, producer_epoch=1,
                                        commit=committed)
        assert answered(plan, m.EndTxnResponse(), 26, version).error_code == 0
        assert answered(plan, m.EndTxnResponse(error=FENCED), 26, version).error_code == fenced
        assert answered(plan, m.EndTxnResponse(error=51), 26, version).error_code == 51


# -- TxnOffsetCommit ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(4))
def test_txn_offset_commit(version):
    body = {"transactional_id": "tx", "group_id": "g", "producer_id": 4, "producer_epoch": 1,
            "generation_id": 3, "member_id": "m-1", "group_instance_id": "i",
            "topics": [{"name": "in", "partitions": [
                {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": 2,
                 "committed_metadata": None},
                {"partition_index": 1, "committed_offset": 20, "committed_metadata": "x"}]}]}
    plan = plan_of(serve_txn.txn_offset_commit, 28, version, body)
    member = (3, "m-1", "i") if version >= 3 else (-1, "", None)  # KIP-447 from v3
    assert plan.request == m.TxnOffsetCommit(
        transactional_id="tx", producer_id=4, producer_epoch=1, group="g",
        generation=member[0], member_id=member[1], group_instance_id=member[2],
        offsets=(OffsetCommit("in", 0, 10, ""), OffsetCommit("in", 1, 20, "x")))

    def codes(resp):
        return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in answered(plan, resp, 28, version).topics]
    assert codes(m.TxnOffsetCommitResponse(parts=(("in", 0, 0, ""), ("in", 1, FENCED, "")))) \
        == [("in", [(0, 0), (1, EPOCH if version < 2 else FENCED)])]
    loading = NOT_AVAILABLE if version < 2 else LOADING
    assert codes(m.TxnOffsetCommitResponse(error=LOADING)) == [("in", [(0, loading),
                                                                      (1, loading)])]


# -- DescribeTransactions, ListTransactions ------------------------------------------------------
def test_describe_transactions():
    plan = plan_of(serve_txn.describe_transactions, 65, 0, {"transactional_ids": ["a", "z"]})
    assert plan.request == m.DescribeTransactions(transactional_ids=("a", "z"))
    resp = m.DescribeTransactionsResponse(transactions=(
        TxnDescription("z", 105, "unknown", "", -1, -1, 0, -1, ()),
        TxnDescription("a", 0, "", "Ongoing", 7, 2, 60000, 1_700_000_000_000,
                       (TopicPartition("t", 1), TopicPartition("u", 0),
                        TopicPartition("t", 0)))))
    got = answered(plan, resp, 65, 0).transaction_states
    assert [(s.transactional_id, s.error_code, s.transaction_state) for s in got] == \
        [("a", 0, "Ongoing"), ("z", 105, "")]
    a = got[0]
    assert (a.producer_id, a.producer_epoch, a.transaction_timeout_ms,
            a.transaction_start_time_ms) == (7, 2, 60000, 1_700_000_000_000)
    assert [(t.topic, t.partitions) for t in a.topics] == [("t", (1, 0)), ("u", (0,))]
    every = answered(plan, m.DescribeTransactionsResponse(error=16), 65, 0).transaction_states
    assert [(s.transactional_id, s.error_code) for s in every] == [("a", 16), ("z", 16)]
    empty = plan_of(serve_txn.describe_transactions, 65, 0, {"transactional_ids": []})
    assert empty.request is None and answered(empty, None, 65, 0).transaction_states == ()


@pytest.mark.parametrize("version", (0, 1))
def test_list_transactions_filters(version):
    listing = m.ListTransactionsResponse(transactions=(
        TxnListing("a", 7, "Ongoing"), TxnListing("b", 8, "Ongoing")))
    plan = plan_of(serve_txn.list_transactions, 66, version, {
        "state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [8]})
    assert plan.request == m.ListTransactions(states=("Ongoing",))
    got = answered(plan, listing, 66, version)
    assert got.unknown_state_filters == ("Bogus",)
    assert [(s.transactional_id, s.producer_id, s.transaction_state)
            for s in got.transaction_states] == [("b", 8, "Ongoing")]
    only_unknown = plan_of(serve_txn.list_transactions, 66, version, {"state_filters": ["x"]})
    assert only_unknown.request is None
    assert answered(only_unknown, None, 66, version).transaction_states == ()
    everything = plan_of(serve_txn.list_transactions, 66, version, {})
    assert everything.request == m.ListTransactions()
    assert len(answered(everything, listing, 66, version).transaction_states) == 2
    if version == 1:  # a duration filter: our listing has no start times
        plan = plan_of(serve_txn.list_transactions, 66, 1, {"duration_filter": 1000})
        assert plan.request is None and answered(plan, None, 66, 1).error_code == 42


# -- FindCoordinator, Produce, Fetch, ListOffsets -------------------------------------------------
def test_find_coordinator_of_a_transactional_id():
    plan = plan_of(serve_groups.find_coordinator, 10, 2, {"key": "tx", "key_type": 1})
    assert plan.request == m.FindCoordinator(group="tx", key_type=1)
    got = answered(plan, m.FindCoordinatorResponse(broker_id=0, host="x", port=1), 10, 2)
    assert (got.error_code, got.node_id, got.host, got.port) == (0, 0, "h", 9092)
    share = plan_of(serve_groups.find_coordinator, 10, 2, {"key": "s", "key_type": 2})
    assert share.request is None and answered(share, None, 10, 2).error_code == 42


def test_produce_passes_the_transactional_id_and_answers_fenced_as_kafka_does():
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 61}]}]}
    plan = plan_of(serve_data.produce, 0, 8, body)
    assert plan.request.transactional_id == "tx" and len(plan.request.parts) == 1
    resp = m.ProduceResponse(parts=(("t", 0, FENCED, "fenced", -1, -1),))
    part = answered(plan, resp, 0, 8).responses[0].partition_responses[0]
    assert part.error_code == EPOCH
    assert plan_of(serve_data.produce, 0, 2, dict(body, transactional_id=None)) \
        .request.transactional_id is None


def _fetch_body(isolation: int) -> dict:
    return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": isolation, "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1 << 20},
                {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.parametrize("version", (4, 11))
def test_fetch_read_committed_answers_the_lso_and_aborted_transactions(version):
    plan = plan_of(serve_data.fetch, 1, version, _fetch_body(1))
    assert plan.request.isolation == 1
    resp = m.FetchResponse(parts=(("t", 0, 0, "", 20, 0, 0), ("t", 1, 6, "", -1, -1, 0)),
                           payload=(b"", b""),
                           txn=(TxnPartState("t", 0, 12, (AbortedTxn(7, 5), AbortedTxn(9, 8))),))
    p0, p1 = answered(plan, resp, 1, version).responses[0].partitions
    assert (p0.high_watermark, p0.last_stable_offset) == (20, 12)
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [(7, 5), (9, 8)]
    assert (p1.error_code, p1.last_stable_offset, p1.aborted_transactions) == (6, -1, None)
    # read_uncommitted: the log's LSO (Kafka answers it at every level; capped
    # by the answer's high watermark), no aborted transactions
    plan = plan_of(serve_data.fetch, 1, version, _fetch_body(0))
    assert plan.request.isolation == 0
    p0, p1 = answered(plan, resp, 1, version).responses[0].partitions
    assert (p0.last_stable_offset, p0.aborted_transactions) == (15, None)
    assert (p1.error_code, p1.last_stable_offset) == (6, -1)
    LSO[("t", 0)] = 25  # moved on since the read: the answer's high watermark
    assert answered(plan, resp, 1, version).responses[0].partitions[0].last_stable_offset == 20
    LSO.clear()  # the log left this broker since the read: the high watermark
    assert answered(plan, resp, 1, version).responses[0].partitions[0].last_stable_offset == 20
    LSO[("t", 0)] = 15
    bad = plan_of(serve_data.fetch, 1, version, _fetch_body(2))
    assert bad.request is None
    assert {p.error_code for p in answered(bad, None, 1, version).responses[0].partitions} \
        == {42}


def test_list_offsets_isolation():
    body = {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]}
    assert plan_of(serve_data.list_offsets, 2, 5, body).request.isolation == 1
    assert plan_of(serve_data.list_offsets, 2, 1, body).request.isolation == 0  # v1: none
    bad = plan_of(serve_data.list_offsets, 2, 5, dict(body, isolation_level=3))
    assert bad.request is None
    assert answered(bad, None, 2, 5).topics[0].partitions[0].error_code == 42


@pytest.mark.parametrize("version", (5, 6, 7))
def test_offset_fetch_require_stable(version):
    body = {"group_id": "g", "topics": [{"name": "in", "partition_indexes": [0, 1]}],
            "require_stable": True}
    plan = plan_of(serve_groups.offset_fetch, 9, version, body)
    assert plan.request == m.FetchOffsets(group="g", parts=(TopicPartition("in", 0),
                                                            TopicPartition("in", 1)),
                                          require_stable=version >= 7)
    got = answered(plan, m.FetchOffsetsResponse(error=88, message="undecided"), 9, version)
    # Kafka's shape: each partition asked is unstable, the group is fine
    assert got.error_code == 0
    assert [(p.partition_index, p.error_code, p.committed_offset)
            for p in got.topics[0].partitions] == [(0, 88, -1), (1, 88, -1)]
    every = plan_of(serve_groups.offset_fetch, 9, version, dict(body, topics=None))
    assert answered(every, m.FetchOffsetsResponse(error=88), 9, version).error_code == 88


def test_oversized_requests_are_refused_before_their_entries_are_built():
    from logbroker.errors import InvalidRequestError
    from logbroker.limits import MAX_PARTITIONS

    many = list(range(MAX_PARTITIONS + 1))
    cases = [(serve_txn.add_partitions_to_txn, 24, {"v3_and_below_topics": [
                  {"name": "t", "partitions": many}]}),
             (serve_txn.txn_offset_commit, 28, {"topics": [{"name": "t", "partitions": [
                  {"partition_index": p, "committed_offset": 0} for p in many]}]}),
             (serve_txn.describe_transactions, 65, {"transactional_ids": ["x"] * len(many)}),
             (serve_txn.list_transactions, 66, {"producer_id_filters": many})]
    for translator, key, body in cases:
        with pytest.raises(InvalidRequestError, match="at most 10000"):
            plan_of(translator, key, 0, body)
