"""Unit tests of Kafka's authorizer settings (security/acl.py, security/auth.py;
docs/security.md, "Authorization"): ``allow_everyone_if_no_acl_found``
(a resource no binding matches is everyone's; once one matches, the
bindings decide), the anonymous principal ``User:ANONYMOUS``, and when
ACLs are enforced."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.broker.config import BrokerConfig
from logbroker.errors import ClusterAuthorizationFailedError, InvalidConfigError
from logbroker.security.acl import ANONYMOUS, OPERATIONS, AclBinding, Authorizer
from logbroker.security.auth import BrokerAuth, Session
from logbroker.protocol import messages as m

ALICE, BOB = "User:alice", "User:bob"


def acl(principal=ALICE, name="orders", pattern="literal", op="read", permission="allow",
        rtype="topic") -> AclBinding:
    return AclBinding(principal, rtype, name, pattern, op, permission).check()


def test_a_resource_without_bindings_is_everyones_once_one_exists_they_decide():
    a = Authorizer([acl(BOB, op="all", permission="deny"), acl(ALICE, op="all")],
                   allow_if_no_acl=True)
    assert a.authorize(BOB, "write", "topic", "free")  # no binding names it
    assert a.authorize(ANONYMOUS, "read", "topic", "free")
    assert a.authorize(ALICE, "read", "topic", "orders")
    assert not a.authorize(BOB, "describe", "topic", "orders")  # deny wins
    assert not a.authorize(ANONYMOUS, "describe", "topic", "orders")  # a binding exists: not his
    assert not a.authorize("User:carol", "read", "topic", "orders")
    assert a.authorize(BOB, "alter", "cluster", "logbroker")  # nothing names the cluster
    assert not Authorizer([acl()]).authorize(BOB, "read", "topic", "free")  # the setting off


def test_a_binding_of_any_operation_or_a_prefix_or_the_wildcard_name_counts():
    a = Authorizer([acl(op="write"), acl(name="pay", pattern="prefix"),
                    acl(name="*", rtype="group")], allow_if_no_acl=True)
    assert not a.authorize(ALICE, "read", "topic", "orders")  # write only: read not allowed
    assert not a.authorize(BOB, "read", "topic", "payments")  # the prefix names it
    assert a.authorize(BOB, "read", "topic", "pa")  # the prefix does not
    assert not a.authorize(BOB, "read", "group", "any")  # "*" names every group


def test_anonymous_is_a_principal_bindings_may_name_and_the_wildcard_matches():
    a = Authorizer([acl(ANONYMOUS, name="public"), acl("User:*", name="shared")])
    assert a.authorize(ANONYMOUS, "read", "topic", "public")
    assert not a.authorize(BOB, "read", "topic", "public")
    assert a.authorize(ANONYMOUS, "read", "topic", "shared")
    assert not a.authorize("", "read", "topic", "shared")  # the empty principal: nothing


_names = st.sampled_from(["a", "ab", "abc", "b", "ba"])
_bindings = st.builds(AclBinding, st.sampled_from([ALICE, BOB, "User:*", ANONYMOUS]),
                      st.just("topic"), _names, st.sampled_from(["literal", "prefix"]),
                      st.sampled_from(OPERATIONS), st.sampled_from(["allow", "deny"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_bindings, max_size=8), st.sampled_from([ALICE, BOB, ANONYMOUS]), _names,
       st.sampled_from(OPERATIONS[:-1]))
def test_the_default_equals_a_scan_for_any_binding_of_the_resource(bindings, principal, name,
                                                                   op):
    """With the setting, the check is the setting-off check, or True when no
    binding (whoever it names) matches the resource."""
    names_it = any(name == b.name if b.pattern == "literal" else name.startswith(b.name)
                   for b in bindings)
    strict = Authorizer(bindings).authorize(principal, op, "topic", name)
    assert Authorizer(bindings, allow_if_no_acl=True).authorize(
        principal, op, "topic", name) == (strict or not names_it)


class _Stores:
    """The metadata's user and ACL stores, in memory (what BrokerAuth reads)."""

    def __init__(self, bindings=()):
        self.bindings = list(bindings)

    def list(self):
        return self.bindings

    def get(self, name):
        return None

    def bootstrap_open(self):
        return False


def _auth(bindings=(), **settings_) -> BrokerAuth:
    stores = _Stores(bindings)
    return BrokerAuth(BrokerConfig(**settings_), lambda on_acls: (stores, stores))


@pytest.mark.parametrize("settings_, enforced", [
    ({}, False),
    ({"super_users": ("User:admin",)}, False),  # as before: super_users alone enforce nothing
    ({"auth_required": True}, False),
    ({"auth_required": True, "super_users": ("User:admin",)}, True),  # the old rule
    ({"allow_everyone_if_no_acl_found": True}, True),  # Kafka's: the authorizer setting alone
])
def test_when_acls_are_enforced(settings_, enforced):
    assert _auth(**settings_).enforcing is enforced


def test_an_anonymous_session_is_user_anonymous_for_acls_only():
    auth = _auth([acl(name="secret", op="all", permission="deny", principal=ANONYMOUS)],
                 allow_everyone_if_no_acl_found=True)
    s = Session(auth, "127.0.0.1:5000", failed=lambda: None)
    assert s.principal == "" and s.acl_principal == ANONYMOUS and not s.gated
    assert s.authorize(m.Metadata(topics=("open",))) is None
    response, close = s.authorize(m.Metadata(topics=("secret",)))
    assert response.error == 29 and "User:ANONYMOUS may not describe topic 'secret'" in \
        response.message and not close


def test_acl_administration_without_auth_required_is_decided_by_the_acls():
    open_ = Session(_auth(allow_everyone_if_no_acl_found=True), "10.0.0.9:1", lambda: None)
    assert open_.may_administer("alter") is False  # no binding names the cluster
    held = _auth([acl(ALICE, rtype="cluster", name="logbroker", op="alter")],
                 allow_everyone_if_no_acl_found=True)
    with pytest.raises(ClusterAuthorizationFailedError, match="User:ANONYMOUS may not alter"):
        Session(held, "10.0.0.9:1", lambda: None).may_administer("alter")
    # without enforcement nothing changes: administration is open as before
    assert Session(_auth(), "10.0.0.9:1", lambda: None).may_administer("alter") is False


def test_the_setting_must_be_a_boolean():
    with pytest.raises(InvalidConfigError, match="allow_everyone_if_no_acl_found must be true "
                                                 "or false"):
        BrokerConfig(allow_everyone_if_no_acl_found="yes")
