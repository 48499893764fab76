"""Helpers shared by the tests (no tests here): stores and crash simulation, batch
and record samples, protocol message samples, raw wire connections, client
polling helpers, the CLI, a Spark test data set. Processes (``BrokerProcess``,
``EtcdProcess``, free ports, ``read_line``, ``wait_until``) are the benches'
own, ``bench.common.procs``, and the cluster's helpers (``Cluster``,
``TcpProxy``) live in tests/support/cluster.py and tests/support/proxy.py; all
are re-exported here.

Brokers are real ``logbroker serve`` processes on 127.0.0.1, stopped by PID; waits
are bounded (deadlines, never sleeps as synchronisation).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

from bench.common.procfs import status_kib
from bench.common.procs import (LOGBROKER, BrokerProcess, EtcdProcess, cluster_tool,  # noqa: F401
                                free_port, free_ports, read_line, wait_until)
from logbroker.protocol import messages as m
from logbroker.protocol.codec import FrameReader, decode, encode_bytes
from logbroker.records import build_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store


# -- stores ---------------------------------------------------------------
def open_store(path, **log_settings) -> Store:
    return Store.open(str(path), StorageConfig(log=LogConfig(**log_settings), map_size=64 << 20))


def crash(store: Store) -> None:
    """Abandon ``store`` as a killed process would: nothing flushed or
    checkpointed, the clean marker not written (the page cache survives, as
    it does when only the process dies)."""
    if store.journal is not None:
        store.journal.abandon()
    store.files.close_all()
    store.meta.close()
    os.close(store._lock_fd)


def batch(values, ts: int = 1_000_000, key: "bytes | None" = None) -> bytes:
    """One batch of ``values`` (bytes) all stamped with timestamp ``ts``."""
    return build_batch([(v, key, (), ts) for v in values])


def values_of(log, start: int = 0) -> list[bytes]:
    """Every record value of ``log`` from ``start`` to its end, in offset order."""
    from logbroker.records import decode_batch, scan_batches

    out, offset = [], max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"read at {offset} returned nothing before the end {log.log_end_offset}"
        for pos, header in scan_batches(data):
            for rec in decode_batch(data[pos:pos + header.size]).records():
                if rec.offset >= offset:
                    out.append(rec.value)
            offset = header.next_offset
    return out


# -- record and message samples -------------------------------------------
T0 = 1_700_000_000_000  # a fixed "now" in ms

RECORDS = [  # (value, key, headers, timestamp_ms)
    (b"v0", b"k0", [("trace", b"abc")], T0),
    (None, b"k1", [], T0 + 5),
    (b"", None, [("h\u00e9ader-\u2603", None), ("dup", b"1"), ("dup", b"")], T0 - 3),
    (b"\x00\xff" * 10, b"", [("", b"x")], T0 + (1 << 31) - 1),
    (b"last", None, [], T0 - (1 << 31)),
]

B1 = build_batch([(b"hello", b"k1", (), T0), (b"world", None, (), T0 + 5)])
B2 = build_batch([(b"x" * 300, None, (("h", b"v"),), T0)], producer_id=42, producer_epoch=3,
                 base_sequence=10)

SAMPLES = [
    m.Handshake(client_id="app-1", min_version=1, max_version=3),
    m.HandshakeResponse(version=1, broker_id=7, server="logbroker 0.1.0"),
    m.Metadata(topics=("orders", "clicks"), auto_create=True),
    m.Metadata(),
    m.MetadataResponse(brokers=((0, "127.0.0.1", 9555),),
                       topics=(("orders", 0, "", 4), ("nope", 3, "unknown topic 'nope'", 0)),
                       controller=2, partitions=(("orders", 0, 1, 4, (1, 2, 3), (1, 3)),
                                                 ("orders", 1, -1, 7, (2, 3, 1), ()))),
    m.ReplicaFetch(replica_id=2, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                   parts=(("orders", 0, 120, 4, 1 << 20),)),
    m.ReplicaFetchResponse(parts=(("orders", 0, 0, "", 118, 0, 130, 100, len(B1)),
                                  ("orders", 1, 74, "fenced", -1, -1, -1, -1, 0)), payload=(B1, b"")),
    m.OffsetForLeaderEpoch(replica_id=3, parts=(("orders", 0, 5, 4),)),
    m.PeerChallenge(broker_id=2, nonce=b"n" * 32),
    m.PeerChallengeResponse(broker_id=1, nonce=b"s" * 32),
    m.PeerProof(proof=b"p" * 32),
    m.PeerProofResponse(proof=b"q" * 32),
    m.ConsumerGroupHeartbeat(group="billing", member_id="m-1", member_epoch=0,
                             rebalance_timeout_ms=60_000, topic_names=("orders",),
                             owned=(("orders", (0, 1)),), client_id="app"),
    m.ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=3, heartbeat_interval_ms=5000,
                                     assignment=(("orders", (0, 1)),)),
    m.ConsumerGroupDescribe(groups=("billing",)),
    m.ConsumerGroupDescribeResponse(groups=(("billing", 0, "", "Stable", 3, 3, "uniform", (
        ("m-1", None, None, 3, "app", "/127.0.0.1", ("orders",), None, (("orders", (0,)),),
         (("orders", (0,)),)),)),)),
    m.OffsetForLeaderEpochResponse(parts=(("orders", 0, 0, "", 4, 118), ("orders", 1, 6, "no", -1, -1))),
    m.DescribeCluster(topics=("orders",)),
    m.DescribeClusterResponse(cluster="prod", controller=1,
                              brokers=((1, "127.0.0.1", 9555, True), (2, "127.0.0.2", 9556, False)),
                              partitions=(("orders", 0, 1, 4, (1, 2, 3), (1, 3), 1),)),
    m.ElectLeaders(topics=None),
    m.ElectLeadersResponse(parts=(("orders", 0, 0, "", 1),)),
    m.CreatePartitions(topics=(("orders", 8, ()), ("clicks", 3, ((1, 2), (2, 3)))),
                       validate_only=True),
    m.CreatePartitionsResponse(topics=(("orders", 0, ""), ("clicks", 37, "not larger"))),
    m.DeleteRecords(parts=(("orders", 0, 120), ("orders", 1, -1))),
    m.DeleteRecordsResponse(parts=(("orders", 0, 0, "", 120), ("orders", 1, 6, "not led", -1))),
    m.CreateTopics(topics=(("orders", 4, {"retention_ms": 3_600_000, "flush": "lazy"}),
                           ("plain", 1, {}))),
    m.CreateTopicsResponse(topics=(("orders", 0, ""), ("plain", 36, "exists"))),
    m.DeleteTopics(topics=("orders",)),
    m.DeleteTopicsResponse(topics=(("orders", 0, ""),)),
    m.DescribeTopics(topics=None),
    m.DescribeTopicsResponse(topics=(("orders", 0, "", {"segment_bytes": 1 << 30, "partitions": 2},
                                      ((0, 0, 120, 118, 40960, 1, 0, ""),
                                       (1, 0, 9, 9, 512, 1, 57, "orders-1: CRC error at byte 0"))),)),
    m.Produce(acks=1, timeout_ms=5000, producer_id=42, producer_epoch=3,
              parts=(("orders", 0, len(B1)), ("orders", 1, len(B2))), payload=(B1, B2)),
    m.ProduceResponse(parts=(("orders", 0, 0, "", 1200, 0), ("orders", 1, 45, "gap", -1, -1))),
    m.Fetch(max_wait_ms=250, min_bytes=1024, max_bytes=1 << 20,
            parts=(("orders", 0, 1200, 65536), ("orders", 1, 0, 65536))),
    m.FetchResponse(parts=(("orders", 0, 0, "", 1300, 0, len(B1)),
                           ("orders", 1, 1, "out of range", 90, 10, 0)), payload=(B1, b"")),
    m.ListOffsets(parts=(("orders", 0, m.EARLIEST), ("orders", 0, m.LATEST), ("orders", 1, T0))),
    m.ListOffsetsResponse(parts=(("orders", 0, 0, "", 0, -1), ("orders", 1, 0, "", 17, T0 + 3))),
    m.CommitOffsets(group="billing", offsets=(("orders", 0, 1200, "host-3"),)),
    m.CommitOffsets(group="billing", generation=4, member_id="c-1", group_instance_id="host-3",
                    offsets=(("orders", 0, 1200, ""),)),
    m.FindCoordinator(group="billing"),
    m.FindCoordinatorResponse(broker_id=2, host="127.0.0.2", port=9556),
    m.FindCoordinatorResponse(error=15, message="no leader yet"),
    m.JoinGroup(group="billing", session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                member_id="", group_instance_id="host-3", protocol_type="consumer",
                protocols=(("cooperative-sticky", b"\x93\x91\xa6orders\x90\xff"), ("range", b"")),
                client_id="billing-app"),
    m.JoinGroupResponse(generation=4, protocol="cooperative-sticky", leader="c-1", member_id="c-1",
                        members=(("c-1", "host-3", b"\x01"), ("c-2", None, b""))),
    m.SyncGroup(group="billing", generation=4, member_id="c-1", group_instance_id=None,
                assignments=(("c-1", b"\x01\x02"), ("c-2", b""))),
    m.SyncGroupResponse(assignment=b"\x01\x02"),
    m.SyncGroupResponse(error=27, message="rebalancing"),
    m.Heartbeat(group="billing", generation=4, member_id="c-1"),
    m.HeartbeatResponse(error=22, message="stale generation"),
    m.LeaveGroup(group="billing", members=(("c-1", None), ("", "host-3"))),
    m.LeaveGroupResponse(members=(("c-1", 0, ""), ("", 25, "unknown member"))),
    m.DeleteOffsets(group="billing", parts=(("orders", 0), ("orders", 1))),
    m.DeleteOffsetsResponse(parts=(("orders", 0, 0, ""), ("orders", 1, 86, "subscribed"))),
    m.CommitOffsetsResponse(parts=(("orders", 0, 0, ""),)),
    m.FetchOffsets(group="billing", parts=(("orders", 0),)),
    m.FetchOffsets(group="billing", parts=None),
    m.FetchOffsetsResponse(parts=(("orders", 0, 1200, "host-3", T0),)),
    m.ListGroups(),
    m.ListGroupsResponse(groups=("billing", "audit"), kinds=("classic", "consumer")),
    m.DescribeGroups(groups=("billing",)),
    m.DescribeGroupsResponse(groups=(("billing", 0, "", (("orders", 0, 1200, 1300, 100, T0, 5000),),
                                      "Stable", "range", 7,
                                      (("c-1", "host-3", "billing-app", "127.0.0.1:50000", b"\x01",
                                        b"\x02"),), "classic"),
                                     ("nope", 69, "unknown group 'nope'", (), "", "", -1, (), ""))),
    m.InitProducerId(),
    m.InitProducerIdResponse(producer_id=(T0 << 8) + 1, producer_epoch=0),
    m.InitProducerId(transactional_id="etl-1", transaction_timeout_ms=30_000),
    m.FindCoordinator(group="etl-1", key_type=1),
    m.Fetch(max_wait_ms=100, parts=(("orders", 0, 1200, 1 << 20),), isolation=1),
    m.FetchResponse(parts=(("orders", 0, 0, "", 1300, 0, len(B1)),), payload=(B1,),
                    txn=(("orders", 0, 1250, ((7, 1210), (9, 1230))),)),
    m.ListOffsets(parts=(("orders", 0, -1),), isolation=1),
    m.AddPartitionsToTxn(transactional_id="etl-1", producer_id=7, producer_epoch=2,
                         parts=(("orders", 0), ("orders", 1))),
    m.AddPartitionsToTxnResponse(parts=(("orders", 0, 0, ""), ("orders", 1, 51, "completing"))),
    m.AddOffsetsToTxn(transactional_id="etl-1", producer_id=7, producer_epoch=2, group="billing"),
    m.AddOffsetsToTxnResponse(),
    m.EndTxn(transactional_id="etl-1", producer_id=7, producer_epoch=2, commit=False),
    m.EndTxnResponse(error=90, message="fenced by epoch 3"),
    m.TxnOffsetCommit(transactional_id="etl-1", producer_id=7, producer_epoch=2, group="billing",
                      generation=4, member_id="c-1", offsets=(("orders", 0, 1200, ""),)),
    m.TxnOffsetCommitResponse(parts=(("orders", 0, 0, ""),)),
    m.WriteTxnMarkers(markers=((7, 2, True, 3, "orders", 0),)),
    m.WriteTxnMarkersResponse(parts=((7, "orders", 0, 0, ""),)),
    m.VerifyTxnPartitions(transactional_id="etl", producer_id=7, producer_epoch=2,
                          parts=(("orders", 0),)),
    m.VerifyTxnPartitionsResponse(parts=(("orders", 0, 48, "not in the transaction"),)),
    m.DescribeProducers(parts=(("orders", 0),)),
    m.DescribeProducersResponse(parts=(("orders", 0, 0, "", ((7, 2, 0, 15, T0),)),)),
    m.AbortTxnPartition(parts=(("orders", 0, 7, -1, -1),)),
    m.AbortTxnPartitionResponse(parts=(("orders", 0, 0, ""),)),
    m.DescribeTransactions(transactional_ids=("etl-1", "nope")),
    m.DescribeTransactionsResponse(transactions=(
        ("etl-1", 0, "", "Ongoing", 7, 2, 60_000, T0, (("orders", 0),)),
        ("nope", 105, "unknown transactional id 'nope'", "", -1, -1, 0, -1, ()))),
    m.ListTransactions(states=("Ongoing",)),
    m.ListTransactionsResponse(transactions=(("etl-1", 7, "Ongoing"),)),
    m.DeleteGroups(groups=("billing", "nope")),
    m.DeleteGroupsResponse(groups=(("billing", 0, ""), ("nope", 24, "unknown group 'nope'"))),
    m.FetchResponse(error=42, message="Fetch: parts: expected a list"),
    m.SaslHandshake(mechanism="SCRAM-SHA-256"),
    m.SaslHandshakeResponse(mechanisms=("SCRAM-SHA-256",)),
    m.SaslAuthenticate(auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"),
    m.SaslAuthenticateResponse(auth_bytes=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", principal="User:alice"),
    m.CreateUser(name="alice", salt=b"\x01" * 16, stored_key=b"\x02" * 32, server_key=b"\x03" * 32),
    m.CreateUserResponse(created=True),
    m.DeleteUser(name="alice"),
    m.DeleteUserResponse(error=91, message="no user 'alice'"),
    m.ListUsers(),
    m.ListUsersResponse(users=(("alice", "SCRAM-SHA-256", 4096),)),
    m.CreateAcls(acls=(("User:alice", "topic", "orders", "prefix", "read", "allow"),)),
    m.CreateAclsResponse(created=1),
    m.DeleteAcls(principal="User:alice", resource_type="topic"),
    m.DeleteAclsResponse(acls=(("User:alice", "topic", "orders", "prefix", "read", "allow"),)),
    m.DescribeAcls(),
    m.DescribeAclsResponse(acls=(("User:*", "group", "g", "literal", "all", "deny"),)),
    m.DescribeConfigs(topics=("orders", "nope")),
    m.DescribeConfigsResponse(topics=(("orders", 0, "", {"retention_ms": 60000, "flush": "fsync"},
                                       {"retention_ms": 60000}),
                                      ("nope", 3, "unknown topic 'nope'", {}, {}))),
    m.AlterConfigs(topics=(("orders", (("retention_ms", "set", 1000),
                                       ("cleanup_policy", "append", "compact"),
                                       ("segment_ms", "delete", None)), False),),
                   validate_only=True),
    m.AlterConfigsResponse(topics=(("orders", 0, ""), ("nope", 40, "unknown topic setting"))),
    m.AlterReassignments(parts=(("orders", 0, (2, 3)), ("orders", 1, None))),
    m.AlterReassignmentsResponse(parts=(("orders", 0, 0, ""), ("orders", 1, 85, "not moving"))),
    m.ListReassignments(topics=(("orders", (0, 1)), ("audit", None))),
    m.ListReassignmentsResponse(parts=(("orders", 0, (2, 3, 1), (3,), (1,)),)),
]


def fill(path, topic="orders", partitions=2, batches=40, per=10, **settings):
    """``batches`` batches per partition of ``per`` records: value b"p-i", key
    b"k<i%3>", one header, timestamp T0 + batch index * 1000."""
    settings.setdefault("segment_bytes", 4096)
    settings.setdefault("index_interval_bytes", 512)
    s = open_store(path, **settings)
    s.create_topic(topic, partitions)
    for p in range(partitions):
        lg = s.get_log(topic, p)
        for b in range(batches):
            recs = [(b"%d-%d" % (p, b * per + j), b"k%d" % ((b * per + j) % 3), (("h", b"%d" % j),),
                     T0 + b * 1000) for j in range(per)]
            lg.append([build_batch(recs)])
        lg.set_high_watermark(lg.log_end_offset)
    return s


# -- clients ----------------------------------------------------------------
FAST = dict(request_timeout_ms=5_000, connect_timeout_ms=2_000)


def consume(consumer, n: int, timeout: float = 15.0) -> list:
    """Poll until ``n`` records arrived (more are kept) or ``timeout`` passed."""
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


async def aconsume(consumer, n: int, timeout: float = 15.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += await consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


def missing(why: str, required_env: str) -> None:
    """A tool the test needs is missing: skip it, or fail it when
    ``required_env`` is "1" (CI sets it: there the tool must be installed)."""
    import pytest

    if os.environ.get(required_env) == "1":
        pytest.fail(why)
    pytest.skip(why)


def require_tool(name: str, required_env: str, install: str) -> str:
    """The path of ``name`` on PATH, or ``missing`` (``install``: the script that installs it)."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} not installed: run 'sudo {install}' (make test does as root)",
                required_env)
    return path


