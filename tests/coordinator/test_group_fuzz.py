"""Fuzz of the group requests against a real broker: whatever names, ids,
generations, timeouts, protocols and assignments a peer sends, the broker
answers with the request's response type and a registered error code (never
UNKNOWN, which would mean a bug), and stays up."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.support.fixtures import BrokerProcess, RawConn
from logbroker.errors import UnknownError, all_errors
from logbroker.protocol import messages as m

CODES = {e.code for e in all_errors()} | {0}
names = st.one_of(st.text(max_size=8), st.sampled_from(["g", "billing", "", "x" * 300]),
                  st.text(alphabet=st.characters(max_codepoint=0x20), max_size=3))
ids = st.one_of(st.just(""), st.text(max_size=12), st.sampled_from(["m-1", "x" * 1200]))
instances = st.none() | names
ints = st.one_of(st.integers(-5, 5), st.integers(-(2**63), 2**63 - 1),
                 st.sampled_from([0, 100, 999, 1000, 45_000, 2**31]))
protocols = st.lists(st.tuples(st.one_of(st.sampled_from(["range", "cooperative-sticky"]),
                                         st.text(max_size=4)),
                               st.binary(max_size=64)), max_size=4)

# rebalance timeouts stay short: a parked join waits for the group's largest one
joins = st.builds(m.JoinGroup, group=names, session_timeout_ms=ints,
                  rebalance_timeout_ms=st.integers(-2, 200), member_id=ids, group_instance_id=instances,
    protocol_type=st.sampled_from(["consumer", "", "connect"]), protocols=protocols,
    client_id=st.text(max_size=8))
syncs = st.builds(m.SyncGroup, group=names, generation=ints, member_id=ids,
                  group_instance_id=instances,
                  assignments=st.lists(st.tuples(ids, st.binary(max_size=32)), max_size=4))
beats = st.builds(m.Heartbeat, group=names, generation=ints, member_id=ids,
                  group_instance_id=instances)
leaves = st.builds(m.LeaveGroup, group=names,
                   members=st.lists(st.tuples(ids, instances), max_size=3))
commits = st.builds(m.CommitOffsets, group=names, generation=ints, member_id=ids,
                    group_instance_id=instances,
                    offsets=st.lists(st.tuples(st.sampled_from(["t", "", "__consumer_offsets"]),
                                               st.integers(-1, 3), ints, st.text(max_size=5)),
                                     max_size=3))
others = st.one_of(st.builds(m.FindCoordinator, group=names),
                   st.builds(m.DescribeGroups, groups=st.lists(names, max_size=3)),
                   st.builds(m.DeleteGroups, groups=st.lists(names, max_size=3)),
                   st.builds(m.FetchOffsets, group=names,
                             parts=st.none() | st.lists(st.tuples(st.just("t"), ints), max_size=2)))


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("gfuzz") / "data",
                      config={"group_initial_rebalance_delay_ms": 0})
    try:
        b.start()
        c = RawConn(b.port)
        assert c.call(m.CreateTopics(topics=(("t", 2, {}),))).topics[0][1] == 0
        c.close()
        yield b
    finally:
        b.kill()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msg=st.one_of(joins, syncs, beats, leaves, commits, others))
def test_group_requests_get_a_registered_error_or_an_answer(fuzz_broker, msg):
    conn = RawConn(fuzz_broker.port)
    try:
        resp = conn.call(msg, timeout=10)  # a parked join is answered within 200 ms here
    finally:
        conn.close()
    assert type(resp) is m.RESPONSES[msg.API]
    assert resp.error in CODES and resp.error != UnknownError.code, resp
    for entry in getattr(resp, "parts", ()) or getattr(resp, "members", ()) or ():
        if isinstance(entry, tuple) and len(entry) >= 3 and isinstance(entry[-2], int):
            assert entry[-2] != UnknownError.code, resp
    assert fuzz_broker.alive()
