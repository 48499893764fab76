"""Fast checks of the pieces behind several Kafka listeners, SCRAM-SHA-512 /
PLAIN and Kafka's ACL filters (no broker): the listener settings and their
errors, a broker's registration with its named listeners, the address a
client of one listener is told, stored credentials with SCRAM-SHA-512, the
PLAIN message and password check, Kafka's MATCH filter."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scramp import ScramMechanism

from logbroker.broker.config import BrokerConfig
from logbroker.broker.kafka_listeners import KafkaListenerSpec, parse_option, specs
from logbroker.cluster import checks
from logbroker.cluster.state import BrokerInfo, broker_from, broker_value
from logbroker.errors import InvalidConfigError, InvalidRequestError
from logbroker.kafka.cluster_meta import brokers
from logbroker.kafka.plan import KafkaSite
from logbroker.kafka.serve_acls import NOTHING, binding_of, filter_of
from logbroker.metadata.interface import Directory, KafkaBroker
from logbroker.security.acl import AclBinding, AnyOf
from logbroker.security.auth_store import Credentials
from logbroker.security.plain import parse_plain, verify


def test_listeners_from_toml_and_their_rules(tmp_path):
    path = tmp_path / "b.toml"
    path.write_text('tls_cert = "c.pem"\ntls_key = "k.pem"\n'
                    '[[kafka_listeners]]\nname = "PLAIN"\nport = 9092\n'
                    '[[kafka_listeners]]\nname = "SASL_TLS"\nport = 9094\n'
                    'security = "SASL_SSL"\nadvertised = "b1.example:19094"\n')
    cfg = BrokerConfig.load(str(path))
    assert cfg.kafka_listeners == (
        KafkaListenerSpec("PLAIN", "127.0.0.1", 9092, None, "PLAINTEXT"),
        KafkaListenerSpec("SASL_TLS", "127.0.0.1", 9094, "b1.example:19094", "SASL_SSL"))
    assert [(s.tls, s.sasl) for s in specs(cfg)] == [(False, False), (True, True)]
    bad = [({"kafka_listeners": [{"name": "A", "port": 1}, {"name": "A", "port": 2}]}, "unique"),
           ({"kafka_listeners": [{"name": "A", "port": 1, "security": "SSL"}]}, "tls_cert"),
           ({"kafka_listeners": [{"name": "A", "port": 1}], "kafka_port": 9}, "one form"),
           ({"kafka_listeners": [{"name": "A", "port": 1, "security": "TLS"}]}, "SASL_SSL"),
           ({"kafka_listeners": [{"name": "A b", "port": 1}]}, "name"),
           ({"kafka_listeners": [{"name": "A", "port": 1, "x": 1}]}, "table of"),
           ({"kafka_listeners": [{"name": f"L{i}", "port": 0} for i in range(17)]}, "at most"),
           ({"kafka_listeners": [{"name": "A", "port": 7}, {"name": "B", "port": 7}]}, "own port"),
           ({"kafka_listeners": [{"name": "A", "port": 1, "advertised": "nohost"}]}, "HOST:PORT"),
           ({"sasl_mechanisms": ["GSSAPI"]}, "sasl_mechanisms"),
           ({"sasl_mechanisms": []}, "sasl_mechanisms")]
    for settings, words in bad:
        with pytest.raises(InvalidConfigError, match=words):
            BrokerConfig(**settings)


def test_the_single_listener_form_is_one_unnamed_listener():
    cfg = BrokerConfig(kafka_port=0, auth_required=True)
    assert specs(cfg) == (KafkaListenerSpec("", "127.0.0.1", 0, None, "SASL_PLAINTEXT"),)
    assert specs(BrokerConfig()) == ()
    assert parse_option("name=EXT,port=9094,security=SASL_SSL,advertised=h:1") == {
        "name": "EXT", "port": 9094, "security": "SASL_SSL", "advertised": "h:1"}
    with pytest.raises(InvalidConfigError, match="name="):
        parse_option("name=EXT,colour=blue")


def test_registration_carries_named_listeners_and_old_values_read_alike():
    b = BrokerInfo(3, "h", 9555, 1, 0, ("h", 9092), (("PLAIN", "h", 9092), ("SASL", "h", 9094)))
    assert broker_from(3, broker_value(b)) == b
    plain = BrokerInfo(4, "h", 9555, 1, 0, ("h", 9092))
    raw = broker_value(plain)
    assert b"kafka_listeners" not in raw and broker_from(4, raw) == plain
    for value in ({"host": "h", "port": 1, "kafka_listeners": [["A", "h"]]},
                  {"host": "h", "port": 1, "kafka_listeners": [["A", "h", 0]]},
                  {"host": "h", "port": 1, "kafka_listeners": [["A", "h", 1]] * 17}):
        with pytest.raises(checks.BadValue):
            checks.broker(value)


def test_a_client_is_told_the_addresses_of_its_listener():
    directory = Directory({
        0: KafkaBroker(0, ("a", 9092), (("PLAIN", "a", 9092), ("SASL", "a", 9094))),
        1: KafkaBroker(1, ("b", 9092), (("PLAIN", "b", 9092),)),  # no SASL listener
        2: KafkaBroker(2, ("c", 9092))}, 0)  # single-listener form: its one address
    meta = SimpleNamespace(directory=lambda: directory)

    def told(listener):
        site = KafkaSite(0, "a", 1, None, frozenset(), meta, listener)
        return [(b["node_id"], b["host"], b["port"]) for b in brokers(site)]
    assert told("SASL") == [(0, "a", 9094), (2, "c", 9092)]
    assert told("PLAIN") == [(0, "a", 9092), (1, "b", 9092), (2, "c", 9092)]
    assert told("") == [(0, "a", 9092), (1, "b", 9092), (2, "c", 9092)]


def users_with(name: str, cred: Credentials):
    users = SimpleNamespace(get=lambda n: cred if n == name else None)
    return SimpleNamespace(users=users, credentials=lambda n, mech="SCRAM-SHA-256": (
        (cred.salt, cred.stored_key, cred.server_key, cred.iterations) if n == name
        else (b"s" * 16, b"x" * 32, b"y" * 32, 4096)))


def test_credentials_keep_scram_sha_512_and_plain_checks_the_password():
    c256 = Credentials("SCRAM-SHA-256", *ScramMechanism("SCRAM-SHA-256").make_auth_info("pw"))
    c512 = Credentials("SCRAM-SHA-512", *ScramMechanism("SCRAM-SHA-512").make_auth_info("pw"))
    both = Credentials(*[getattr(c256, f) for f in ("mechanism", "salt", "stored_key",
                                                     "server_key", "iterations")], (c512,))
    assert Credentials.unpack(both.check().pack()) == both
    assert both.of("SCRAM-SHA-512") == c512 and c256.of("SCRAM-SHA-512") is None
    with pytest.raises(InvalidRequestError, match="64 bytes"):
        Credentials(*list(both.__dict__.values())[:5], (Credentials(
            "SCRAM-SHA-512", c512.salt, c256.stored_key, c256.server_key, 4096),)).check()
    with pytest.raises(InvalidRequestError, match="at most one"):
        Credentials(*list(both.__dict__.values())[:5], (c512, c512)).check()
    auth = users_with("dora", c256)
    assert verify(auth, "dora", "pw") == (c256.stored_key, None)
    assert verify(auth, "dora", "nope") == (None, "wrong password")
    assert verify(auth, "eve", "pw") == (None, "unknown user")
    assert parse_plain(b"\0dora\0pw") == ("", "dora", "pw")
    for token in (b"dora\0pw", b"\0\0pw", b"a\0b\0c\0d"):
        with pytest.raises(ValueError):
            parse_plain(token)


def kafka_filter(rtype=1, name=None, pattern=1, principal=None, host=None, op=1, perm=1):
    return SimpleNamespace(resource_type_filter=rtype, resource_name_filter=name,
                           pattern_type_filter=pattern, principal_filter=principal,
                           host_filter=host, operation=op, permission_type=perm)


def test_kafka_acl_enums_and_match_filters():
    lit = AclBinding("User:a", "topic", "orders", "literal", "read")
    star = AclBinding("User:a", "topic", "*", "literal", "read")
    pre = AclBinding("User:a", "topic", "ord", "prefix", "read")
    other = AclBinding("User:a", "topic", "ordinal", "literal", "read")
    match = filter_of(kafka_filter(2, "orders", 2))
    assert [b.matches(match) for b in (lit, star, pre, other)] == [True, True, True, False]
    exact = filter_of(kafka_filter(2, "orders", 1))
    assert [b.matches(exact) for b in (lit, star, pre, other)] == [True, False, False, False]
    either = AnyOf((exact, AclBinding("", "", "ordinal", "", "", "")))
    assert [b.matches(either) for b in (lit, star, pre, other)] == [True, False, False, True]
    assert filter_of(kafka_filter(host="10.0.0.1")) is NOTHING  # our bindings: every host
    assert filter_of(kafka_filter(op=12)) is NOTHING  # IDEMPOTENT_WRITE: none of ours
    with pytest.raises(InvalidRequestError):
        filter_of(kafka_filter(pattern=0))  # UNKNOWN
    cluster = SimpleNamespace(resource_type=4, resource_name="kafka-cluster",
                              resource_pattern_type=3, principal="User:a", host="*",
                              operation=8, permission_type=3)
    assert binding_of(cluster) == AclBinding("User:a", "cluster", "logbroker", "literal",
                                             "describe", "allow")
    for bad, words in (({"resource_name": "mine"}, "kafka-cluster"),
                       ({"resource_pattern_type": 2}, "pattern type 2"),
                       ({"operation": 11}, "not supported")):
        with pytest.raises(InvalidRequestError, match=words):
            binding_of(SimpleNamespace(**{**cluster.__dict__, **bad}))
