"""Authentication and ACLs in cluster mode (docs/security.md, "In a
cluster"): two real brokers joined through a real etcd, with
auth_required, super_users and an inter-broker user. Users and ACL
bindings live in etcd: a user created through one broker logs in at the
other, an ACL added through one is enforced by the other, the bootstrap
rule is cluster-wide and race-safe; the brokers authenticate to each
other (acks=all needs the follower's ReplicaFetch), and a broker with a
wrong inter-broker password does not replicate and says why."""

from __future__ import annotations

import os

import pytest
from tests.support.fixtures import BrokerProcess, Cluster, RawConn, wait_until
from tests.support.cluster import EtcdProcess, require_etcd, segment_bytes
from tests.support.scram import scram_exchange

from logbroker import Admin, Producer
from logbroker.errors import SaslAuthenticationFailedError
from logbroker.client.admin.results import Acl
from logbroker.client.net.auth import user_credentials
from logbroker.protocol import messages as m

ADMIN_PW, BROKER_PW, USER_PW = "admin-Pa55word", "broker-Pa55word", "user-Pa55word"
NOT_AUTHENTICATED, TOPIC_DENIED, CLUSTER_DENIED = 58, 29, 31
PROPAGATION_S = 10  # bounded waits for another broker's watch


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """Brokers 1 and 2 with auth_required, super users admin and broker,
    inter_broker_user broker (its password from a file); admin created by
    the bootstrap rule, then the broker user. ``secure.race``: the answers
    of the two bootstrap CreateUser requests sent to both brokers at once."""
    require_etcd()
    base = tmp_path_factory.mktemp("auth-cluster")
    pw_file = base / "broker.pw"
    pw_file.write_text(BROKER_PW + "\n")
    with EtcdProcess(base / "etcd") as etcd:
        cluster = Cluster(base, etcd.url, n=2, config=_settings(pw_file))
        cluster.etcd, cluster.base = etcd, base
        try:
            for b in cluster.brokers.values():
                b.start()
            cluster.race = _bootstrap_race(cluster)
            with admin_at(cluster.brokers[1]) as admin:
                assert admin.create_user("broker", BROKER_PW) is True
            for i, b in cluster.brokers.items():  # the other broker learns both through its watch
                wait_until(lambda: _knows(b, "broker"), 15, f"broker {i} knows the user broker")
            yield cluster
        finally:
            cluster.close()


def _settings(pw_file) -> dict:
    return {"auth_required": True, "super_users": ["User:admin", "User:broker"],
            "inter_broker_user": "broker", "inter_broker_password_file": str(pw_file)}


def _bootstrap_race(cluster) -> list[int]:
    """Anonymous loopback CreateUser admin sent to both brokers before either
    answers: the error code of each answer."""
    salt, stored, server, n = user_credentials(ADMIN_PW, 4096)
    conns = [RawConn(b.port) for b in cluster.brokers.values()]
    for c in conns:
        assert c.call(m.Handshake()).error == 0
    cids = [c.send(m.CreateUser(name="admin", salt=salt, stored_key=stored, server_key=server,
                                iterations=n)) for c in conns]
    answers = []
    for c, cid in zip(conns, cids):
        env = c.recv(15)
        assert env is not None and env.cid == cid
        answers.append(env.message.error)
    return answers


def admin_at(b: BrokerProcess) -> Admin:
    return Admin(b.bootstrap, username="admin", password=ADMIN_PW)


def _knows(b: BrokerProcess, user: str) -> bool:
    """Whether ``b`` lists ``user``, asked as admin; False while ``b`` does
    not know admin yet either (its etcd watch has not delivered it)."""
    try:
        with admin_at(b) as admin:
            return user in [u.name for u in admin.list_users()]
    except SaslAuthenticationFailedError:
        return False


def authed(port: int, user: str, password: str) -> "RawConn | None":
    """A raw connection that completed SCRAM as ``user``; None if refused."""
    conn = RawConn(port)
    final = scram_exchange(conn, user, password)
    if final.error:
        conn.close()
        return None
    assert final.principal == f"User:{user}"
    return conn


