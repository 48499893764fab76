"""CreateTopics cost and caps (issue 29, item 1): the partition limits on both
listeners, a race for the last capacity, a 10,000-partition creation that
leaves the loop free for other clients, no descriptor per empty partition, a
bounded shutdown, and a crash in the middle of a creation. Real brokers on
127.0.0.1, our client, kafka-python and raw connections."""

from __future__ import annotations

import os
import threading
import time

import pytest
from kafka import admin as kafka_admin
from kafka.errors import PolicyViolationError as KafkaPolicyViolation

from logbroker import Admin
from logbroker.errors import PolicyViolationError
from logbroker.protocol import messages as m
from tests.support.fixtures import BrokerProcess, RawConn, wait_until
from tests.support.kafka_raw import Raw, kafka_broker

LIMITS = {"max_partitions_per_request": 100, "max_partitions_per_broker": 150}


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_partition_limits_refused_on_both_listeners(tmp_path):
    with kafka_broker(tmp_path / "data", config=LIMITS) as (b, kafka):
        with Admin(b.bootstrap) as admin:
            with pytest.raises(PolicyViolationError, match="max_partitions_per_request is 100"):
                admin.create_topics([("a", 60), ("b", 60)])
            assert admin.create_topic("first", 100)
            with pytest.raises(PolicyViolationError,
                               match=r"make 160; max_partitions_per_broker is 150"):
                admin.create_topic("second", 60)
            assert admin.create_topic("fits", 50)  # exactly the limit
        kadmin = kafka_admin.KafkaAdminClient(bootstrap_servers=kafka, request_timeout_ms=10_000)
        try:
            with pytest.raises(KafkaPolicyViolation):  # per request, Kafka's code 44
                kadmin.create_topics([kafka_admin.NewTopic("k", 101, 1)])
            with pytest.raises(KafkaPolicyViolation):  # per broker: it is full
                kadmin.create_topics([kafka_admin.NewTopic("k", 1, 1)])
            with pytest.raises(KafkaPolicyViolation):  # validate_only checks it too
                kadmin.create_topics([kafka_admin.NewTopic("k", 101, 1)], validate_only=True)
        finally:
            kadmin.close()
        with Admin(b.bootstrap) as admin:
            assert sorted(t for t in admin.list_topics() if not t.startswith("__")) == \
                ["first", "fits"]
        log = b.log()
        assert "above max_partitions_per_broker 150" in log  # the refusal names its rule


def test_auto_creation_counts_against_the_broker_limit(tmp_path):
    with BrokerProcess(tmp_path / "data", config={"max_partitions_per_broker": 3,
                                                  "default_partitions": 2}) as b:
        conn = RawConn(b.port)
        assert conn.call(m.CreateTopics(topics=(("one", 2, {}),))).topics[0].error == 0
        # a Metadata that would auto-create a 2-partition topic: over the limit
        resp = conn.call(m.Metadata(topics=("auto",), auto_create=True))
        assert resp.topics[0].error == PolicyViolationError.code, resp


def test_two_creations_racing_for_the_last_capacity(tmp_path):
    with BrokerProcess(tmp_path / "data", config={"max_partitions_per_broker": 300}) as b:
        a, c = RawConn(b.port), RawConn(b.port)
        for _ in range(3):  # sent back to back: both are in flight together
            names = (f"x{time.monotonic_ns()}", f"y{time.monotonic_ns()}")
            ca = a.send(m.CreateTopics(topics=((names[0], 200, {}),)))
            cc = c.send(m.CreateTopics(topics=((names[1], 200, {}),)))
            ra, rc = a.recv(60), c.recv(60)
            assert (ra.cid, rc.cid) == (ca, cc)
            errors = sorted([ra.message.topics[0].error, rc.message.topics[0].error])
            assert errors == [0, PolicyViolationError.code]
            with Admin(b.bootstrap) as admin:
                won = [n for n in names if n in admin.list_topics()]
                assert len(won) == 1
                admin.delete_topics(won)


def _pinger(kafka: str, stop: threading.Event, rtts: list) -> None:
    raw = Raw(kafka)
    try:
        cid = 0
        while not stop.is_set():
            cid += 1
            t = time.perf_counter()
            raw.sock.sendall(raw.send(18, 2, cid, {}))  # ApiVersions
            raw.recv(18, 2)
            rtts.append(time.perf_counter() - t)
            stop.wait(0.005)
    finally:
        raw.close()


