"""Admin.create_partitions and Admin.delete_records (sync and asyncio) and
the CLI's ``topics alter --partitions`` / ``topics delete-records`` against
one real broker: a running group of our Consumer takes the new partitions;
a moved log start is what readers start at, and it survives a crash (the
Spark planner of the data dir reads it too)."""

from __future__ import annotations

import asyncio
import json

import pytest

from logbroker import Admin, Consumer, Producer, aio
from logbroker.errors import (InvalidPartitionsError, OffsetOutOfRangeError,
                              UnknownTopicOrPartitionError)
from tests.support.fixtures import (FAST, BrokerProcess, invoke_cli, invoked_error, invoked_ok,
                                    wait_until)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("partitions-records") / "data",
                      config={"group_initial_rebalance_delay_ms": 0}).start()
    yield b
    b.kill()


def _fill(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    """``n`` records, one batch each (so a log start may fall between them)."""
    with Producer(bootstrap, linger_ms=0) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, partition=partition).result(10)


def test_create_partitions_and_a_running_group_takes_them(broker):
    with Admin(broker.bootstrap, **FAST) as a, \
            Consumer(broker.bootstrap, group="grow-ours", metadata_max_age_ms=200,
                     **FAST) as c:
        a.create_topic("grow", 1)
        c.subscribe(["grow"])
        wait_until(lambda: c.poll(0.05) is not None and c.assignment() == {("grow", 0)}, 10,
                   "the one partition assigned")
        assert a.create_partitions({"grow": 3}, validate_only=True) == {"grow": None}
        assert a.list_topics()["grow"] == 1
        assert a.create_partitions({"grow": 3}) == {"grow": None}
        assert a.list_topics()["grow"] == 3
        wait_until(lambda: c.poll(0.05) is not None and len(c.assignment()) == 3, 10,
                   "the group rebalanced onto 3 partitions")
        assert c.assignment() == {("grow", 0), ("grow", 1), ("grow", 2)}
        refused = a.create_partitions({"grow": 2, "nope": 4}, raise_errors=False)
        assert isinstance(refused["grow"], InvalidPartitionsError)
        assert "must be larger" in str(refused["grow"])
        assert isinstance(refused["nope"], UnknownTopicOrPartitionError)
        with pytest.raises(TypeError):
            a.create_partitions(["grow"])
        a.create_topic("wide", 1)  # 299 new partitions: made in slices off the loop
        assert a.create_partitions({"wide": 300}) == {"wide": None}
        assert a.list_topics()["wide"] == 300
        assert a.list_offsets([("wide", 299)], "latest")[("wide", 299)].offset == 0


def test_delete_records_then_readers_start_at_the_log_start_after_a_crash(broker):
    from logbroker.spark.options import parse_options
    from logbroker.spark.plan import Planner

    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("cut", 2)
        _fill(broker.bootstrap, "cut", 10)
        _fill(broker.bootstrap, "cut", 3, partition=1)
        assert a.delete_records({("cut", 0): 4}) == {("cut", 0): 4}
        with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
            a.delete_records({("cut", 0): 11})
        got = a.delete_records({("cut", 0): 2, ("cut", 9): 1}, raise_errors=False)
        assert got[("cut", 0)] == 4  # below the log start: nothing moves
        assert isinstance(got[("cut", 9)], UnknownTopicOrPartitionError)

    async def everything():
        async with aio.Admin(broker.bootstrap, **FAST) as a:
            return await a.delete_records({("cut", 1): -1})
    assert asyncio.run(everything()) == {("cut", 1): 3}

    broker.kill()  # a crash: the log start was made durable before the answers
    broker.start()
    with Admin(broker.bootstrap, **FAST) as a:
        starts = [p.log_start for p in a.describe_topics(["cut"])["cut"].partitions]
        assert starts == [4, 3]
        assert a.list_offsets([("cut", 0)], "earliest")[("cut", 0)].offset == 4
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("cut", 0)])
        records = []
        wait_until(lambda: records.extend(c.poll(0.1)) or len(records) >= 6, 10, "6 records")
        assert [r.offset for r in records] == list(range(4, 10))
    planner = Planner(parse_options({"path": broker.data_dir, "subscribe": "cut"}))
    try:
        assert sorted((s.partition, s.start, s.end) for s in planner.plan()) == \
            [(0, 4, 10)]
    finally:
        planner.close()


def test_cli_topics_alter_and_delete_records(broker):
    def lb(*args):
        return invoke_cli(args, bootstrap=broker.bootstrap)
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("clip", 2)
    _fill(broker.bootstrap, "clip", 5)
    assert "now has 4 partition(s)" in invoked_ok(lb("topics", "alter", "clip",
                                                     "--partitions", "4"))
    rows = json.loads(invoked_ok(lb("topics", "delete-records", "clip", "--partition", "0",
                                    "--before-offset", "3", "--json")))
    assert rows == [{"topic": "clip", "partition": 0, "log_start": 3}]
    assert "must be larger" in invoked_error(lb("topics", "alter", "clip", "--partitions", "3"),
                                             "INVALID_PARTITIONS")