def test_the_first_user_is_created_once_across_the_cluster(secure):
    assert sorted(secure.race) == [0, CLUSTER_DENIED], secure.race
    b2 = secure.brokers[2]  # never saw a user created through it: the rule reads etcd's
    conn = RawConn(b2.port)
    salt, stored, server, n = user_credentials("pw-mallory", 4096)
    resp = conn.call(m.CreateUser(name="mallory", salt=salt, stored_key=stored,
                                  server_key=server, iterations=n))
    assert resp.error == CLUSTER_DENIED and "authenticated" in resp.message
    with admin_at(b2) as admin:
        assert [u.name for u in admin.list_users()] == ["admin", "broker"]


def test_anonymous_requests_are_refused_by_every_broker(secure):
    for b in secure.brokers.values():
        conn = RawConn(b.port)
        assert conn.call(m.Handshake()).error == 0
        resp = conn.call(m.Metadata())
        assert resp.error == NOT_AUTHENTICATED and "requires authentication" in resp.message


def test_replicas_fetch_as_the_inter_broker_user(secure):
    with admin_at(secure.brokers[1]) as admin:
        admin.create_topic("orders", 2, replication_factor=2)

        def in_sync():
            parts = admin.describe_cluster(["orders"]).partitions
            return len(parts) == 2 and all(p.leader >= 0 and len(p.isr) == 2 for p in parts)
        wait_until(in_sync, 15, "both replicas of every partition in sync")
    bootstrap = ",".join(b.bootstrap for b in secure.brokers.values())
    with Producer(bootstrap, username="admin", password=ADMIN_PW, acks="all") as p:
        handles = [p.send("orders", b"v%d" % i, partition=i % 2) for i in range(40)]
        p.flush(15)
    assert all(h.result(0).offset >= 0 for h in handles)

    def replicated():  # the follower fetched: the same bytes on both brokers
        copies = [[segment_bytes(b.data_dir, "orders", p) for b in secure.brokers.values()]
                  for p in (0, 1)]
        return all(c[0] and c[0] == c[1] for c in copies)
    wait_until(replicated, 15, "every partition's segments the same on both brokers")
    with admin_at(secure.brokers[2]) as admin:
        assert all(len(p.isr) == 2 for p in admin.describe_cluster(["orders"]).partitions)
    for b in secure.brokers.values():  # only the fixture's admin, before a watch delivered it
        failed = [ln for ln in b.log().splitlines() if "authentication from" in ln]
        assert all("as 'admin' failed: unknown user" in ln for ln in failed), failed
        assert "Traceback" not in b.log()


def test_a_user_created_at_one_broker_logs_in_at_the_other(secure):
    b1, b2 = secure.brokers[1], secure.brokers[2]
    with admin_at(b1) as admin:
        assert admin.create_user("carol", USER_PW) is True
    assert authed(b1.port, "carol", USER_PW) is not None  # the writer sees its own write at once
    wait_until(lambda: authed(b2.port, "carol", USER_PW), PROPAGATION_S, "carol known at broker 2")
    assert authed(b2.port, "carol", "not-her-password") is None
    with admin_at(b2) as admin:
        admin.delete_user("carol")
    assert authed(b2.port, "carol", USER_PW) is None
    wait_until(lambda: authed(b1.port, "carol", USER_PW) is None, PROPAGATION_S,
               "carol gone at broker 1")


