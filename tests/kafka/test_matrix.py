"""Issue 15's client matrix against one broker process with ``--kafka-port
0``: kafka-python, aiokafka, confluent-kafka (librdkafka with
``debug=protocol``: no buffer underflow or parse failure in its log) and
kcat, each through a small adapter (tests/support/kafka_adapters.py), x produce
(acks 0 / 1 / all, idempotent, gzip / snappy / lz4 / zstd), read from an
offset, read from a timestamp, a group that reads, commits and resumes, and
topic administration; and the README's kcat lines run as written. Each cell
asserts the exact records read back (offsets, keys, values; timestamps where
the client sets them). The table of cells and the tests covering them:
docs/kafka.md, "Test matrix"."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.fixtures import FAST
from tests.support.kafka_adapters import RDKAFKA_LOG, _rdkafka_logger, adapter, kcat_path, protocol_failures
from tests.support.kafka_raw import WAIT, Raw, batch_codecs, kafka_broker, read_back
from logbroker import Admin, Producer
from logbroker.kafka.record_batch import KafkaRecord, build_batch

T0 = 1_700_000_000_000
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat"]
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# cell -> (acks, idempotent, compression)
PRODUCE = {"acks0": (0, False, "none"), "acks1": (1, False, "none"),
           "acksall": ("all", False, "none"), "idempotent": ("all", True, "none"),
           **{c: (1, False, c) for c in CODECS}}
NOT_APPLICABLE: dict = {}  # (client, cell) -> why the client cannot do it (none today)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """(BrokerProcess, Kafka bootstrap); groups settle fast."""
    with kafka_broker(tmp_path_factory.mktemp("kafka-matrix") / "data",
                      config={"group_initial_rebalance_delay_ms": 50}) as started:
        yield started


@pytest.fixture(autouse=True)
def rdkafka_log_clean():
    """Every cell: librdkafka's protocol debug log shows no parse failure."""
    start = len(RDKAFKA_LOG.lines)
    yield
    bad = protocol_failures(RDKAFKA_LOG.lines[start:])
    assert not bad, bad[:5]


def raw_append(bootstrap: str, topic: str, pairs, ts: int) -> None:
    """Kafka batch of (key, value) at ``ts`` + 1000 * i, through our codec, acks=all."""
    batch = build_batch([KafkaRecord(i, 1000 * i, k, v) for i, (k, v) in enumerate(pairs)],
                        base_timestamp=ts)
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(0, 8, 1, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
        assert raw.recv(0, 8)[1].responses[0].partition_responses[0].error_code == 0
    finally:
        raw.close()


@pytest.fixture(scope="module")
def seeded(kb):
    """Topic m-seed: offsets 0-4 a Kafka batch, 5-9 our Producer's (magic 1,
    converted on fetch); key k<i>, value v<i>, timestamp T0 + 1000 * i."""
    b, bootstrap = kb
    raw_append(bootstrap, "m-seed", [(b"k%d" % i, b"v%d" % i) for i in range(5)], T0)
    p = Producer(b.bootstrap, **FAST)
    try:
        for i in range(5, 10):
            p.send("m-seed", value=b"v%d" % i, key=b"k%d" % i, partition=0,
                   timestamp_ms=T0 + 1000 * i)
        p.flush(WAIT)
    finally:
        p.close()
    return "m-seed"


# Debian's kcat links librdkafka 2.0.2, which compresses gzip / snappy / lz4
# only when the broker's Produce range reaches down to v0 (librdkafka issue
# #4956, fixed in 2.11.1): our Produce starts at v0 for it (decision 81), so
# every codec cell is an ordinary one, for every client.


def _cells(names):
    def marks(c, n):
        if (c, n) in NOT_APPLICABLE:
            return [pytest.mark.skip(reason=NOT_APPLICABLE[(c, n)])]
        return []
    return [pytest.param(c, n, id=f"{c}-{n}", marks=marks(c, n))
            for c in CLIENTS for n in names]


@pytest.mark.parametrize("client,cell", _cells(PRODUCE))
def test_produce(kb, client, cell):
    b, bootstrap = kb
    a = adapter(client)
    acks, idempotent, compression = PRODUCE[cell]
    topic = f"m-p-{client}-{cell}"
    # compressible values: librdkafka sends a batch uncompressed when compressing it saves nothing
    records = [(b"k%d" % i, b"%s-%s-%d-" % (client.encode(), cell.encode(), i) + b"x" * 200,
                T0 + i) for i in range(5)]
    a.produce(bootstrap, topic, records, acks, idempotent, compression)
    got = read_back(b.bootstrap, topic, 5)
    assert [(r.offset, r.key, r.value) for r in got] == \
        [(i, k, v) for i, (k, v, _ts) in enumerate(records)]
    if a.sets_timestamps:
        assert [r.timestamp for r in got] == [ts for _k, _v, ts in records]
    assert not [line for line in getattr(a, "log", ()) if "does not support compression" in line]
    assert batch_codecs(bootstrap, topic) == {CODECS.get(compression, 0)}


@pytest.mark.parametrize("client,cell", _cells(["offset", "timestamp"]))
def test_consume(kb, seeded, client, cell):
    _, bootstrap = kb
    a = adapter(client)
    if cell == "offset":
        got = a.from_offset(bootstrap, seeded, 3, 7)
        first = 3
    else:  # the first record at or after T0 + 4500 is offset 5
        got = a.from_timestamp(bootstrap, seeded, T0 + 4500, 5)
        first = 5
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(first, 10)]


