"""Unit tests of authorization (broker/acl.py, broker/acl_rules.py): Kafka's
rules over the bindings, and every request kind's entry in the rule table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.security.acl import (OPERATIONS, AclBinding, Authorizer)
from logbroker.security.acl_rules import NO_CHECK, RULES
from logbroker.errors import InvalidRequestError
from logbroker.protocol import messages as m
from logbroker.protocol.parts import FetchPart, OffsetCommit, ProducePart

ALICE, BOB = "User:alice", "User:bob"


def acl(principal=ALICE, rtype="topic", name="orders", pattern="literal", op="read",
        permission="allow") -> AclBinding:
    return AclBinding(principal, rtype, name, pattern, op, permission).check()


def test_no_binding_denies_and_an_allow_allows():
    a = Authorizer([acl()])
    assert a.authorize(ALICE, "read", "topic", "orders")
    assert not a.authorize(ALICE, "write", "topic", "orders")
    assert not a.authorize(ALICE, "read", "topic", "orders2")
    assert not a.authorize(BOB, "read", "topic", "orders")
    assert not a.authorize(ALICE, "read", "group", "orders")
    assert not Authorizer().authorize(ALICE, "read", "topic", "orders")


def test_deny_wins_over_allow():
    a = Authorizer([acl(op="all"), acl(pattern="prefix", name="ord", op="read", permission="deny")])
    assert not a.authorize(ALICE, "read", "topic", "orders")
    assert a.authorize(ALICE, "write", "topic", "orders")
    a = Authorizer([acl(principal="User:*", op="all"), acl(op="all", permission="deny")])
    assert not a.authorize(ALICE, "describe", "topic", "orders")
    assert a.authorize(BOB, "describe", "topic", "orders")


def test_prefix_patterns_and_the_wildcard_name():
    a = Authorizer([acl(name="pay.", pattern="prefix", op="write"),
                    acl(rtype="group", name="*", op="read")])
    assert a.authorize(ALICE, "write", "topic", "pay.eu")
    assert a.authorize(ALICE, "write", "topic", "pay.")
    assert not a.authorize(ALICE, "write", "topic", "pay")
    assert not a.authorize(ALICE, "write", "topic", "xpay.eu")
    assert a.authorize(ALICE, "read", "group", "anything")
    assert not a.authorize(ALICE, "read", "topic", "anything")


def test_wildcard_principal_matches_authenticated_users_only():
    a = Authorizer([acl(principal="User:*")])
    assert a.authorize(ALICE, "read", "topic", "orders")
    assert a.authorize(BOB, "read", "topic", "orders")
    assert not a.authorize("", "read", "topic", "orders")


def test_super_users_are_always_allowed():
    a = Authorizer([acl(principal="User:admin", op="all", permission="deny")],
                   super_users=["User:admin"])
    assert a.authorize("User:admin", "delete", "topic", "orders")
    assert a.authorize("User:admin", "alter", "cluster", "logbroker")
    assert not a.authorize(ALICE, "alter", "cluster", "logbroker")


def test_describe_is_implied_by_read_write_delete_alter_but_deny_does_not_widen():
    for op in ("read", "write", "delete", "alter"):
        assert Authorizer([acl(op=op)]).authorize(ALICE, "describe", "topic", "orders"), op
    for op in ("create", "cluster_action"):
        assert not Authorizer([acl(op=op)]).authorize(ALICE, "describe", "topic", "orders"), op
    assert not Authorizer([acl(op="describe")]).authorize(ALICE, "read", "topic", "orders")
    a = Authorizer([acl(op="describe"), acl(op="read", permission="deny")])
    assert a.authorize(ALICE, "describe", "topic", "orders")
    assert not a.authorize(ALICE, "read", "topic", "orders")


@pytest.mark.parametrize("fields", [
    ("alice", "topic", "t", "literal", "read", "allow"),
    ("User:", "topic", "t", "literal", "read", "allow"),
    ("User:a", "queue", "t", "literal", "read", "allow"),
    ("User:a", "topic", "", "literal", "read", "allow"),
    ("User:a", "topic", "t", "regex", "read", "allow"),
    ("User:a", "topic", "t", "literal", "fly", "allow"),
    ("User:a", "topic", "t", "literal", "read", "maybe"),
    ("User:a", "cluster", "other", "literal", "alter", "allow"),
])
def test_bad_bindings_are_refused(fields):
    with pytest.raises(InvalidRequestError):
        AclBinding(*fields).check()


def test_filters_match_on_the_fields_given():
    b = acl()
    assert b.matches(AclBinding("", "", "", "", "", ""))
    assert b.matches(AclBinding(ALICE, "topic", "", "", "", ""))
    assert not b.matches(AclBinding(BOB, "", "", "", "", ""))
    assert not b.matches(AclBinding("", "", "", "prefix", "", ""))


_names = st.sampled_from(["a", "ab", "abc", "b", "ba"])
_bindings = st.builds(AclBinding, st.sampled_from([ALICE, BOB, "User:*"]), st.just("topic"),
                      _names, st.sampled_from(["literal", "prefix"]),
                      st.sampled_from(OPERATIONS), st.sampled_from(["allow", "deny"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_bindings, max_size=8), st.sampled_from([ALICE, BOB]), _names,
       st.sampled_from(OPERATIONS[:-1]))
def test_the_index_answers_as_a_scan_of_every_binding(bindings, principal, name, op):
    """The indexed check equals the rules applied to every binding in turn."""
    def applies(b, for_deny):
        ops = (op, "all") if for_deny else (op, "all") + (
            ("read", "write", "delete", "alter") if op == "describe" else
            ("alter_configs",) if op == "describe_configs" else ())
        return (b.principal in (principal, "User:*") and b.operation in ops
                and (name == b.name if b.pattern == "literal" else name.startswith(b.name)))
    denied = any(b.permission == "deny" and applies(b, True) for b in bindings)
    allowed = any(b.permission == "allow" and applies(b, False) for b in bindings)
    assert Authorizer(bindings).authorize(principal, op, "topic", name) == (allowed and not denied)


def test_every_request_kind_has_an_acl_rule():
    """A new request must say what it needs (acl_rules.RULES) or why it
    needs nothing (NO_CHECK): none may go unchecked."""
    kinds = set(m.REQUESTS.values())
    missing = kinds - set(RULES) - set(NO_CHECK)
    assert not missing, sorted(c.__name__ for c in missing)
    assert not set(RULES) & set(NO_CHECK)
    assert set(RULES) | set(NO_CHECK) <= kinds
    assert all(reason for reason in NO_CHECK.values())


def test_rules_name_the_right_resources():
    known = {"orders"}.__contains__
    produce = m.Produce(parts=(ProducePart("orders", 0, 1), ProducePart("orders", 1, 1),
                               ProducePart("new", 0, 1)))
    assert RULES[m.Produce](produce, known) == [("write", "topic", "orders"),
                                                ("write", "topic", "new"),
                                                ("create", "topic", "new")]
    assert RULES[m.Fetch](m.Fetch(parts=(FetchPart("orders", 0, 0, 1),)), known) == [
        ("read", "topic", "orders")]
    commit = m.CommitOffsets(group="g", offsets=(OffsetCommit("orders", 0, 5, ""),))
    assert RULES[m.CommitOffsets](commit, known) == [("read", "group", "g"),
                                                     ("read", "topic", "orders")]
    assert RULES[m.Heartbeat](m.Heartbeat(group="g"), known) == [("read", "group", "g")]
    assert RULES[m.Metadata](m.Metadata(topics=("x",), auto_create=True), known) == [
        ("describe", "topic", "x"), ("create", "topic", "x")]
    assert RULES[m.ReplicaFetch](m.ReplicaFetch(), known) == [
        ("cluster_action", "cluster", "logbroker")]
    assert RULES[m.CreateAcls](m.CreateAcls(), known) == [("alter", "cluster", "logbroker")]


def test_partial_serves_the_allowed_parts_and_puts_the_denied_back_in_order():
    import asyncio

    from logbroker.security.acl_rules import Partial

    req = m.Produce(acks=1, parts=(ProducePart("a", 0, 1), ProducePart("b", 0, 2),
                                   ProducePart("a", 1, 3)), payload=(b"x", b"yy", b"zzz"))
    partial = Partial(req, {"a": "no"}, 29)
    assert partial.request.parts == (("b", 0, 2),) and partial.request.payload == (b"yy",)

    async def served():
        return m.ProduceResponse(parts=(("b", 0, 0, "", 7, 0),))
    out = asyncio.run(partial.answer(served()))
    assert out.parts == (("a", 0, 29, "no", -1, -1), ("b", 0, 0, "", 7, 0),
                         ("a", 1, 29, "no", -1, -1))

    async def none():
        return None
    assert asyncio.run(partial.answer(none())) is None  # acks=0: still no answer
    fetch = Partial(m.Fetch(parts=(FetchPart("a", 0, 0, 9), FetchPart("b", 0, 0, 9))), {"b": "no"},
                    29)

    async def fetched():
        return m.FetchResponse(parts=(("a", 0, 0, "", 5, 0, 2),), payload=(b"ab",))
    out = asyncio.run(fetch.answer(fetched()))
    assert out.payload == (b"ab", b"") and out.parts[1] == ("b", 0, 29, "no", -1, -1, 0)
