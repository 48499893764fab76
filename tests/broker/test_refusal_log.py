"""Every refusal a client sees is named in the broker log at debug level
(net/refusals.py): the pure formatter over sample responses, and a real
broker at ``--log-level debug`` refusing requests on both listeners."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from logbroker.net.refusals import MAX_PARTS, log_refusals
from logbroker.protocol import messages as m
from tests.support.fixtures import RawConn, wait_until
from tests.support.kafka_raw import WAIT, Raw, kafka_broker

kafka_admin = pytest.importorskip("kafka.admin")
kafka_errors = pytest.importorskip("kafka.errors")

CONN = SimpleNamespace(peer="127.0.0.1:5000", session=SimpleNamespace(principal="User:bob"))


def _lines(response, caplog) -> list[str]:
    caplog.clear()
    log = logging.getLogger("logbroker.test-refusals")
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log_refusals(log, CONN, response)
    return [r.getMessage() for r in caplog.records]


def test_each_refused_part_is_named_with_its_error_and_message(caplog):
    lines = _lines(m.ProduceResponse(parts=(("orders", 0, 0, "", 12, 0),
                                            ("orders", 1, 45, "gap", -1, -1))), caplog)
    assert len(lines) == 1, lines
    assert "refused Produce topic='orders' partition=1 from 127.0.0.1:5000 (User:bob)" in lines[0]
    assert lines[0].endswith(": gap") and "45" not in lines[0].split(":")[-1]
    top = _lines(m.FetchResponse(error=42, message="Fetch: parts: expected a list"), caplog)
    assert top == ["refused Fetch from 127.0.0.1:5000 (User:bob): INVALID_REQUEST: "
                   "Fetch: parts: expected a list"]
    groups = _lines(m.DeleteGroupsResponse(groups=(("billing", 0, ""),
                                                   ("nope", 24, "unknown group 'nope'"))), caplog)
    assert len(groups) == 1 and "group='nope'" in groups[0] and "unknown group" in groups[0]


def test_nothing_for_answers_without_an_error_and_parts_are_bounded(caplog):
    assert _lines(m.ProduceResponse(parts=(("orders", 0, 0, "", 12, 0),)), caplog) == []
    assert _lines(m.ListGroupsResponse(groups=("a", "b")), caplog) == []
    many = tuple(("t", p, 3, "unknown topic", -1, -1) for p in range(40))
    lines = _lines(m.ProduceResponse(parts=many), caplog)
    assert len(lines) == MAX_PARTS + 1, lines
    assert lines[-1] == f"refused Produce: {40 - MAX_PARTS} more part(s) from 127.0.0.1:5000 " \
                        "(User:bob)"


def test_a_debug_broker_logs_refusals_of_both_listeners(tmp_path):
    with kafka_broker(tmp_path / "data", "--log-level", "debug") as (b, bootstrap):
        admin = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap,
                                             request_timeout_ms=int(WAIT * 1000))
        try:
            with pytest.raises(kafka_errors.InvalidTopicError):
                admin.create_topics([kafka_admin.NewTopic("a/b", 1, 1)])
        finally:
            admin.close()
        conn = RawConn(b.port)
        try:
            got = conn.call(m.DeleteTopics(topics=("never-there",)))
            assert got.topics[0].error != 0
        finally:
            conn.close()
        raw = Raw(bootstrap)  # a refusal the Kafka listener makes itself (a key type it lacks)
        try:
            raw.sock.sendall(raw.send(10, 1, 1, {"key": "share-1", "key_type": 2}))
            assert raw.recv(10, 1)[1].error_code != 0
        finally:
            raw.close()
        wait_until(lambda: "refused Kafka api 10 v1" in b.log(), WAIT,
                   "the FindCoordinator refusal in the broker log")
        wait_until(lambda: "refused DeleteTopics name='never-there'" in b.log(), WAIT,
                   "the DeleteTopics refusal in the broker log")
        text = b.log()
        assert "refused CreateTopics name='a/b'" in text and "INVALID_TOPIC" in text, text[-3000:]