def test_ten_thousand_partitions_leave_the_loop_free(tmp_path):
    """A ~60-byte request for 10,000 partitions on our listener, then their
    deletion, while a Kafka client pings ApiVersions on the other: its
    round trips stay short (on a broker that made them in one go they took
    tens of seconds); the topic appears whole; empty partitions hold no
    descriptor; shutdown is quick."""
    with kafka_broker(tmp_path / "data") as (b, kafka):
        conn = RawConn(b.port)
        stop, rtts = threading.Event(), []
        pinger = threading.Thread(target=_pinger, args=(kafka, stop, rtts))
        pinger.start()
        try:
            made = conn.call(m.CreateTopics(topics=(("big", 10_000, {}),)), timeout=120)
            assert made.topics[0].error == 0, made
            assert conn.call(m.Metadata(topics=("big",))).topics[0].partitions == 10_000
            assert _fds(b.pid) < 200  # not one per partition
            first = len(rtts)
            gone = conn.call(m.DeleteTopics(topics=("big",)), timeout=120)
            assert gone.topics[0].error == 0, gone
        finally:
            stop.set()
            pinger.join(30)
        for seen in (rtts[:first], rtts[first:]):  # while creating, while deleting
            assert len(seen) > 5, rtts
            seen = sorted(seen)
            p99, worst = seen[int(len(seen) * 0.99) - 1], seen[-1]
            assert p99 < 0.1 and worst < 2.0, (p99, worst, seen[-10:])
        assert not list((tmp_path / "data").glob("big-*"))
        started = time.monotonic()
        assert b.stop() == 0
        assert time.monotonic() - started < 10.0  # shutdown_timeout_ms' order, not minutes


def test_a_large_auto_creation_is_made_in_the_background(tmp_path):
    """Metadata auto-creating a topic of ``default_partitions`` = 3,000: the
    answer is UNKNOWN_TOPIC_OR_PARTITION (retriable) at once, the topic
    appears whole later, and other clients are served meanwhile."""
    with kafka_broker(tmp_path / "data", config={"default_partitions": 3000}) as (b, kafka):
        conn = RawConn(b.port)
        stop, rtts = threading.Event(), []
        pinger = threading.Thread(target=_pinger, args=(kafka, stop, rtts))
        pinger.start()
        try:
            first = conn.call(m.Metadata(topics=("auto-big",), auto_create=True))
            assert first.topics[0].error == 3, first  # being created: retry
            got = wait_until(lambda: [t for t in conn.call(m.Metadata(topics=("auto-big",))).topics
                                      if t.error == 0], 60, "the topic made", interval=0.05)
            assert got[0].partitions == 3000, got
        finally:
            stop.set()
            pinger.join(30)
        assert rtts and max(rtts) < 2.0, sorted(rtts)[-10:]


def test_a_crash_mid_creation_leaves_no_half_topic(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        conn = RawConn(b.port)
        conn.send(m.CreateTopics(topics=(("half", 10_000, {}),)))
        data = tmp_path / "data"
        wait_until(lambda: (data / "half-300").is_dir(), 60, "some slices made")
        b.kill()  # some slices made, the topic not finished
        assert (data / "half-0").is_dir()
        b.start()
        with Admin(b.bootstrap) as admin:
            assert "half" not in admin.list_topics()
            assert not (data / "half-0").exists()  # rolled back at open
            assert admin.create_topic("half", 20)  # and the name is free again
            assert admin.list_topics()["half"] == 20
        assert "what is left of it is removed" in b.log()
    finally:
        b.kill()


def test_a_crash_mid_deletion_is_finished_at_the_next_start(tmp_path):
    data = tmp_path / "data"
    b = BrokerProcess(data).start()
    try:
        conn = RawConn(b.port)
        assert conn.call(m.CreateTopics(topics=(("doomed", 10_000, {}),)),
                         timeout=120).topics[0].error == 0
        conn.send(m.DeleteTopics(topics=("doomed",)))
        wait_until(lambda: not (data / "doomed-300").is_dir(), 60, "some partitions removed")
        b.kill()  # some partitions removed, not all
        assert (data / "doomed-9999").is_dir()
        b.start()
        with Admin(b.bootstrap) as admin:
            assert "doomed" not in admin.list_topics()  # not resurrected in part
        assert not list(data.glob("doomed-*"))
    finally:
        b.kill()


@pytest.mark.slow
def test_shutdown_with_twenty_thousand_partitions_is_bounded(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        conn = RawConn(b.port)
        for name in ("s1", "s2"):
            assert conn.call(m.CreateTopics(topics=((name, 10_000, {}),)),
                             timeout=300).topics[0].error == 0
        started = time.monotonic()
        assert b.stop() == 0
        assert time.monotonic() - started < 10.0
