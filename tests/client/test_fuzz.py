"""Fuzz of the client API against a real broker (issue 9 §2).

Hypothesis draws sequences of calls with random arguments — sends (topic
names valid and not, partitions negative and huge, keys / values / headers
of every type and size, timestamps negative, huge, None), flushes, consumer
assign / seek / seek_to_timestamp / position / poll / commit, admin calls.
Properties: every call returns or raises a LogbrokerError, TypeError or
ValueError with a message — never another exception, never a hang (each
call is timed; a watchdog dumps the stacks and ends the run if one blocks
for minutes) — and every acknowledged record reads back with the key, value,
headers and timestamp it was sent with. One broker for the module.

The default run is ~200 cases; ``-m slow`` runs 5,000 and prints the
counts (LOGBROKER_CLIENT_FUZZ_EXAMPLES overrides both).
"""

from __future__ import annotations

import faulthandler
import os
import re
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker import Admin, Consumer, Producer
from logbroker.errors import LogbrokerError
from logbroker.limits import MAX_TIMESTAMP
from tests.support.fixtures import BrokerProcess

T0 = 1_700_000_000_000
CALL_BOUND_S = 15.0  # every call: the clients' own deadlines (below) are shorter
WATCHDOG_S = 180.0  # a call this long is a hang: dump every stack and end the run
CLIENT = dict(request_timeout_ms=3_000, connect_timeout_ms=2_000)
TOPICS = {"fz0": 1, "fz1": 3}  # created up front; sends also auto-create fz-<a..z>{1,2}
ALLOWED = (LogbrokerError, TypeError, ValueError)
STATS: Counter = Counter()


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("client-fuzz") / "data") as broker:
        admin = Admin(broker.bootstrap, **CLIENT)
        for name, partitions in TOPICS.items():
            admin.create_topic(name, partitions)
        producer = Producer(broker.bootstrap, linger_ms=5, max_block_ms=5_000,
                            delivery_timeout_ms=10_000, max_request_size=1 << 20, **CLIENT)
        consumer = Consumer(broker.bootstrap, group="fuzz", fetch_max_wait_ms=20, **CLIENT)
        reader = Consumer(broker.bootstrap, fetch_max_wait_ms=20, **CLIENT)
        try:
            yield producer, consumer, admin, reader
        finally:
            for client in (producer, consumer, admin, reader):
                client.close()
            print(f"\nclient API fuzz: {STATS['cases']} cases, {STATS['calls']} calls, "
                  f"{STATS['refused']} refused with an allowed error, {STATS['acknowledged']} "
                  "records acknowledged and read back; unexpected exceptions and hangs fail "
                  "the run, so: 0 and 0")


# -- strategies ---------------------------------------------------------------
NOT_NUMBER = st.one_of(st.booleans(), st.text(max_size=4), st.lists(st.integers(), max_size=2),
                       st.just(object()), st.binary(max_size=3))
WRONG = st.one_of(st.integers(), st.floats(), NOT_NUMBER)
VALID_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
BAD_NAME = st.one_of(st.text(max_size=12).filter(lambda s: not VALID_NAME.fullmatch(s)),
                     st.sampled_from(["", ".", "..", "x" * 250, "a/b", "\ud800"]))
NAME = st.one_of(st.sampled_from(sorted(TOPICS)), st.from_regex(r"fz-[a-z]{1,2}", fullmatch=True),
                 st.text(max_size=12), BAD_NAME)
TOPIC = st.one_of(NAME, NAME, NAME, WRONG)
INT = st.one_of(st.integers(-3, 4), st.sampled_from([-(1 << 63), (1 << 63), 1 << 70, 10_000]))
PARTITION = st.one_of(st.none(), st.none(), INT, WRONG)
BYTES = st.one_of(st.none(), st.binary(max_size=40), st.binary(max_size=8).map(bytearray),
                  st.binary(max_size=8).map(memoryview),
                  st.sampled_from([b"", b"v" * 70_000, b"b" * (1 << 20)]))
PAYLOAD = st.one_of(BYTES, BYTES, BYTES, WRONG)
HEADER_VALUE = st.one_of(st.none(), st.binary(max_size=8), st.binary(max_size=4).map(bytearray))
HEADERS = st.one_of(
    st.none(), st.lists(st.tuples(st.text(max_size=6), HEADER_VALUE), max_size=3),
    st.dictionaries(st.text(max_size=6), HEADER_VALUE, max_size=2),
    st.lists(st.one_of(WRONG, st.tuples(WRONG, WRONG), st.just(("\ud800", b""))), max_size=2), WRONG)
