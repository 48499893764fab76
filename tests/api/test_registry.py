"""The one registry (api/registry.py): every request kind of both protocols
has exactly one handler, and each Kafka API served plans requests of kinds
that registry answers."""

from __future__ import annotations

import inspect

from logbroker.api.registry import KAFKA, OURS
from logbroker.kafka.apis import PROFILE
from logbroker.protocol import messages as m


def test_every_request_of_ours_has_one_handler():
    requests = set(m.REQUESTS.values())
    assert set(OURS) == requests, (sorted(c.__name__ for c in requests - set(OURS)),
                                   sorted(c.__name__ for c in set(OURS) - requests))
    for cls, entry in OURS.items():
        params = list(inspect.signature(entry.handler).parameters)
        assert len(params) == 3, (cls.__name__, params)  # (services, request, session)


def test_every_kafka_api_of_the_profile_is_served_through_our_requests():
    assert set(KAFKA) == {api.key for api in PROFILE}
    for key, (translator, kinds) in KAFKA.items():
        assert list(inspect.signature(translator).parameters) == ["site", "header", "body"], key
        for kind in kinds:
            assert kind in OURS, (key, kind.__name__)


def test_only_the_produce_and_the_authentication_steps_run_inline():
    # the SASL steps and a peer's proof of its broker id (api/peer.py) are
    # answered in their reading turn: a connection's later requests depend on them
    inline = {cls for cls, entry in OURS.items() if entry.inline}
    assert inline == {m.Produce, m.SaslHandshake, m.SaslAuthenticate, m.PeerChallenge,
                      m.PeerProof}
