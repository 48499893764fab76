"""The web console without a browser (docs/console.md): its pure views, its
input checks, the message page reader over a real store, the sampler's
rings, and that the app has no route that changes anything."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.fixtures import T0, fill, open_store
from logbroker.console import inputs, views
from logbroker.console.history import History
from logbroker.console.messages import hexdump, read_page, render
from logbroker.console.state import State
from logbroker.errors import (GroupNotFoundError, InvalidRequestError, InvalidTopicError,
                              LogbrokerError, OffsetOutOfRangeError, UnknownTopicOrPartitionError)
from logbroker.records import build_batch


def state(**over) -> State:
    base = dict(broker_id=0, address="127.0.0.1:9555", taken_ms=T0, connections=2,
                topics={"orders": 2, "__consumer_offsets": 1},
                logs={("orders", 0): (0, 30, 31, 4000, False), ("orders", 1): (5, 12, 12, 900, False),
                      ("__consumer_offsets", 0): (0, 3, 3, 100, False)},
                groups=[{"name": "billing", "state": "Empty", "protocol": "", "generation": 0,
                         "members": [], "offsets": {("orders", 0): 10, ("orders", 1): 12,
                                                    ("gone", 0): 4}}],
                traffic={("orders", 0): (100, 10, 50), ("orders", 1): (20, 2, 0)}, cluster=None)
    base.update(over)
    return State(**base)


# -- views -----------------------------------------------------------------------------------
def test_overview_of_a_single_node_is_itself():
    o = views.overview(state())
    assert o["mode"] == "single node" and o["controller"] == 0 and o["under_replicated"] == 0
    assert o["brokers"] == [{"id": 0, "address": "127.0.0.1:9555", "controller": True, "self": True}]
    assert (o["topics"], o["partitions"], o["groups"]) == (2, 3, 1)


def test_overview_of_a_cluster_counts_under_replicated_partitions():
    cluster = {"name": "prod", "controller": 2, "me": 1, "brokers": [(1, "h1", 1), (2, "h2", 2)],
               "partitions": {("orders", 0): (1, (1, 2), (1, 2), 3), ("orders", 1): (2, (2, 1), (2,), 4)},
               "replication": {"orders": 2}, "under_replicated_led": 0, "leaders": 1}
    o = views.overview(state(broker_id=1, cluster=cluster))
    assert o["mode"] == "cluster" and o["cluster"] == "prod" and o["under_replicated"] == 1
    assert [(b["id"], b["controller"], b["self"]) for b in o["brokers"]] == [(1, False, True),
                                                                            (2, True, False)]
    rows = views.topic(state(broker_id=1, cluster=cluster), "orders")["partitions"]
    assert [(r["leader"], r["isr"]) for r in rows] == [(1, [1, 2]), (2, [2])]


def test_topics_and_a_topic_page():
    t = {x["name"]: x for x in views.topics(state())["topics"]}
    assert t["orders"]["records"] == 30 + 7 and t["orders"]["size"] == 4900
    assert t["__consumer_offsets"]["internal"]
    rows = views.topic(state(), "orders")["partitions"]
    assert [(r["log_start"], r["hw"], r["log_end"], r["size"]) for r in rows] == \
        [(0, 30, 31, 4000), (5, 12, 12, 900)]
    with pytest.raises(UnknownTopicOrPartitionError):
        views.topic(state(), "nope")


def test_group_lag_per_partition_and_in_total():
    g = views.group(state(), "billing")
    assert [(o["topic"], o["partition"], o["lag"]) for o in g["offsets"]] == \
        [("gone", 0, None), ("orders", 0, 20), ("orders", 1, 0)]
    assert g["lag"] == 20 and views.groups(state())["groups"][0]["lag"] == 20
    with pytest.raises(GroupNotFoundError):
        views.group(state(), "nope")


def test_member_assignment_decodes_ours_and_kafkas_consumer_protocol():
    from logbroker.kafka.consumer_protocol import KafkaAssignment, encode_assignment
    from logbroker.protocol.consumer_protocol import Assignment

    assert views.assignment_of(Assignment((("orders", 1), ("orders", 0))).encode()) == \
        ["orders-0", "orders-1"]
    # a Kafka member's assignment is kept as its leader wrote it
    assert views.assignment_of(encode_assignment(KafkaAssignment((("t", 1), ("s", 0)), b"u"))
                               ) == ["t-1", "s-0"]
    assert views.assignment_of(b"\xc1 not msgpack") == [] and views.assignment_of(b"") == []


def test_throughput_rates_between_samples():
    samples = [(0, {"a": [0, 0, 0]}), (2000, {"a": [200, 20, 10], "b": [50, 5, 0]}),
               (4000, {"a": [100, 10, 10], "b": [50, 5, 0]})]  # a restarted: its counter went down
    t = views.throughput(samples)
    assert t["topics"] == ["a", "b"]
    assert t["series"]["a"] == [[2000, 100.0, 10.0, 5.0], [4000, 0.0, 0.0, 0.0]]
    assert t["series"]["b"] == [[2000, 25.0, 2.5, 0.0], [4000, 0.0, 0.0, 0.0]]


def test_history_is_bounded_and_forgets_deleted_groups():
    h = History(keep=3)
    for i in range(5):
        h.record(state(taken_ms=T0 + i))
    assert len(h.traffic) == 3 and h.lag_of("billing") == [[T0 + 2, 20], [T0 + 3, 20], [T0 + 4, 20]]
    h.record(state(groups=[]))
    assert h.lag_of("billing") == [] and not h.lags


def test_the_sampler_survives_a_failing_sample():
    h, calls = History(), []

    def take():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return state()

    async def run():
        task = asyncio.ensure_future(h.run(take, 0.001))
        while len(calls) < 3:
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert h.failures == 1 and len(h.traffic) >= 1


# -- inputs ----------------------------------------------------------------------------------
def test_message_query_defaults_and_bounds():
    q = inputs.check_messages({"topic": "orders"})
    assert (q.partition, q.offset, q.time_ms, q.limit, q.format) == (0, 0, None, 20, "text")
    assert inputs.check_messages({"topic": "t", "limit": "50"}).limit == 50
    assert inputs.check_messages({"topic": "t", "time": "1970-01-01T00:00:01Z"}).time_ms == 1000
    assert inputs.check_messages({"topic": "t", "time": "2000"}).time_ms == 2000
    assert inputs.check_messages({"topic": "t", "time": "1970-01-01T01:00:00+01:00"}).time_ms == 0


@pytest.mark.parametrize("query, error", [
    ({"topic": "orders", "limit": "51"}, InvalidRequestError),
    ({"topic": "orders", "limit": "0"}, InvalidRequestError),
    ({"topic": "orders", "limit": "1e3"}, InvalidRequestError),
    ({"topic": "orders", "offset": "-1"}, InvalidRequestError),
    ({"topic": "orders", "offset": str(1 << 63)}, InvalidRequestError),
    ({"topic": "orders", "partition": "10000"}, InvalidRequestError),
    ({"topic": "orders", "partition": "\u0663"}, InvalidRequestError),  # a non-ASCII digit
    ({"topic": "orders", "offset": "1", "time": "2"}, InvalidRequestError),
    ({"topic": "orders", "time": "yesterday"}, InvalidRequestError),
    ({"topic": "orders", "time": "99999-01-01"}, InvalidRequestError),
    ({"topic": "orders", "format": "html"}, InvalidRequestError),
    ({"topic": "orders", "offset": "1" * 400}, InvalidRequestError),
    ({"topic": "a/b"}, InvalidTopicError),
    ({}, InvalidTopicError),
])
def test_bad_message_queries_are_refused(query, error):
    with pytest.raises(error):
        inputs.check_messages(query)


# -- the message page ------------------------------------------------------------------------
def test_a_page_from_an_offset_is_capped_and_says_where_to_go_on(tmp_path):
    s = fill(tmp_path, partitions=1, batches=10, per=10)
    try:
        lg = s.get_log("orders", 0)
        page = read_page(lg, inputs.check_messages({"topic": "orders", "offset": "15", "limit": "50"}))
        assert [r["offset"] for r in page["records"]] == list(range(15, 65))
        assert page["next_offset"] == 65 and page["hw"] == 100
        assert page["records"][0]["value"]["text"] == "0-15"
        assert page["records"][0]["headers"] == [["h", {"size": 1, "format": "text",
                                                        "truncated": False, "text": "5"}]]
        end = read_page(lg, inputs.check_messages({"topic": "orders", "offset": "95"}))
        assert [r["offset"] for r in end["records"]] == list(range(95, 100)) and end["next_offset"] == 100
        assert read_page(lg, inputs.check_messages({"topic": "orders", "offset": "100"}))["records"] == []
    finally:
        s.close()


def test_a_page_from_a_time_and_past_the_last_time(tmp_path):
    s = fill(tmp_path, partitions=1, batches=10, per=10)  # batch b stamped T0 + b * 1000
    try:
        lg = s.get_log("orders", 0)
        page = read_page(lg, inputs.check_messages({"topic": "orders", "time": str(T0 + 3500),
                                                    "limit": "2"}))
        assert [r["offset"] for r in page["records"]] == [40, 41]
        late = read_page(lg, inputs.check_messages({"topic": "orders", "time": str(T0 + 10**7)}))
        assert late["records"] == [] and late["next_offset"] == 100
    finally:
        s.close()


def test_a_page_before_the_log_start_is_out_of_range(tmp_path):
    s = fill(tmp_path, partitions=1, batches=10, per=10)
    try:
        lg = s.get_log("orders", 0)
        lg.delete_before(50)
        with pytest.raises(OffsetOutOfRangeError):
            read_page(lg, inputs.check_messages({"topic": "orders", "offset": "0"}))
    finally:
        s.close()


def test_a_batch_larger_than_a_page_is_skipped_not_loaded(tmp_path, monkeypatch):
    from logbroker.console import messages

    monkeypatch.setattr(messages, "PAGE_BYTES", 2048)
    s = open_store(tmp_path)
    try:
        s.create_topic("big", 1)
        lg = s.get_log("big", 0)
        lg.append([build_batch([(b"x" * 5000, None, (), T0)])])
        lg.append([build_batch([(b"small", None, (), T0)])])
        lg.set_high_watermark(lg.log_end_offset)
        page = read_page(lg, inputs.check_messages({"topic": "big"}))
        assert page["records"][0]["offset"] == 0 and "more than a page" in page["records"][0]["skipped"]
        assert page["next_offset"] == 1
        rest = read_page(lg, inputs.check_messages({"topic": "big", "offset": "1"}))
        assert rest["records"][0]["value"]["text"] == "small"
    finally:
        s.close()


def test_render_text_json_hex_and_truncation():
    doc = json.dumps({"a": [1, 2]}).encode()
    assert render(doc, "json")["text"] == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render(b"\xff plain", "json") == {"size": 7, "format": "text", "truncated": False,
                                            "text": "\\xff plain", "note": "not JSON"}
    assert render(None, "hex")["text"] is None
    assert render(b"\x00\x01AB", "hex")["text"] == "000000  00 01 41 42" + " " * 36 + "  ..AB"
    big = render(b"y" * (inputs.VALUE_CAP + 1), "text")
    assert big["truncated"] and big["text"].endswith(f"[truncated: {inputs.VALUE_CAP} of "
                                                     f"{inputs.VALUE_CAP + 1} bytes shown]")
    assert len(hexdump(bytes(40)).splitlines()) == 3


# -- the app ---------------------------------------------------------------------------------
def test_the_app_has_no_route_that_changes_anything():
    from logbroker.console.app import make_app

    app = make_app(object())
    changing = {(route.method, route.resource.canonical) for route in app.router.routes()
                if route.method not in ("GET", "HEAD")}
    assert changing == {("POST", "/login"), ("POST", "/logout")}, changing  # sessions only


def test_bad_input_is_a_json_400_and_post_is_refused():
    from aiohttp.test_utils import TestClient, TestServer

    from logbroker.console.app import make_app

    class Fake:
        history, sample_s = History(), 2.0

        def state(self):
            return state()

    async def run():
        async with TestClient(TestServer(make_app(Fake()))) as client:
            out = []
            for method, path in (("GET", "/api/messages?topic=orders&limit=51"),
                                 ("GET", "/api/topic?name=nope"), ("GET", "/api/topic?name=a%2Fb"),
                                 ("POST", "/api/topics"), ("DELETE", "/api/group?name=billing"),
                                 ("GET", "/api/group?name=billing")):
                resp = await client.request(method, path)
                out.append((resp.status, await resp.json(), resp.headers.get("Content-Security-Policy")))
            return out

    (s1, b1, csp), (s2, b2, _), (s3, b3, _), (s4, b4, _), (s5, _, _), (s6, b6, _) = asyncio.run(run())
    assert (s1, b1["code"]) == (400, "INVALID_REQUEST") and "1..50" in b1["message"]
    assert (s2, b2["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    assert (s3, b3["code"]) == (400, "INVALID_TOPIC")
    assert (s4, b4["code"], s5) == (405, "METHOD_NOT_ALLOWED", 405)
    assert s6 == 200 and b6["lag"] == 20 and csp.startswith("default-src 'self'")


def test_a_loopback_console_refuses_a_host_header_naming_another_site():
    from aiohttp.test_utils import TestClient, TestServer

    from logbroker.console.app import _local_name, make_app

    class Fake:
        history, sample_s, loopback = History(), 2.0, True

        def state(self):
            return state()

    async def run():
        async with TestClient(TestServer(make_app(Fake()))) as client:
            out = []
            for host in ("127.0.0.1:9557", "localhost:9557", "[::1]:9557", "evil.example:9557",
                         "evil.example", "127.0.0.1.nip.io:9557"):
                resp = await client.get("/api/topics", headers={"Host": host})
                out.append((resp.status, (await resp.json()).get("code")))
            return out

    ok, local, v6, evil, bare, lookalike = asyncio.run(run())
    assert ok[0] == local[0] == v6[0] == 200
    assert evil == bare == lookalike == (421, "MISDIRECTED_REQUEST")
    assert _local_name("::1") and _local_name("LOCALHOST") and not _local_name("")


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "broker-1.example"])
def test_the_console_with_auth_required_needs_tls_off_loopback(tmp_path, host):
    from logbroker.broker.config import BrokerConfig
    from logbroker.console.app import Console

    class B:
        config = BrokerConfig(data_dir=str(tmp_path), auth_required=True, console_port=0,
                              host=host)

    with pytest.raises(LogbrokerError, match="needs TLS .* would cross the network in clear") as e:
        asyncio.run(Console(B()).start())
    assert e.value.name == "INVALID_CONFIG"


# -- transactions ----------------------------------------------------------------------------
def _txn_state(**over):
    from logbroker.coordinator.txn_state import TxnState

    return TxnState(**{"transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
                       "timeout_ms": 60_000, **over})


def test_partition_transactions_on_the_topic_and_topics_pages():
    s = state(txns={("orders", 0): (25, ((7, 2, 25, T0 - 1500), (8, 0, 27, -1))),
                    ("orders", 1): (12, ())})
    rows = views.topic(s, "orders")["partitions"]
    assert [(r["lso"], r["lso_lag"]) for r in rows] == [(25, 5), (12, 0)]
    assert rows[0]["open_transactions"] == [
        {"producer_id": 7, "producer_epoch": 2, "first_offset": 25, "age_ms": 1500},
        {"producer_id": 8, "producer_epoch": 0, "first_offset": 27, "age_ms": None}]
    assert {t["name"]: t["open_transactions"] for t in views.topics(s)["topics"]} == {
        "orders": 2, "__consumer_offsets": 0}
    assert views.topic(state(), "orders")["partitions"][0]["lso"] is None  # no row: unknown


def test_transactions_page_orders_ids_and_filters_what_the_user_may_not_describe():
    from logbroker.console import pages, txn_views
    from logbroker.console.access import Access

    s = state(txns={("orders", 0): (25, ((7, 2, 25, T0 - 1500),)), ("secret", 0): (3, ((9, 0, 3, T0),))},
              topics={"orders": 2, "secret": 1},
              logs={("orders", 0): (0, 30, 31, 4000, False), ("secret", 0): (0, 4, 4, 10, False)})
    ids = [_txn_state(transactional_id="done", state="CompleteCommit", start_ms=-1),
           _txn_state(transactional_id="young", state="Ongoing", start_ms=T0 - 100,
                      parts=(("orders", 0),)),
           _txn_state(transactional_id="old", state="Ongoing", start_ms=T0 - 9000,
                      parts=(("orders", 0), ("secret", 0))),
           _txn_state(transactional_id="hidden-1", state="Ongoing", start_ms=T0 - 1)]
    page = txn_views.transactions(s, ids, {"committed": 4, "aborted": 1, "timed_out": 0})
    assert [r["transactional_id"] for r in page["coordinated"]] == ["old", "young", "hidden-1", "done"]
    assert page["coordinated"][0]["age_ms"] == 9000 and page["coordinated"][3]["age_ms"] is None
    assert (page["total"], page["open_count"], page["partition_open_total"]) == (4, 3, 2)

    class Auth:  # describes everything but the topic "secret" and ids "hidden-*"
        enforcing = True

        def allows(self, principal, operation, resource_type, name):
            return not name.startswith(("secret", "hidden"))

    a = Access(Auth(), "User:bob")
    page = pages.transactions(a.narrow(s), ids, {}, a)
    assert [r["transactional_id"] for r in page["coordinated"]] == ["old", "young", "done"]
    assert page["coordinated"][0]["partitions"] == ["orders-0"]
    assert page["coordinated"][0]["hidden_partitions"] == 1
    assert [(r["topic"], r["lso_lag"], r["age_ms"]) for r in page["partition_open"]] == [
        ("orders", 5, 1500)]


def test_the_state_is_gathered_in_slices_that_yield_to_the_loop():
    """300 partitions with a slice of 0 s: the gather yields to the loop between
    chunks (another task runs meanwhile), and the open transactions' details
    are read only where a partition counts some."""
    from types import SimpleNamespace

    from logbroker.console.state import gather

    class Log:
        def __init__(self, p):
            self.topic, self.partition, self.offline = "t", p, None
            self.log_end_offset = self.high_watermark = 10
            self.log_start_offset, self.details = 0, 0

        def size_in_bytes(self):
            return 100

        def transaction_numbers(self):
            return (7, 1) if self.partition == 5 else (10, 0)

        def open_transactions_detail(self):
            self.details += 1
            return [(42, 1, 7, T0 - 50)]

    logs = {("t", p): Log(p) for p in range(300)}
    broker = SimpleNamespace(
        store=SimpleNamespace(logs=lambda: list(logs.values()), get_log=lambda t, p: logs[t, p]),
        coordinator=SimpleNamespace(groups=lambda: []), connections={},
        meta=SimpleNamespace(cluster_numbers=lambda: None, topic_counts=lambda: {"t": 300},
                             cluster_state=lambda numbers: None),
        config=SimpleNamespace(broker_id=0, host="127.0.0.1"), port=9555)
    traffic = SimpleNamespace(parts={("t", p): [p, 1, 0] for p in range(300)})

    async def run():
        ticks = 0

        async def other():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.get_running_loop().create_task(other())
        await asyncio.sleep(0)
        before = ticks
        s = await gather(broker, traffic, slice_s=0.0)
        task.cancel()
        return s, ticks - before

    s, ticks = asyncio.run(run())
    assert ticks >= 2 * 300 // 32  # the logs and the traffic counters, a yield per chunk
    assert s.logs[("t", 5)] == (0, 10, 10, 100, False) and s.traffic[("t", 9)] == (9, 1, 0)
    assert s.txns[("t", 5)] == (7, ((42, 1, 7, T0 - 50),)) and s.txns[("t", 4)] == (10, ())
    assert sum(lg.details for lg in logs.values()) == 1