# -- raw connections --------------------------------------------------------
OPEN: list["RawConn"] = []  # closed by the close_raw_conns fixture in conftest.py


class RawConn:
    def __init__(self, port: int, timeout: float = 10.0, source: "str | None" = None) -> None:
        """``source``: the local address to connect from (another loopback one, 127.0.0.2)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        OPEN.append(self)
        self.reader = FrameReader()
        self.cid = 0

    def send(self, msg, cid: "int | None" = None) -> int:
        if cid is None:
            self.cid += 1
            cid = self.cid
        self.sock.sendall(encode_bytes(msg, cid))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 10.0):
        """The next response Envelope, or None when the broker closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                return decode(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no response in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.reader.receive_data(data)

    def call(self, msg, timeout: float = 10.0):
        cid = self.send(msg)
        env = self.recv(timeout)
        assert env is not None and env.cid == cid, env
        return env.message

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closes the connection (bounded wait)."""
        try:
            return self.recv(timeout) is None
        except (TimeoutError, OSError):
            return False

    def close(self) -> None:
        self.sock.close()


# -- the CLI (helper of issue 9: CLI and unreachable broker) -----------------------------------
CLI_ERROR_NAME = r"(?:[A-Z][A-Z0-9_]*)"  # error: NAME: ... (a registry name, USAGE, OS_ERROR)


closed_port = free_port  # a loopback port nobody listens on (bound once, then released)


def run_cli(*args: str, bootstrap: "str | None" = None, stdin: "bytes | None" = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    """The real ``logbroker`` executable (bounded by ``timeout`` s)."""
    env = dict(os.environ)
    env.pop("LOGBROKER_DEBUG", None)
    if bootstrap is not None:
        env["LOGBROKER_BOOTSTRAP"] = bootstrap
    return subprocess.run([LOGBROKER, *args], input=stdin, capture_output=True, env=env,
                          timeout=timeout)


def cli_ok(result) -> str:
    """stdout of a run that must have succeeded."""
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"Traceback" not in result.stderr
    return result.stdout.decode()


def cli_error(result, name: str) -> str:
    """The message of a run that must have failed with exactly one
    ``error: NAME: message`` line on stderr."""
    err = result.stderr.decode(errors="replace")
    assert result.returncode not in (0, None), err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {name}: "), err
    return lines[0][len(f"error: {name}: "):]


def invoke_cli(args, stdin: "bytes | None" = None, bootstrap: "str | None" = None,
               timeout: "float | None" = None):
    """The CLI in this process (click's CliRunner): a ``click.testing.Result``
    with ``exit_code``, ``stdout``, ``stderr`` and ``exception`` (a
    ``SystemExit`` for every normal exit). ``bootstrap``/``timeout``: the
    defaults of -b and --timeout (LOGBROKER_BOOTSTRAP, LOGBROKER_TIMEOUT)."""
    from click.testing import CliRunner

    from logbroker.cli.main import main

    env = {"LOGBROKER_BOOTSTRAP": bootstrap, "LOGBROKER_DEBUG": None,
           "LOGBROKER_TIMEOUT": None if timeout is None else str(timeout)}
    return CliRunner().invoke(main, list(args), input=stdin, env=env, catch_exceptions=True)


def invoked_error(result, name: str) -> str:
    """``cli_error`` for an in-process ``invoke_cli`` result."""
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    lines = result.stderr.splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {name}: "), result.stderr
    return lines[0][len(f"error: {name}: "):]


# -- broker memory (issue 9 helper: the broker's edge) ---------------------------------
def broker_rss(broker: BrokerProcess) -> int:
    """The broker process's resident set size in bytes (Linux /proc)."""
    return status_kib(broker.pid, "VmRSS") << 10


def raise_nofile(needed: int) -> None:
    """Raise this process's soft open-file limit to ``needed`` (brokers started
    afterwards inherit it); skips the test when the hard limit is lower."""
    import pytest
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"open-file hard limit {hard} < {needed}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def broker_unread_bytes(broker: BrokerProcess, conn: RawConn) -> int:
    """Bytes ``conn`` sent that the broker has not read from its socket yet
    (the receive queue in /proc/net/tcp); -1 when the socket is not found."""
    want = (broker.port, conn.sock.getsockname()[1])
    with open("/proc/net/tcp") as fh:
        for line in list(fh)[1:]:
            fields = line.split()
            local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
            if (local, remote) == want:
                return int(fields[4].split(":")[1], 16)
    return -1


def invoked_ok(result) -> str:
    """stdout of an ``invoke_cli`` run that must have succeeded."""
    assert result.exit_code == 0 and (result.exception is None or isinstance(
        result.exception, SystemExit)), (result.stderr, repr(result.exception))
    return result.stdout


def gone(pid: int) -> bool:
    """Whether no process ``pid`` exists any more (``kill(pid, 0)`` fails)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the cluster's helpers live in tests/support/cluster.py and tests/support/proxy.py; re-exported
from tests.support.cluster import ROOT, Cluster, require_etcd, segment_bytes  # noqa: E402,F401
from tests.support.proxy import TcpProxy  # noqa: E402,F401
