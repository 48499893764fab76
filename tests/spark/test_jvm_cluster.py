"""Replica locality (issue 28, item 3): a bootstrap read with option
``paths`` (each broker's data dir) runs on the JVM connector, each task
reading the segment files of an in-sync replica on its host, and Spark
prefers those hosts. Against one cluster of 3 real brokers (etcd) per
module: the planned splits name the leader's host first and a data dir per
in-sync replica; the JVM read (bootstrap + paths) returns the rows of the
Python read (bootstrap: Fetch from the leaders); LocalityListener says at
which locality Spark ran the tasks. The option rules are unit-tested
without a cluster."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from logbroker.spark.options import SparkSourceError, parse_options

JAVA = bool(shutil.which("java") or os.environ.get("JAVA_HOME"))
TOPIC, PARTITIONS, PER = "located", 3, 200


# -- the option, without a cluster -----------------------------------------------------------
def test_paths_option_errors(tmp_path):
    remote = {"bootstrap": "127.0.0.1:9", "subscribe": "t"}
    assert parse_options({**remote, "Paths": '{"2": "/b", "1": "/a"}'}).paths == {1: "/a", 2: "/b"}
    assert parse_options(remote).paths == {}
    with pytest.raises(SparkSourceError, match="option paths .* is for bootstrap mode"):
        parse_options({"path": str(tmp_path), "subscribe": "t", "paths": '{"1": "/a"}'})
    for raw in ("{}", "[1]", '{"x": "/a"}', '{"-1": "/a"}', '{"1": "relative"}', '{"1": 5}',
                "not json"):
        with pytest.raises(SparkSourceError, match="option paths must be JSON like"):
            parse_options({**remote, "paths": raw})


def test_engine_rules_of_the_python_source():
    pytest.importorskip("pyspark")
    from logbroker.spark.source import _say_engine

    with pytest.raises(SparkSourceError, match="needs option paths"):
        _say_engine({"engine": "jvm"}, "127.0.0.1:9", paths=False)
    _say_engine({"engine": "python"}, "127.0.0.1:9", paths=True)  # reads by Fetch: paths ignored
    _say_engine({}, "127.0.0.1:9", paths=False)  # auto: Python, nothing to say


# -- one cluster for the module ----------------------------------------------------------------
@pytest.fixture(scope="module")
def located(tmp_path_factory):
    """3 brokers, topic ``located`` (RF 3, 3 partitions, PER records each,
    acknowledged by all in-sync replicas); yields (cluster, paths option)."""
    from tests.support.cluster import Cluster, EtcdProcess, require_etcd
    from tests.support.fixtures import FAST, T0
    from logbroker import Producer

    require_etcd()
    base = tmp_path_factory.mktemp("located")
    etcd = EtcdProcess(base / "etcd").start()
    cluster = Cluster(base, etcd.url)
    try:
        cluster.start()
        cluster.create(TOPIC, PARTITIONS, replication_factor=3, min_insync_replicas=2)
        with Producer(cluster.bootstrap, acks="all", **FAST) as p:
            for first in range(0, PER, 50):
                handles = [p.send(TOPIC, b"v-%d-%d" % (part, i), key=b"k%d" % (i % 7),
                                  headers=[("n", b"%d" % i)], partition=part,
                                  timestamp_ms=T0 + i)
                           for i in range(first, first + 50) for part in range(PARTITIONS)]
                for h in handles:
                    h.result(timeout=30)
        paths = {i: os.path.abspath(b.data_dir) for i, b in cluster.brokers.items()}
        yield cluster, paths
    finally:
        cluster.close()
        etcd.close()


def ask_bridge(options: dict) -> dict:
    from logbroker.spark import bridge

    return bridge.answer(json.dumps({"op": "plan", "options": options, "columns": [],
                                     "filters": None}))


def test_planned_splits_name_the_leader_first_and_a_dir_per_in_sync_replica(located):
    cluster, paths = located
    answer = ask_bridge({"bootstrap": cluster.bootstrap, "subscribe": TOPIC,
                         "paths": json.dumps(paths)})
    splits = answer["splits"]
    assert [(s["partition"], s["start"], s["end"]) for s in splits] == \
        [(p, 0, PER) for p in range(PARTITIONS)]
    hosts = {b.id: b.host for b in _describe(cluster).brokers}
    for s in splits:
        leader, _, _, isr = cluster.state(TOPIC, s["partition"])
        assert s["data_dir"] == "" and len(isr) == 3
        assert s["replicas"][0] == [hosts[leader], paths[leader]]  # the leader first
        assert sorted(d for _, d in s["replicas"]) == sorted(paths[b] for b in isr)
        assert s["locations"] == ["127.0.0.1"]  # every broker's host, once
    # the Python engine's planner leaves replicas off (it reads by Fetch)
    from logbroker.spark.planners import make_planner

    planner = make_planner(parse_options({"bootstrap": cluster.bootstrap, "subscribe": TOPIC,
                                          "paths": json.dumps(paths)}))
    try:
        assert {s.replicas for s in planner.plan()} == {()}
    finally:
        planner.close()


def test_paths_of_only_a_follower_or_of_no_replica(located):
    cluster, paths = located
    leader = cluster.state(TOPIC, 0)[0]
    follower = next(b for b in paths if b != leader)
    answer = ask_bridge({"bootstrap": cluster.bootstrap, "assign": json.dumps({TOPIC: [0]}),
                         "paths": json.dumps({follower: paths[follower]})})
    assert answer["splits"][0]["replicas"] == [["127.0.0.1", paths[follower]]]
    answer = ask_bridge({"bootstrap": cluster.bootstrap, "subscribe": TOPIC,
                         "paths": json.dumps({"9": "/nowhere"})})
    assert answer["error"].startswith(f"partition {TOPIC}-0: none of its in-sync replicas (brokers ")
    assert "option paths (it names brokers 9)" in answer["error"]


def _describe(cluster):
    from logbroker import Admin

    with Admin(cluster.bootstrap) as admin:
        return admin.describe_cluster([TOPIC])


# -- through Spark -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jvm(spark):
    from logbroker.spark import connector

    if not JAVA:
        pytest.skip("Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
    if not connector.on_classpath(spark):
        if os.environ.get("LOGBROKER_JVM_REQUIRED") == "1":
            pytest.fail(f"the JVM connector is required here: {connector.why_python()}")
        pytest.skip(connector.why_python())
    return spark


def _rows(df) -> list:
    return sorted((r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value),
                   tuple((h.key, bytes(h.value)) for h in r.headers), r.timestamp)
                  for r in df.collect())


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _tasks(spark, count: int, timeout: float = 30.0) -> dict:
    """LocalityListener's counts once at least ``count`` tasks were counted
    (the listener bus delivers after the job's result; bounded wait)."""
    listener = spark._jvm.org.logbroker.spark.LocalityListener
    deadline = time.monotonic() + timeout
    while listener.total() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return dict(listener.snapshot())


@pytest.mark.spark
def test_jvm_reads_replica_files_with_the_rows_of_fetch_and_runs_node_local(jvm, located):
    cluster, paths = located
    listener = jvm._jvm.org.logbroker.spark.LocalityListener
    listener.register(jvm.sparkContext._jsc.sc())

    def load(**options):
        return (jvm.read.format("logbroker")
                .options(bootstrap=cluster.bootstrap, subscribe=TOPIC, includeHeaders="true",
                         **options).load())

    local = load(paths=json.dumps(paths))
    fetched = load()
    assert "logbroker (jvm)" in _plan(local) and "logbroker (jvm)" not in _plan(fetched)
    listener.reset()
    got = _rows(local)
    tasks = _tasks(jvm, PARTITIONS)
    want = _rows(fetched)
    assert len(got) == PARTITIONS * PER and got == want
    # local[2]: the one executor is the driver, its host 127.0.0.1 (SPARK_LOCAL_HOSTNAME,
    # conftest), the host every split prefers: Spark runs each task NODE_LOCAL (PROCESS_LOCAL
    # would need a preferred executor, which a host name is not)
    hosts = {e.host() for e in jvm.sparkContext._jsc.sc().statusTracker().getExecutorInfos()}
    assert hosts == {"127.0.0.1"}
    assert tasks == {"NODE_LOCAL": PARTITIONS}, tasks

    # only a follower's files named: the rows of the leader's
    leader = cluster.state(TOPIC, 0)[0]
    follower = next(b for b in paths if b != leader)
    assert _rows(load(paths=json.dumps({follower: paths[follower]}))) == want
    assert load(paths=json.dumps(paths), engine="python").count() == PARTITIONS * PER
    assert load(paths=json.dumps(paths)).where("partition = 1 and offset >= 150").count() == 50


@pytest.mark.spark
def test_jvm_engine_errors(jvm, located):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    cluster, paths = located
    reader = jvm.read.format("logbroker").options(bootstrap=cluster.bootstrap, subscribe=TOPIC)
    with pytest.raises((PySparkException, Py4JJavaError), match="needs option paths"):
        reader.option("engine", "jvm").load().collect()
    elsewhere = {b: f"/nonexistent/broker-{b}" for b in paths}
    with pytest.raises((PySparkException, Py4JJavaError),
                       match=f"no replica of {TOPIC}-[0-9] on this host: looked in /nonexistent/"):
        reader.option("paths", json.dumps(elsewhere)).load().collect()