def test_an_acl_added_at_one_broker_is_enforced_by_the_other(secure):
    b1, b2 = secure.brokers[1], secure.brokers[2]
    with admin_at(b1) as admin:
        admin.create_user("dave", USER_PW)
        admin.create_topic("ledger", 1, replication_factor=2)
    wait_until(lambda: authed(b2.port, "dave", USER_PW), PROPAGATION_S, "dave known at broker 2")
    at_b1 = authed(b1.port, "dave", USER_PW)

    def describe_error() -> int:
        return at_b1.call(m.Metadata(topics=("ledger",))).error

    assert describe_error() == TOPIC_DENIED
    with admin_at(b2) as admin:
        assert admin.create_acls([Acl("User:dave", "topic", "ledger", "literal", "describe")]) == 1
        assert describe_acls_at(b2, "User:dave") == 1  # the writer sees its own write
        wait_until(lambda: describe_error() == 0, PROPAGATION_S, "the ACL enforced at broker 1")
        assert len(admin.delete_acls(principal="User:dave")) == 1
    wait_until(lambda: describe_error() == TOPIC_DENIED, PROPAGATION_S,
               "the ACL's removal enforced at broker 1")


def test_listing_every_topic_names_topics_hosted_on_other_brokers(secure):
    """An all-topics Metadata under ACLs is narrowed to what the principal
    may describe out of every topic of the cluster, not only the topics
    whose partitions this broker stores (a replication factor of 1 puts
    ``solo`` on one broker only)."""
    b1, b2 = secure.brokers[1], secure.brokers[2]
    with admin_at(b1) as admin:
        admin.create_user("erin", USER_PW)
        admin.create_topic("solo", 1, replication_factor=1)
        admin.create_acls([Acl("User:erin", "topic", "solo", "literal", "describe")])
    try:
        for b in (b1, b2):
            wait_until(lambda: authed(b.port, "erin", USER_PW), PROPAGATION_S, "erin known")
            conn = authed(b.port, "erin", USER_PW)
            wait_until(lambda: [t[0] for t in conn.call(m.Metadata()).topics] == ["solo"],
                       PROPAGATION_S, f"broker {b.port} lists solo to erin")
    finally:  # the placement of later topics counts the partitions each broker has
        with admin_at(b1) as admin:
            admin.delete_topics(["solo"])


def describe_acls_at(b: BrokerProcess, principal: str) -> int:
    with admin_at(b) as admin:
        return len(admin.describe_acls(principal=principal))


def test_a_broker_with_a_wrong_inter_broker_password_does_not_replicate(secure):
    wrong = secure.base / "wrong.pw"
    wrong.write_text("not-the-broker-password\n")
    b3 = BrokerProcess(os.path.join(str(secure.base), "broker-3"), "--broker-id", "3",
                       "--etcd", secure.etcd.url, config=_settings(wrong))
    try:
        b3.start()
        with admin_at(secure.brokers[1]) as admin:
            wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 15, "3 brokers")
            admin.create_topic("spread", 3, replication_factor=3)
            parts = admin.describe_cluster(["spread"]).partitions
        led = [p for p in parts if p.leader in (1, 2)]
        assert led  # broker 3 follows at least one partition led by 1 or 2
        bootstrap = ",".join(b.bootstrap for b in secure.brokers.values())
        with Producer(bootstrap, username="admin", password=ADMIN_PW, acks=1) as p:
            for part in led:
                p.send("spread", b"x", partition=part.partition)
            p.flush(15)
        wait_until(lambda: "authentication as 'broker'" in b3.log(), 15, "broker 3 says why")
        line = next(x for x in b3.log().splitlines() if "authentication as 'broker'" in x)
        assert "ERROR" in line and "invalid user name or password" in line
        # the other follower got the record; broker 3 never did
        for part in led:
            other = ({1, 2} - {part.leader}).pop()
            wait_until(lambda: _has_records(secure.brokers[other], part.partition), 15,
                       f"broker {other} replicated spread-{part.partition}")
            assert not _has_records(b3, part.partition)
    finally:
        b3.kill()


def _has_records(b: BrokerProcess, partition: int) -> bool:
    d = os.path.join(b.data_dir, f"spread-{partition}")
    return os.path.isdir(d) and any(os.path.getsize(os.path.join(d, n)) > 0
                                    for n in os.listdir(d) if n.endswith(".log"))