@pytest.mark.parametrize("client", CLIENTS)
def test_group_reads_commits_and_resumes(kb, client):
    _, bootstrap = kb
    a = adapter(client)
    topic, group = f"m-g-{client}", f"mg-{client}"
    raw_append(bootstrap, topic, [(b"a%d" % i, b"x%d" % i) for i in range(6)], T0)
    assert a.group_read(bootstrap, topic, group, 6) == \
        [(i, b"a%d" % i, b"x%d" % i) for i in range(6)]
    raw_append(bootstrap, topic, [(b"b%d" % i, b"y%d" % i) for i in range(3)], T0)
    # a new consumer of the group starts at the commit, not at the beginning
    assert a.group_read(bootstrap, topic, group, 3) == \
        [(6 + i, b"b%d" % i, b"y%d" % i) for i in range(3)]


@pytest.mark.parametrize("client", ["aiokafka", "confluent-kafka"])
def test_admin_creates_and_deletes_topics(kb, client):
    """kafka-python's admin client: tests/kafka/test_listener.py; kcat has none."""
    import asyncio

    b, bootstrap = kb
    adapter(client)
    name = f"m-adm-{client}"
    if client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def run(step) -> set:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await step(admin)
                return set(await admin.list_topics())
            finally:
                await admin.close()
        created = asyncio.run(run(lambda adm: adm.create_topics([NewTopic(name, 3, 1)])))
        deleted = asyncio.run(run(lambda adm: adm.delete_topics([name])))
    else:
        import confluent_kafka.admin as cka

        admin = cka.AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([cka.NewTopic(name, 3, 1)])[name].result(WAIT)
        created = set(admin.list_topics(timeout=WAIT).topics)
        parts = len(admin.list_topics(name, timeout=WAIT).topics[name].partitions)
        assert parts == 3
        admin.delete_topics([name])[name].result(WAIT)
        deleted = set(admin.list_topics(timeout=WAIT).topics)
    assert name in created and name not in deleted
    with Admin(b.bootstrap) as ours:
        assert name not in ours.list_topics()


def _member(client: str, bootstrap: str, topic: str, group: str):
    from tests.support.kafka_members import aio_member, confluent_member

    if client == "confluent-kafka":
        import confluent_kafka as ck
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 3000, "heartbeat.interval.ms": 100,
                         "debug": "protocol"}, logger=_rdkafka_logger())
        return confluent_member(c, topic)
    import aiokafka
    return aio_member(lambda: aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=100), topic)


