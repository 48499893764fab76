"""Property tests of authentication's sans-I/O parts: any body of the new
messages decodes or raises INVALID_REQUEST; any bytes in a SCRAM step get
an answer (never an exception), and only a real proof authenticates."""

from __future__ import annotations

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.security.acl_store import AclStore
from logbroker.security.auth import CLOSING_ERRORS, BrokerAuth, Session
from logbroker.security.auth_store import UserStore
from logbroker.broker.config import BrokerConfig
from logbroker.errors import LogbrokerError
from logbroker.protocol import messages as m
from logbroker.protocol.codec import DecodeError, decode
from logbroker.storage.metastore import MetaStore

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
APIS = (23, 24, 25, 26, 27)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.text(max_size=20),
                    st.binary(max_size=40))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12)
FIELDS = ["mechanism", "auth_bytes", "name", "salt", "stored_key", "server_key", "iterations",
          "error", "message", "mechanisms", "principal", "created", "users"]


def frame(api: int, resp: bool, body: dict) -> bytes:
    header = msgpack.packb({"api": api, "cid": 1, "resp": resp, "v": 1, "body": body})
    return len(header).to_bytes(4, "big") + header


@FUZZ
@given(st.sampled_from(APIS), st.booleans(),
       st.dictionaries(st.sampled_from(FIELDS), values, max_size=8))
def test_decoding_new_messages_raises_only_invalid_request(api, resp, body):
    try:
        env = decode(frame(api, resp, body))
    except DecodeError as exc:
        assert exc.code == 42 and exc.cid == 1
        return
    assert type(env.message) is (m.RESPONSES if resp else m.REQUESTS)[api]


@given(steps=st.lists(st.binary(max_size=200), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
def test_any_sasl_bytes_get_an_answer(tmp_path, steps):
    meta = MetaStore(str(tmp_path / "meta.lmdb"), map_size=1 << 20)
    try:
        failures = []
        stores = lambda on_acls: (UserStore(meta), AclStore(meta, on_acls))  # noqa: E731
        session = Session(BrokerAuth(BrokerConfig(auth_required=True), stores), "127.0.0.1:1",
                          lambda: failures.append(1))
        assert session.handshake(m.SaslHandshake(), 0.0).error == 0
        for data in steps:
            try:
                resp = session.step(m.SaslAuthenticate(auth_bytes=data))
            except CLOSING_ERRORS as exc:  # answered by the pipeline, which then closes
                session.fail(exc.message)
                assert failures
                break
            except LogbrokerError as exc:  # never: any other failure would be unanswered
                raise AssertionError(exc) from None
            assert isinstance(resp, m.SaslAuthenticateResponse) and not resp.error
        assert not session.principal  # nobody knows a user's proof by chance
        refusal, close = session.refuse_anonymous(m.Metadata())
        assert refusal.error == 58 and not close
    finally:
        meta.close()
