"""A broker on a secured etcd (issue 29, item 3): a real etcd serving TLS
only and requiring client certificates (``--client-cert-auth``), the
certificates made by trustme. The broker joins with ``etcd_ca``,
``etcd_cert`` and ``etcd_key`` and serves; a client without a
certificate, or trusting another CA, is refused by etcd."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from bench.common.procs import BrokerProcess, free_ports, kill_process
from logbroker.cluster.etcd import Etcd
from logbroker.cluster.etcd_access import EtcdAccess
from logbroker.errors import ClusterUnavailableError
from logbroker.protocol import messages as m
from tests.support.cluster import require_etcd
from tests.support.fixtures import RawConn, wait_until


@pytest.fixture
def tls_etcd(tmp_path):
    trustme = pytest.importorskip("trustme")
    binary = require_etcd()
    ca, other = trustme.CA(), trustme.CA()
    files = {}
    for name, pem in (("ca.pem", ca.cert_pem), ("other.pem", other.cert_pem)):
        pem.write_to_path(str(tmp_path / name))
        files[name] = str(tmp_path / name)
    for name, leaf in (("server", ca.issue_cert("127.0.0.1")), ("client", ca.issue_cert("broker"))):
        leaf.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(tmp_path / f"{name}.key"))
        files[name] = (str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key"))
    client_port, peer_port = free_ports(2)
    url, peer = f"https://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    log = open(tmp_path / "etcd.log", "wb")
    proc = subprocess.Popen(
        [binary, "--name", "s", "--data-dir", str(tmp_path / "etcd"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", f"s={peer}", "--heartbeat-interval", "10",
         "--election-timeout", "100", "--cert-file", files["server"][0],
         "--key-file", files["server"][1], "--trusted-ca-file", files["ca.pem"],
         "--client-cert-auth", "--log-level", "warn"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    files["url"] = url
    try:
        access = _access(files, cert=True)
        wait_until(lambda: _reachable(url, access), 20, "etcd over TLS")
        yield files
    finally:
        kill_process(proc)
        log.close()


def _access(files, cert: bool, ca: str = "ca.pem") -> EtcdAccess:
    from pathlib import Path

    read = lambda p: Path(p).read_bytes()  # noqa: E731
    return EtcdAccess(tls=True, ca=read(files[ca]),
                      cert=read(files["client"][0]) if cert else None,
                      key=read(files["client"][1]) if cert else None)


def _reachable(url: str, access: EtcdAccess) -> bool:
    async def go():
        e = Etcd(url, timeout=2.0, access=access)
        try:
            await e.get("/logbroker/probe")
            return True
        except ClusterUnavailableError:
            return False
        finally:
            await e.close()
    return asyncio.run(go())


def test_a_broker_joins_an_etcd_with_tls_and_client_certificates(tls_etcd, tmp_path):
    url = tls_etcd["url"]
    # etcd refuses a client without a certificate, and one trusting another CA
    assert not _reachable(url, _access(tls_etcd, cert=False))
    assert not _reachable(url, _access(tls_etcd, cert=True, ca="other.pem"))
    b = BrokerProcess(tmp_path / "b1", "--broker-id", "1", "--etcd", url, config={
        "etcd_ca": tls_etcd["ca.pem"], "etcd_cert": tls_etcd["client"][0],
        "etcd_key": tls_etcd["client"][1], "session_timeout_ms": 2000})
    try:
        b.start()
        conn = RawConn(b.port)
        resp = conn.call(m.CreateTopics(topics=(("secure", 1, {}),)))
        assert resp.topics[0][1] == 0, resp
        resp = conn.call(m.Metadata(topics=("secure",)))
        assert resp.partitions and resp.partitions[0][2] == 1, resp
        conn.close()
    finally:
        b.kill()


def test_etcd_settings_are_checked(tmp_path):
    from logbroker.broker.config import BrokerConfig
    from logbroker.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="https://"):
        BrokerConfig(etcd="http://127.0.0.1:2379", etcd_ca=str(tmp_path / "ca.pem"))
    with pytest.raises(InvalidConfigError, match="go together"):
        BrokerConfig(etcd="https://127.0.0.1:2379", etcd_cert="c.pem")


async def _enable_auth(url: str, password: str) -> None:
    """etcd's authentication on (as ``etcdctl user add``, ``role
    grant-permission --prefix``, ``auth enable``): root, and a user
    ``logbroker`` that may read and write /logbroker/ only."""
    import grpc
    from aetcd import rpc

    channel = grpc.aio.insecure_channel(url.removeprefix("http://"))
    try:
        a = rpc.AuthStub(channel)
        await a.UserAdd(rpc.AuthUserAddRequest(name="root", password="root-pw"))
        await a.UserGrantRole(rpc.AuthUserGrantRoleRequest(user="root", role="root"))
        await a.UserAdd(rpc.AuthUserAddRequest(name="logbroker", password=password))
        await a.RoleAdd(rpc.AuthRoleAddRequest(name="logbroker"))
        await a.RoleGrantPermission(rpc.AuthRoleGrantPermissionRequest(
            name="logbroker", perm=rpc.Permission(permType=rpc.Permission.READWRITE,
                                                  key=b"/logbroker/", range_end=b"/logbroker0")))
        await a.UserGrantRole(rpc.AuthUserGrantRoleRequest(user="logbroker", role="logbroker"))
        await a.AuthEnable(rpc.AuthEnableRequest())
    finally:
        await channel.close()


def test_a_broker_joins_an_etcd_with_users_and_survives_its_restart(etcd, tmp_path,
                                                                     monkeypatch):
    """etcd's user authentication: anonymous and wrong-password clients are
    refused; a broker with ``etcd_user`` and LOGBROKER_ETCD_PASSWORD joins,
    and keeps working across a restart of etcd."""
    asyncio.run(_enable_auth(etcd.url, "right-pw"))
    assert not _reachable(etcd.url, None)
    assert not _reachable(etcd.url, EtcdAccess(user="logbroker", password="wrong-pw"))
    assert _reachable(etcd.url, EtcdAccess(user="logbroker", password="right-pw"))
    monkeypatch.setenv("LOGBROKER_ETCD_PASSWORD", "right-pw")
    b = BrokerProcess(tmp_path / "b1", "--broker-id", "1", "--etcd", etcd.url, config={
        "etcd_user": "logbroker", "session_timeout_ms": 10_000})
    try:
        b.start()
        conn = RawConn(b.port)
        assert conn.call(m.CreateTopics(topics=(("before", 1, {}),))).topics[0][1] == 0
        etcd.stop()
        etcd.start()

        conn.close()

        def created() -> bool:  # an attempt may time out while the broker reconnects
            attempt = RawConn(b.port, timeout=20)
            try:
                resp = attempt.call(m.CreateTopics(topics=(("after", 1, {}),)), 20)
                return resp.topics[0][1] in (0, 36)  # created (36: by an earlier try)
            except TimeoutError:
                return False
            finally:
                attempt.close()
        wait_until(created, 60, "a topic created after etcd's restart")
        conn = RawConn(b.port)
        resp = conn.call(m.Metadata(topics=("before", "after")))
        assert {p[0] for p in resp.partitions} == {"before", "after"}, resp
        conn.close()
    finally:
        b.kill()