TIMESTAMP = st.one_of(
    st.none(), st.none(), st.integers(0, MAX_TIMESTAMP), st.integers(),
    st.sampled_from([-1, 0, MAX_TIMESTAMP, MAX_TIMESTAMP + 1, 1 << 63, -(1 << 63), 1 << 64,
                     T0 - (1 << 31), T0 + (1 << 31), T0 + (1 << 31) - 1]), WRONG)
OFFSET = st.one_of(st.integers(0, 50), st.sampled_from([-1, (1 << 63) - 1, 1 << 63]), WRONG)
SECONDS = st.one_of(st.sampled_from([0, 0.01, -1, 0.02]), st.floats(max_value=0.03), NOT_NUMBER)
# partition counts: valid ones stay small (thousands of partitions take the broker seconds)
COUNT = st.one_of(st.integers(-2, 3), st.sampled_from([10_001, 1 << 70, -(1 << 70)]), st.floats(),
                  NOT_NUMBER)
TP = st.one_of(st.tuples(TOPIC, INT), st.tuples(st.sampled_from(sorted(TOPICS)), st.integers(0, 3)),
               WRONG, st.lists(st.integers(), max_size=3))
TPS = st.one_of(st.lists(TP, max_size=3), st.none(), WRONG)
GROUP = st.one_of(st.sampled_from(["fuzz", "g2"]), st.text(max_size=8),
                  st.sampled_from(["", "g" * 250, "\x00"]), WRONG)
CONFIGS = st.one_of(st.none(), st.dictionaries(
    st.sampled_from(["retention_ms", "segment_bytes", "flush", "nope"]),
    st.one_of(INT, st.sampled_from(["fsync", "lazy", "x"]), WRONG), max_size=2), WRONG)
SPEC = st.one_of(st.sampled_from(["earliest", "latest", "middle"]), TIMESTAMP)
ADMIN_NAME = st.one_of(st.from_regex(r"adm-[a-c]", fullmatch=True), NAME, WRONG)
DELETE_NAME = st.one_of(st.from_regex(r"adm-[a-c]", fullmatch=True), BAD_NAME, WRONG)  # not sent to


def _call(method: str, **args):
    return st.fixed_dictionaries(args).map(lambda kw: (method, kw))


GOOD_HEADERS = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=6), HEADER_VALUE),
                                             max_size=3),
                         st.dictionaries(st.text(max_size=6), HEADER_VALUE, max_size=2))
GOOD_TIMESTAMP = st.one_of(st.none(), st.integers(0, MAX_TIMESTAMP), st.sampled_from(
    [0, MAX_TIMESTAMP, T0 - (1 << 31), T0 + (1 << 31), T0 + (1 << 31) - 1, T0]))
GOOD_SEND = _call("send", topic=st.sampled_from([*sorted(TOPICS), "fz-a"]), value=BYTES, key=BYTES,
                  headers=GOOD_HEADERS, partition=st.sampled_from([None, None, 0]),
                  timestamp_ms=GOOD_TIMESTAMP)  # mostly accepted: the read-back property


ACTION = st.one_of(
    _call("send", topic=TOPIC, value=PAYLOAD, key=PAYLOAD, headers=HEADERS,
          partition=PARTITION, timestamp_ms=TIMESTAMP),
    _call("flush"),
    _call("assign", partitions=TPS),
    _call("seek", topic=TOPIC, partition=INT, offset=OFFSET),
    _call("seek_to_timestamp", timestamp_ms=TIMESTAMP, partitions=st.one_of(st.none(), TPS)),
    _call("position", topic=TOPIC, partition=INT),
    _call("poll", timeout=SECONDS, max_records=st.one_of(st.none(), INT, WRONG)),
    _call("commit", offsets=st.one_of(st.none(), st.dictionaries(
        TP.filter(lambda tp: isinstance(tp, tuple)), st.one_of(OFFSET, st.tuples(OFFSET, WRONG)),
        max_size=2), WRONG)),
    _call("create_topic", name=ADMIN_NAME, partitions=COUNT, configs=CONFIGS),
    _call("delete_topics", names=st.one_of(st.lists(DELETE_NAME, max_size=2), WRONG)),
    _call("list_offsets", partitions=st.one_of(TPS, TOPIC), spec=SPEC),
    _call("describe_topics", names=st.one_of(st.lists(TOPIC, max_size=2), WRONG)),
    _call("describe_groups", groups=st.one_of(st.lists(GROUP, max_size=2), WRONG)),
    _call("fetch_offsets", group=GROUP, partitions=TPS),
    _call("commit_offsets", group=GROUP, offsets=st.one_of(st.dictionaries(
        TP.filter(lambda tp: isinstance(tp, tuple)), OFFSET, max_size=2), WRONG)),
    _call("delete_groups", groups=st.one_of(st.lists(GROUP, max_size=2), WRONG)),
)
# half the steps: a send meant to be acknowledged (one_of would flatten, not weigh)
STEP = st.sampled_from([GOOD_SEND, ACTION]).flatmap(lambda strategy: strategy)
ON = {"send": 0, "flush": 0, "assign": 1, "seek": 1, "seek_to_timestamp": 1, "position": 1,
      "poll": 1, "commit": 1}  # which client runs an action (0 producer, 1 consumer, else admin)


