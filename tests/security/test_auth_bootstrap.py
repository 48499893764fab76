"""The bootstrap rule never reopens (docs/security.md, "Users"), on a
single node and in a cluster, real brokers and real etcd: deleting users
stops at the last super user (and at the last user), and once any user
existed an anonymous loopback client cannot create one again even when no
user is left (users lost offline: an LMDB table emptied while the broker
was down; in a cluster, the users/ keys deleted from etcd)."""

from __future__ import annotations

import asyncio

import pytest
from logbroker import Admin
from logbroker.cluster.etcd import Etcd
from logbroker.cluster.state import Keys
from logbroker.errors import InvalidRequestError
from logbroker.storage.metastore import MetaStore
from tests.support.cluster import EtcdProcess, require_etcd
from tests.support.scram import scram_exchange
from tests.support.fixtures import (BrokerProcess, Cluster, RawConn, invoke_cli, invoked_error,
                                    invoked_ok, wait_until)

ADMIN_PW, ROOT_PW, CAROL_PW = "admin-Pa55word", "root-Pa55word", "carol-Pa55word"
REFUSED = "invalid user name or password"


def add_user(b, name: str, password: str):
    """``logbroker users add NAME`` without credentials (the bootstrap rule's path)."""
    return invoke_cli(["users", "add", name, "--user-password-stdin"], stdin=password + "\n",
                      bootstrap=b.bootstrap)


def login(b, user: str, password: str) -> str:
    """One SCRAM exchange on our listener: "" if it succeeded, else the broker's message."""
    conn = RawConn(b.port)
    try:
        return scram_exchange(conn, user, password).message
    finally:
        conn.close()


def test_users_are_deleted_down_to_the_last_super_user(tmp_path):
    b = BrokerProcess(tmp_path / "data", "--auth-required",
                      config={"super_users": ["User:admin", "User:root"]}).start()
    try:
        assert invoked_ok(add_user(b, "admin", ADMIN_PW)).strip() == "created user admin"
        with Admin(b.bootstrap, username="admin", password=ADMIN_PW) as admin:
            admin.create_user("root", ROOT_PW)
            admin.create_user("carol", CAROL_PW)
            admin.delete_user("carol")  # not a super user: goes
            admin.delete_user("admin")  # root is left
        with Admin(b.bootstrap, username="root", password=ROOT_PW) as root:
            with pytest.raises(InvalidRequestError, match="'root' is the last super user"):
                root.delete_user("root")
            assert [u.name for u in root.list_users()] == ["root"]
        err = invoked_error(add_user(b, "admin", "attacker-pw"), "CLUSTER_AUTHORIZATION_FAILED")
        assert "authenticated" in err
    finally:
        b.stop()


def test_the_bootstrap_rule_stays_closed_with_no_user_left(tmp_path):
    b = BrokerProcess(tmp_path / "data", "--auth-required").start()
    try:
        invoked_ok(add_user(b, "alice", ADMIN_PW))
        with Admin(b.bootstrap, username="alice", password=ADMIN_PW) as alice:
            with pytest.raises(InvalidRequestError, match="'alice' is the last user"):
                alice.delete_user("alice")
        b.stop()
        meta = MetaStore(str(tmp_path / "data" / "meta.lmdb"))  # the users lost, offline
        try:
            with meta.write() as txn:
                txn.drop(meta.db("users"), delete=False)
        finally:
            meta.close()
        b.start()
        err = invoked_error(add_user(b, "admin", "attacker-pw"), "CLUSTER_AUTHORIZATION_FAILED")
        assert "authenticated" in err
        assert login(b, "admin", "attacker-pw") == REFUSED
    finally:
        b.stop()


@pytest.fixture
def secure_cluster(tmp_path):
    """One broker of a cluster through a real etcd (``.etcd_url``), with
    auth_required and the super user admin, who is also its inter-broker user."""
    require_etcd()
    pw_file = tmp_path / "admin.pw"
    pw_file.write_text(ADMIN_PW + "\n")
    with EtcdProcess(tmp_path / "etcd") as etcd:
        cluster = Cluster(tmp_path, etcd.url, n=1, config={
            "auth_required": True, "super_users": ["User:admin"], "inter_broker_user": "admin",
            "inter_broker_password_file": str(pw_file)})
        cluster.etcd_url = etcd.url
        try:
            for b in cluster.brokers.values():
                b.start()
            yield cluster
        finally:
            cluster.close()


def _etcd(url: str, how):
    async def main():
        client = Etcd(url)
        try:
            return await how(client)
        finally:
            await client.close()
    return asyncio.run(main())


def test_in_a_cluster_the_bootstrap_rule_stays_closed(secure_cluster):
    b, keys = secure_cluster.brokers[1], Keys("logbroker")
    assert invoked_ok(add_user(b, "admin", ADMIN_PW)).strip() == "created user admin"
    with Admin(b.bootstrap, username="admin", password=ADMIN_PW) as admin:
        with pytest.raises(InvalidRequestError, match="'admin' is the last super user"):
            admin.delete_user("admin")
        admin.create_user("carol", CAROL_PW)
        admin.delete_user("carol")
    # every user lost from etcd (not through the broker): the broker's watch empties its mirror
    _etcd(secure_cluster.etcd_url, lambda c: c.delete_prefix(keys.users))
    wait_until(lambda: login(b, "admin", ADMIN_PW) == REFUSED, 15, "the broker forgot admin",
               interval=0.3)  # a few attempts a second: under the guessing throttle
    err = invoked_error(add_user(b, "admin", "attacker-pw"), "CLUSTER_AUTHORIZATION_FAILED")
    assert "authenticated" in err
    assert login(b, "admin", "attacker-pw") == REFUSED
    items, _ = _etcd(secure_cluster.etcd_url, lambda c: c.load(keys.root))
    assert {it.key for it in items if it.key.startswith(keys.users)} == set()  # none created
    assert keys.users_existed in {it.key for it in items}
