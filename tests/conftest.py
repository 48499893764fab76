"""pytest fixtures; the helpers they use live in tests/support/fixtures.py."""

from __future__ import annotations

import os
import sys

from tests.support import kafka_python_sockets
import pytest

from tests.support.fixtures import (OPEN, BrokerProcess, Cluster, EtcdProcess, Store, TcpProxy, open_store,
                      require_etcd)

kafka_python_sockets.track()

# Files with Spark tests outside tests/spark/ (tests/structure checks the list is whole)
SPARK_FILES = ("tests/security/test_tls.py", "tests/kafka/test_cross.py",
               "tests/kafka/test_decode.py")


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with every file that has Spark tests in one unit
    of work: a worker starts its own SparkSession (a JVM, ~15-20 s of CPU
    here, then its first queries' warm-up) for its first Spark test, and
    with those files spread over both workers both paid it."""
    if getattr(config.option, "dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OneSparkWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "spark" if path.startswith("tests/spark/") or path in SPARK_FILES else path

    return OneSparkWorker(config, log)


@pytest.fixture
def store_factory(tmp_path):
    opened: list[Store] = []

    def make(**log_settings) -> Store:
        s = open_store(tmp_path / "data", **log_settings)
        opened.append(s)
        return s

    yield make
    for s in opened:
        try:
            s.close()
        except Exception:
            pass


@pytest.fixture(autouse=True)
def close_raw_conns():
    """Close every raw test connection a test left open."""
    yield
    while OPEN:
        OPEN.pop().close()


@pytest.fixture(scope="session", autouse=True)
def close_kafka_python_leftovers():
    """At the session's end, close the sockets kafka-python dropped
    (kafka_python_sockets.py)."""
    yield
    kafka_python_sockets.close_leftovers()


@pytest.fixture
def broker(request, tmp_path):
    """A real ``logbroker serve`` on 127.0.0.1 (a free port), killed by PID after the test.
    In a module that sets ``SHARE_BROKER = True`` (its tests use topics of their own and
    leave the broker running) every test gets the module's one broker (``module_broker``)."""
    if getattr(request.module, "SHARE_BROKER", False):
        yield request.getfixturevalue("module_broker")
        return
    with BrokerProcess(tmp_path / "data") as started:
        yield started


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    """One real broker for a whole module (see ``broker``), killed by PID after it."""
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as started:
        yield started


@pytest.fixture
def etcd(tmp_path):
    """A real one-member etcd on free 127.0.0.1 ports (``EtcdProcess``: ``url``,
    fast raft ticks), killed by PID and its data deleted after the test. Skips
    when etcd is not installed (fails with LOGBROKER_ETCD_REQUIRED=1)."""
    require_etcd()
    with EtcdProcess(tmp_path / "etcd") as started:
        yield started


@pytest.fixture
def tcp_proxy():
    """``tcp_proxy(target, listen_port=0)``: a ``TcpProxy``, closed after the test."""
    made: list[TcpProxy] = []

    def make(target=None, listen_port: int = 0) -> TcpProxy:
        proxy = TcpProxy(target, listen_port)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def cluster(tmp_path, etcd):
    """A real cluster: ``Cluster`` (tests/support/cluster.py) of 3 brokers joined
    through the ``etcd`` fixture, killed by PID after the test."""
    c = Cluster(tmp_path, etcd.url)
    try:
        yield c.start()
    finally:
        c.close()


@pytest.fixture(scope="session")
def spark():
    """The one local[2] SparkSession of a test run (Spark tests are marked
    ``spark``), stopped at the end; its Python workers run this interpreter.
    It carries the JVM connector's jar (built here when a JDK is present), so
    format logbroker reads on the JVM unless a test asks for engine=python."""
    pytest.importorskip("pyspark")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # the local executor's host name, which Spark matches with a split's preferred hosts
    # (the brokers' advertised 127.0.0.1: tests/spark/test_jvm_cluster.py); Spark's default
    # is the canonical name of a non-loopback address
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
    from pyspark.sql import SparkSession

    from logbroker.spark import connector

    builder = (SparkSession.builder.master("local[2]").appName("logbroker-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1"))
    session = connector.with_connector(builder, build_first=True).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
