"""The compiled (fast) schema checkers agree with ``check`` on every value:
same result when ``check`` accepts, ``Mismatch`` when it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError
from logbroker.protocol import messages as m
from logbroker.protocol.schema import MAX_INT, Mismatch, check, compile_fields

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 64), 1 << 64), st.text(max_size=4),
                    st.binary(max_size=4), st.floats(allow_nan=False), st.just(MAX_INT))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=12)
CLASSES = sorted(m.REQUESTS.values(), key=lambda c: c.API) + sorted(m.RESPONSES.values(),
                                                                     key=lambda c: c.API)


def slow(cls, body):
    try:
        return {name: check(body[name], spec, name) for name, spec in cls.SCHEMA.items()}
    except (InvalidRequestError, KeyError):
        return None


def fast(cls, body):
    try:
        return compile_fields(cls.SCHEMA)(body)
    except Mismatch:
        return None


def valid_body(cls):
    """A body the schema accepts, from the class's own defaults where they are valid."""
    msg = cls()
    return {name: getattr(msg, name) for name in cls.SCHEMA}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_defaults_agree(cls):
    body = valid_body(cls)
    assert fast(cls, body) == slow(cls, body)


@settings(max_examples=400, deadline=None)
@given(cls=st.sampled_from(CLASSES), data=st.data())
def test_random_bodies_agree(cls, data):
    body = valid_body(cls)
    for name in data.draw(st.lists(st.sampled_from(sorted(cls.SCHEMA) or ["x"]), max_size=3)):
        if data.draw(st.booleans()):
            body[name] = data.draw(VALUES)
        else:
            body.pop(name, None)
    assert fast(cls, body) == slow(cls, body)


@pytest.mark.parametrize("replicas", [[1, 2], (3,), [], [1, "2"], [1, True], [1, 1 << 70], [None],
                                      "12", None, {1: 2}, [1.0]])
def test_lists_of_ints_inside_a_part_agree(replicas):
    """A part's list-of-int fields (replicas, ISRs) are checked inline in
    its generated checker: the same verdict and values as ``check``."""
    row = ["t", 0, 1, 0, replicas, [1]]
    body = {**valid_body(m.MetadataResponse), "partitions": [row]}
    got = fast(m.MetadataResponse, body)
    assert got == slow(m.MetadataResponse, body)
    if got is not None:
        assert got["partitions"][0].replicas == tuple(replicas)
        assert type(got["partitions"][0].replicas) is tuple
