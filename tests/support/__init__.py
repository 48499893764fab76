"""Helpers the tests share (no tests here); tests/conftest.py registers the fixtures.

- ``fixtures``: stores and crash simulation, batch, record and message samples,
  raw protocol connections, client polling, the CLI (in process and as a
  process); re-exports the process helpers of ``bench.common.procs``
  (``BrokerProcess``, ``EtcdProcess``, free ports, ``read_line``,
  ``wait_until``) and the cluster's.
- ``cluster``: ``Cluster``, real brokers joined through a real etcd.
- ``proxy``: ``TcpProxy``, a fault-injecting TCP proxy.
- ``tls``: test certificates (trustme).
- ``kafka_raw``, ``kafka_adapters``, ``kafka_members``, ``kafka_python_sockets``:
  the Kafka listener's raw frames, client adapters (kcat, librdkafka, aiokafka),
  group members, and the guard for kafka-python's dropped sockets.
- ``log_checker``: the nemesis run's history checker.
- ``spark_stream_driver``: a Spark driver process (run by path).
- ``children/``: child processes run by path (kill -9 tests, a group member).
"""
