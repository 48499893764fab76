"""FindCoordinator on the Kafka listener (kafka/serve_groups.py): our
FindCoordinator's broker answered at its Kafka address, on a single node
and over a cluster view (pure: the plan's answer for given responses)."""

from __future__ import annotations

from types import SimpleNamespace

from logbroker.kafka.apis_groups import FIND_COORDINATOR
from logbroker.kafka.plan import KafkaSite
from logbroker.metadata.interface import Directory, KafkaBroker
from logbroker.kafka.serve_groups import find_coordinator
from logbroker.protocol import messages as m

BODY = FIND_COORDINATOR.request.value_class()(key="g", key_type=0)


def _answer(site: KafkaSite, resp, body=BODY) -> dict:
    plan = find_coordinator(site, None, body)
    assert plan.request is None or plan.request == m.FindCoordinator(group=body.key,
                                                                     key_type=body.key_type)
    return plan.answer(resp)


def test_a_single_node_names_itself_at_its_kafka_address():
    alone = Directory({3: KafkaBroker(3, ("kafka.example", 9092))}, 3)  # LocalMetadata's
    site = KafkaSite(3, "kafka.example", 9092, None, meta=SimpleNamespace(directory=lambda: alone))
    ours = m.FindCoordinatorResponse(broker_id=3, host="127.0.0.1", port=9555)
    assert _answer(site, ours) == {"error_code": 0, "node_id": 3, "host": "kafka.example",
                                   "port": 9092}


def test_in_a_cluster_the_coordinator_is_named_at_its_own_kafka_address():
    brokers = {1: SimpleNamespace(id=1, kafka=("b1", 9192)), 2: SimpleNamespace(id=2, kafka=None)}
    view = SimpleNamespace(brokers=brokers)  # the cluster's view, read at answer time
    site = KafkaSite(1, "b1", 9192, None, meta=SimpleNamespace(directory=lambda: view))
    brokers[3] = SimpleNamespace(id=3, kafka=("b3", 9392))
    got = _answer(site, m.FindCoordinatorResponse(broker_id=3, host="b3", port=9555))
    assert (got["error_code"], got["node_id"], got["host"], got["port"]) == (0, 3, "b3", 9392)
    for missing in (2, 4):  # no Kafka listener; not live in the view
        got = _answer(site, m.FindCoordinatorResponse(broker_id=missing, host="x", port=1))
        assert (got["error_code"], got["node_id"]) == (15, -1)


def test_errors_and_transactional_ids():
    alone = Directory({0: KafkaBroker(0, ("h", 1))}, 0)
    site = KafkaSite(0, "h", 1, None, meta=SimpleNamespace(directory=lambda: alone))
    got = _answer(site, m.FindCoordinatorResponse(error=15, message="no leader yet"))
    assert (got["error_code"], got["error_message"], got["node_id"]) == (15, "no leader yet", -1)
    txn = FIND_COORDINATOR.request.value_class()(key="t", key_type=1)  # a transactional id
    assert _answer(site, m.FindCoordinatorResponse(broker_id=0))["node_id"] == 0
    assert _answer(site, m.FindCoordinatorResponse(broker_id=0), txn)["port"] == 1
    share = FIND_COORDINATOR.request.value_class()(key="s", key_type=2)  # share groups: not ours
    assert _answer(site, None, share)["error_code"] == 42