@pytest.mark.parametrize("client", ["aiokafka", "confluent-kafka"])
def test_two_members_split_and_rebalance_when_one_leaves(kb, client):
    """Two members of one group split a 2-partition topic; the second
    commits and leaves, the first takes both partitions from its commit:
    every record read exactly once across both (kafka-python: test_kafka_groups)."""
    from tests.support.kafka_members import split, until

    b, bootstrap = kb
    adapter(client)
    topic, group = f"m-rb-{client}", f"mrb-{client}"
    with Admin(b.bootstrap) as admin:
        admin.create_topic(topic, 2)

    def produce(values) -> None:
        p = Producer(b.bootstrap, **FAST)
        try:
            for i, v in enumerate(values):
                p.send(topic, value=v, partition=i % 2)
            p.flush(WAIT)
        finally:
            p.close()

    first, more = [b"x%d" % i for i in range(20)], [b"y%d" % i for i in range(10)]
    m1 = _member(client, bootstrap, topic, group)
    m2 = None
    try:
        m1.start()
        until(lambda: m1.owned == {0, 1} or m1.error, "the first member's assignment")
        assert m1.error is None, m1.error
        m2 = _member(client, bootstrap, topic, group)  # (librdkafka joins at subscribe)
        m2.start()
        until(lambda: split(m1, m2), "a split")
        owned2 = set(m2.owned)
        produce(first)
        until(lambda: len(m1.got) + len(m2.got) >= 20, "the records")
        m2.stop()  # commits, then leaves
        until(lambda: m1.owned == {0, 1}, "the rebalance")
        produce(more)
        until(lambda: len(m1.got) + len(m2.got) >= 30, "the records after the rebalance")
    finally:
        for m in (m2, m1):
            if m is not None and m.is_alive():
                m.stop()
    assert sorted(v for _p, v in m1.got + m2.got) == sorted(first + more)  # each once
    assert {p for p, _v in m2.got} == owned2 and len(owned2) == 1


def _readme_kcat_lines() -> list[str]:
    text = Path(__file__).resolve().parents[2].joinpath("README.md").read_text("utf-8")
    start = text.index("## Kafka clients and kcat")
    block = text[text.index("```sh\n", start) + 6:text.index("```", text.index("```sh\n", start) + 6)]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if "kcat" in line]


def test_readme_kcat_lines_run_as_written(kb):
    """Each kcat line of the README, with only the address, topic, group
    and time replaced: -L, -P, -C by offset, -C -o s@<ms>, -G (which
    commits, so a second -G run reads only what came after)."""
    kcat_path()
    _, bootstrap = kb
    listing, produce, by_offset, by_time, group = _readme_kcat_lines()

    def run(line: str, **subs) -> str:
        line = line.replace("127.0.0.1:9092", bootstrap).replace("demo-group", "m-readme-g")
        line = re.sub(r"\bdemo\b", "m-readme", line).replace("1700000000000", str(subs.get("ms")))
        done = subprocess.run(["bash", "-c", line.replace("kcat ", shlex.quote(kcat_path()) + " ")],
                              capture_output=True, text=True, timeout=3 * WAIT)
        assert done.returncode == 0, (line, done.stderr)
        return done.stdout

    run(produce)
    first = int(time.time() * 1000)
    while int(time.time() * 1000) <= first:  # the next records are stamped later (bounded: 1 ms)
        pass
    run(produce)
    assert f"broker 0 at {bootstrap}" in run(listing) and '"m-readme" with 1 partitions' \
        in run(listing)
    assert run(by_offset).splitlines() == ["0 k1 one", "1 k2 two", "2 k1 one", "3 k2 two"]
    assert run(by_time, ms=first + 1).splitlines() == ["one", "two"]
    assert run(group).splitlines() == ["one", "two", "one", "two"]
    run(produce.replace("one", "three").replace("two", "four"))
    assert run(group).splitlines() == ["three", "four"]  # resumed from the group's commit
