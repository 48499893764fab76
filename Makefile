# Every target does its own set-up: a venv in .venv with logbroker installed.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed

.PHONY: serve spark-connector spark-connector-if-jdk test test-slow test-bench cluster bench bench-quick bench-storage bench-broker bench-spark bench-compaction bench-groups bench-latency bench-cluster peer-servers etcd-server chromium kcat kafkajs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,spark,bench]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/logbroker serve --data-dir ./data

# the Spark JVM connector: javac (JDK 17+) against pyspark's jars -> src/logbroker/spark/jvm/logbroker-spark.jar
spark-connector: $(STAMP)
	$(BIN)/python -m logbroker.spark.connector build

# the same where a JDK is present (the set-up of test and bench targets); without one, a note
spark-connector-if-jdk: $(STAMP)
	$(BIN)/python -m logbroker.spark.connector build --if-jdk

# the Debian servers of the peers benchmark (its smoke test runs in the suite)
peer-servers:
	bash bench/peers/install-servers.sh

# etcd (Debian's etcd-server), the cluster's metadata store; not started as a service
etcd-server:
	bash tools/install-etcd.sh

# Debian's chromium + chromium-driver: the web console's headless browser tests
chromium:
	bash tools/install-chromium.sh

# Debian's kcat: the Kafka command-line client of the Kafka listener's tests
kcat:
	bash tools/install-kcat.sh

# KafkaJS from npm (tests/js/package.json): the Node.js client of the Kafka listener's tests
kafkajs:
	bash tools/install-kafkajs.sh

# two workers, a test file each at a time (its module's brokers stay in one worker): the
# suite waits on brokers, etcd, Spark and clients more than it computes (9 min vs 14 on 2 cores)
test: $(STAMP) spark-connector-if-jdk peer-servers etcd-server chromium kcat kafkajs
	$(BIN)/pytest -q -n 2 --dist loadfile

test-slow: $(STAMP) spark-connector-if-jdk
	$(BIN)/pytest -q -m slow

# the benchmarks' --quick smoke runs (broker, cluster, groups, kafka, latency, spark, storage)
test-bench: $(STAMP) spark-connector-if-jdk peer-servers
	$(BIN)/pytest -q -m bench

# etcd + 3 brokers on 127.0.0.1 (2379; 9555-9557), data in ./data/cluster; Ctrl-C stops all
cluster: $(STAMP) etcd-server
	$(BIN)/python tools/cluster.py

# the peer benchmark: writes its section of docs/benchmarks.md and docs/img/*.png
bench: $(STAMP) peer-servers
	$(BIN)/python -m bench.peers

bench-quick: $(STAMP) peer-servers
	$(BIN)/python -m bench.peers --quick

# the other benches (python -m bench.<name> --help; every one in bench/README.md): figures in docs/benchmarks.md
bench-storage: $(STAMP)
	$(BIN)/python -m bench.storage

bench-broker: $(STAMP)
	$(BIN)/python -m bench.broker

bench-spark: $(STAMP) spark-connector-if-jdk
	$(BIN)/python -m bench.spark

bench-compaction: $(STAMP)
	$(BIN)/python -m bench.compaction

# consumer groups: rebalance after kill -9 / clean leave, group vs single consumer (+ etcd + 3 brokers)
bench-groups: $(STAMP) etcd-server
	$(BIN)/python -m bench.groups

# where a durable 1 KiB round trip's time goes: floors, broker, client library, syscalls (strace)
bench-latency: $(STAMP)
	$(BIN)/python -m bench.latency

# etcd + 3 brokers on 127.0.0.1: RF=1 vs RF=3 throughput and latency, failover after kill -9
bench-cluster: $(STAMP) etcd-server
	$(BIN)/python -m bench.cluster

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis src/logbroker/spark/jvm/*.jar
