"""Users and ACLs in cluster mode, without brokers: the mirror's event
application (cluster/access_view.py, pure), the ACL key naming, the
inter-broker settings (cluster/peer_auth.py), and the etcd-backed stores
(cluster/access_store.py) against a real etcd: the bootstrap write is
conditional, a write is visible to the writer at once."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.security.acl import AclBinding
from logbroker.security.auth_store import Credentials
from logbroker.broker.config import BrokerConfig
from logbroker.client.net.auth import user_credentials
from logbroker.cluster.access_view import AccessView, acl_value
from logbroker.cluster.etcd import Item
from logbroker.cluster.peer_auth import PASSWORD_ENV, inter_broker_credentials
from logbroker.cluster.state import Keys
from logbroker.errors import ClusterAuthorizationFailedError, InvalidConfigError

KEYS = Keys("c1")


def cred(password: str = "pw") -> Credentials:
    salt, stored, server, n = user_credentials(password, 4096)
    return Credentials("SCRAM-SHA-256", salt, stored, server, n)


ALICE, BOB = cred("a"), cred("b")
READ = AclBinding("User:alice", "group", "billing/eu", "prefix", "read")


def view() -> tuple[AccessView, list]:
    calls: list = []
    v = AccessView(KEYS, on_acls=lambda: calls.append(1))
    return v, calls


def test_reset_loads_users_and_acls_and_skips_other_keys():
    v, calls = view()
    v.reset([Item(KEYS.user("alice"), ALICE.pack(), 5), Item(KEYS.acl(READ.fields()), acl_value(READ), 6),
             Item(KEYS.topic("orders"), b"\x80", 7)], 7)
    assert v.users == {"alice": ALICE}
    assert list(v.acls.values()) == [READ]
    assert calls == [1]


def test_acl_key_keeps_a_slash_in_a_name_inside_its_part():
    key = KEYS.acl(READ.fields())
    assert key.startswith(KEYS.acls)
    assert key[len(KEYS.acls):].split("/") == ["group", "prefix", "billing%2Feu", "User:alice",
                                               "read", "allow"]


def test_an_event_older_than_what_the_view_holds_is_ignored():
    v, calls = view()
    key = KEYS.user("alice")
    assert v.apply(key, BOB.pack(), 10)  # our own write at revision 10
    assert not v.apply(key, ALICE.pack(), 8)  # an older event still in flight
    assert v.users["alice"] == BOB
    assert v.apply(key, ALICE.pack(), 12)
    assert v.users["alice"] == ALICE
    assert v.apply(key, None, 13)
    assert not v.apply(key, BOB.pack(), 11)  # older than the deletion
    assert "alice" not in v.users
    assert calls == []  # users only: the Authorizer is not rebuilt


def test_acl_changes_call_on_acls_once_per_transaction():
    v, calls = view()
    other = AclBinding("User:bob", "topic", "t", "literal", "write")
    changes = [(KEYS.acl(b.fields()), acl_value(b)) for b in (READ, other)]
    v.apply_all(changes, 4)
    assert sorted(v.acls.values()) == sorted([READ, other]) and calls == [1]
    v.apply_all([(changes[0][0], None)], 5)
    assert list(v.acls.values()) == [other] and calls == [1, 1]


def test_reset_keeps_our_writes_newer_than_the_load():
    v, _ = view()
    v.reset([Item(KEYS.user("alice"), ALICE.pack(), 3)], 3)
    v.apply(KEYS.user("bob"), BOB.pack(), 20)
    v.apply(KEYS.user("alice"), None, 21)
    v.reset([Item(KEYS.user("alice"), ALICE.pack(), 3)], 15)  # a load taken before our writes
    assert v.users == {"bob": BOB}
    v.reset([Item(KEYS.user("alice"), ALICE.pack(), 30)], 30)  # a load after them: etcd's word
    assert v.users == {"alice": ALICE}


def test_an_undecodable_value_is_skipped():
    v, _ = view()
    assert not v.apply(KEYS.user("eve"), b"\xc1not msgpack", 2)
    assert not v.apply(KEYS.acls + "x", acl_value(AclBinding("nobody", "topic", "t")), 3)
    assert v.users == {} and v.acls == {}
    assert v.apply(KEYS.user("eve"), ALICE.pack(), 4)  # a later good value still applies


def test_inter_broker_settings(tmp_path, monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    url = "http://127.0.0.1:2379"
    with pytest.raises(InvalidConfigError, match="needs inter_broker_user"):
        BrokerConfig(etcd=url, auth_required=True)
    with pytest.raises(InvalidConfigError, match="inter_broker_user must be"):
        BrokerConfig(inter_broker_user="a,b")
    with pytest.raises(InvalidConfigError, match="needs inter_broker_user"):
        BrokerConfig(inter_broker_password_file="pw")
    assert inter_broker_credentials(BrokerConfig()) is None
    cfg = BrokerConfig(etcd=url, auth_required=True, inter_broker_user="broker",
                       inter_broker_password_file=str(tmp_path / "pw"))
    with pytest.raises(InvalidConfigError, match="cannot read"):
        inter_broker_credentials(cfg)
    (tmp_path / "pw").write_text("\n")
    with pytest.raises(InvalidConfigError, match="is empty"):
        inter_broker_credentials(cfg)
    (tmp_path / "pw").write_text("from-file\nignored\n")
    assert inter_broker_credentials(cfg).password == "from-file"
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    creds = inter_broker_credentials(cfg)
    assert (creds.username, creds.password) == ("broker", "from-env")
    assert "from-env" not in repr(creds)


def test_etcd_stores_bootstrap_once_and_see_their_writes(etcd):
    from logbroker.cluster.access_store import EtcdAclStore, EtcdUserStore
    from logbroker.cluster.etcd import Etcd

    async def main():
        clients = [Etcd(etcd.url), Etcd(etcd.url)]
        views = [AccessView(KEYS), AccessView(KEYS)]
        users = [EtcdUserStore(c, KEYS, v) for c, v in zip(clients, views)]
        try:
            got = await asyncio.gather(users[0].put("alice", ALICE, first=True),
                                       users[1].put("bob", BOB, first=True),
                                       return_exceptions=True)
            assert sorted(type(g).__name__ for g in got) == [
                "ClusterAuthorizationFailedError", "bool"], got
            winner = 0 if got[0] is True else 1
            assert not users[winner].empty()  # seen by the writer at once
            assert users[1 - winner].empty()  # the other view has no watch here
            with pytest.raises(ClusterAuthorizationFailedError):
                await users[winner].put("carol", ALICE, first=True)
            assert await users[winner].put("carol", ALICE) is True
            assert await users[winner].put("carol", BOB) is False
            assert users[winner].get("carol") == BOB
            assert await users[winner].delete("carol") is True
            assert await users[winner].delete("carol") is False
            acls = EtcdAclStore(clients[0], KEYS, views[0])
            assert await acls.add([READ, READ]) == 1
            assert await acls.add([READ]) == 0
            assert acls.list() == [READ]
            assert await acls.remove(AclBinding("User:alice", "", "", "", "", "")) == [READ]
            assert acls.list() == []
            items, revision = await clients[1].load(KEYS.root)  # what etcd holds
            fresh = AccessView(KEYS)
            fresh.reset(items, revision)
            assert set(fresh.users) == {"alice" if winner == 0 else "bob"} and not fresh.acls
        finally:
            for c in clients:
                await c.close()
    asyncio.run(main())


def test_etcd_deletes_racing_through_two_brokers_keep_a_super_user(etcd):
    """Two brokers each delete one of the two super users at once: one
    delete is refused (the user that was to remain is gone), one super
    user is left, and the bootstrap rule stays closed for a fresh mirror."""
    from logbroker.cluster.access_store import EtcdUserStore
    from logbroker.cluster.etcd import Etcd
    from logbroker.errors import InvalidRequestError

    async def main():
        clients = [Etcd(etcd.url), Etcd(etcd.url)]
        views = [AccessView(KEYS), AccessView(KEYS)]
        users = [EtcdUserStore(c, KEYS, v) for c, v in zip(clients, views)]
        supers = frozenset({"admin", "root"})
        try:
            assert await users[0].put("admin", ALICE, first=True) is True
            assert await users[0].put("root", BOB) is True
            items, revision = await clients[1].load(KEYS.root)
            views[1].reset(items, revision)  # both brokers see both super users
            got = await asyncio.gather(users[0].delete("admin", supers),
                                       users[1].delete("root", supers), return_exceptions=True)
            assert sorted(type(g).__name__ for g in got) == ["InvalidRequestError", "bool"], got
            refused = next(g for g in got if isinstance(g, InvalidRequestError))
            assert "was deleted meanwhile; retry" in refused.message
            items, revision = await clients[1].load(KEYS.root)
            fresh = AccessView(KEYS)
            fresh.reset(items, revision)
            assert len(fresh.users) == 1 and fresh.users_existed
            assert not EtcdUserStore(clients[1], KEYS, fresh).bootstrap_open()
        finally:
            for c in clients:
                await c.close()
    asyncio.run(main())