# -- running and checking ---------------------------------------------------------
def run(target, name: str, kw: dict):
    """One bounded call; returns (True, result) or (False, the allowed error)."""
    STATS["calls"] += 1
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    t = time.monotonic()
    try:
        return True, getattr(target, name)(**kw)
    except ALLOWED as exc:
        assert str(exc).strip(), f"{name}: {type(exc).__name__} without a message"
        STATS["refused"] += 1
        return False, exc
    finally:
        faulthandler.cancel_dump_traceback_later()
        elapsed = time.monotonic() - t
        assert elapsed < CALL_BOUND_S, f"{name}({kw!r}) took {elapsed:.1f} s"


def expected(kw: dict) -> tuple:
    """What a read must return for an accepted send: key, value, headers,
    timestamp (None: "now", known from the acknowledgement)."""
    headers = kw["headers"] or ()
    headers = headers.items() if isinstance(headers, dict) else headers
    return (None if kw["key"] is None else bytes(kw["key"]),
            None if kw["value"] is None else bytes(kw["value"]),
            tuple((k, None if v is None else bytes(v)) for k, v in headers), kw["timestamp_ms"])


def check_read_back(reader, sent: list) -> None:
    """Every acknowledged record of this case, read back as it was sent."""
    acked = {}
    for handle, want in sent:
        ok, meta = run(handle, "result", {"timeout": CALL_BOUND_S - 1})
        if ok:
            assert want[3] in (None, meta.timestamp), (want[3], meta)
            acked[(meta.topic, meta.partition, meta.offset)] = (*want[:3], meta.timestamp)
    if not acked:
        return
    STATS["acknowledged"] += len(acked)
    tps = sorted({(t, p) for t, p, _ in acked})
    reader.assign(tps)
    for tp in tps:
        reader.seek(*tp, min(o for t, p, o in acked if (t, p) == tp))
    got = {}
    deadline = time.monotonic() + 10
    while not acked.keys() <= got.keys() and time.monotonic() < deadline:
        for r in reader.poll(0.5):
            got[(r.topic, r.partition, r.offset)] = (r.key, r.value, r.headers, r.timestamp)
    missing = [k for k in acked if k not in got]
    assert not missing, f"acknowledged but not read back: {missing[:5]}"
    for k, want in acked.items():
        assert got[k] == want, f"{k}: read {got[k]!r:.200}, sent {want!r:.200}"


def one_case(clients, actions: list) -> None:
    producer, consumer, admin, reader = clients
    STATS["cases"] += 1
    sent = []
    for name, kw in actions:
        ok, result = run((producer, consumer)[ON[name]] if name in ON else admin, name, kw)
        if ok and name == "send":
            sent.append((result, expected(kw)))
    if sent:
        run(producer, "flush", {"timeout": CALL_BOUND_S - 2})
    check_read_back(reader, sent)


def examples(default: int) -> int:
    return int(os.environ.get("LOGBROKER_CLIENT_FUZZ_EXAMPLES", default))


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])


@fuzz_settings(examples(200))
@given(actions=st.lists(STEP, min_size=1, max_size=6))
def test_client_api_fuzz(clients, actions):
    one_case(clients, actions)


@pytest.mark.slow
# a failing case is replayed with its arguments printed; a 2 MB repr must not
# turn that report into a HypothesisWarning error that hides the failure
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@fuzz_settings(examples(5_000))
@given(actions=st.lists(STEP, min_size=1, max_size=8))
def test_client_api_fuzz_long(clients, actions):
    one_case(clients, actions)

