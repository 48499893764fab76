"""The Kafka listeners of one broker (docs/kafka.md, "Listeners"), as
Kafka's ``listeners`` / ``advertised.listeners`` /
``listener.security.protocol.map`` allow: each on its own port, with its
own advertised address and security protocol.

TOML (an array of tables; the CLI's repeatable ``--kafka-listener`` takes
the same keys as ``name=N,port=P,...``)::

    [[kafka_listeners]]
    name = "PLAINTEXT"          # [A-Za-z0-9_], 1-64, unique
    port = 9092                 # 0 picks a free one
    host = "0.0.0.0"            # optional: the broker's ``host``
    advertised = "b1.example:9092"  # optional: host:bound port
    security = "PLAINTEXT"      # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL

- SSL and SASL_SSL speak TLS with the broker's ``tls_cert`` (needed then);
  PLAINTEXT and SASL_PLAINTEXT never do.
- SASL_* listeners require SASL authentication before anything but
  ApiVersions and the SASL APIs (as ``auth_required`` does for the single
  listener); PLAINTEXT and SSL ones take anonymous connections, whatever
  ``auth_required`` says (to the ACLs and quotas they are
  ``User:ANONYMOUS``, as in Kafka: security/acl.py).
- The single-listener settings (``kafka_port``, ``kafka_advertised``) stay:
  they are one unnamed listener, TLS with ``tls_cert``, SASL with
  ``auth_required``; they do not go with ``kafka_listeners``.

``check(cfg)`` validates and normalises ``kafka_listeners`` into a tuple of
``KafkaListenerSpec``; ``specs(cfg)`` is the listeners in force, either form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidConfigError, LogbrokerError
from ..limits import parse_address

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
MAX_LISTENERS = 16
_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}\Z")
KEYS = ("name", "port", "host", "advertised", "security")


@dataclass(frozen=True)
class KafkaListenerSpec:
    """One Kafka listener. ``name`` "" is the single-listener form's."""

    name: str
    host: str
    port: int
    advertised: "str | None" = None  # "HOST:PORT"; None: host and the bound port
    security: str = PLAINTEXT

    @property
    def tls(self) -> bool:
        return self.security in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Clients must authenticate (SASL) before anything else."""
        return self.security in (SASL_PLAINTEXT, SASL_SSL)


def specs(cfg) -> tuple:
    """The Kafka listeners in force: ``kafka_listeners``, or the one of
    ``kafka_port`` (TLS with ``tls_cert``, SASL with ``auth_required``), or none."""
    if cfg.kafka_listeners:
        return cfg.kafka_listeners
    if cfg.kafka_port is None:
        return ()
    tls = cfg.tls_cert is not None
    security = ((SASL_SSL if tls else SASL_PLAINTEXT) if cfg.auth_required
                else (SSL if tls else PLAINTEXT))
    return (KafkaListenerSpec("", cfg.host, cfg.kafka_port, cfg.kafka_advertised, security),)


def parse_option(text: str) -> dict:
    """``name=N,port=P,host=H,advertised=H:P,security=S`` (the CLI's form) as a table."""
    table: dict = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in KEYS:
            raise InvalidConfigError(f"--kafka-listener: {item.strip()[:60]!r} is not one of "
                                     f"{', '.join(k + '=...' for k in KEYS)}")
        value = value.strip()
        table[key.strip()] = int(value) if key.strip() == "port" and value.isdigit() else value
    return table


def check(cfg) -> None:
    """Validate ``cfg.kafka_listeners`` (tables or specs) and store them as
    a tuple of ``KafkaListenerSpec``; InvalidConfigError naming the rule."""
    rows = cfg.kafka_listeners
    if not rows:
        object.__setattr__(cfg, "kafka_listeners", ())
        return
    if cfg.kafka_port is not None or cfg.kafka_advertised is not None:
        raise InvalidConfigError("kafka_listeners replaces kafka_port and kafka_advertised: "
                                 "set one form")
    if not isinstance(rows, (list, tuple)) or len(rows) > MAX_LISTENERS:
        raise InvalidConfigError(f"kafka_listeners must be a list of at most {MAX_LISTENERS} "
                                 "tables")
    out = [_spec(cfg, row) for row in rows]
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"kafka_listeners: names must be unique, got {names}")
    ports = [s.port for s in out if s.port]
    if len(set(ports)) != len(ports) or cfg.port in ports:
        raise InvalidConfigError("kafka_listeners: each listener needs its own port (and not "
                                 "the broker's port)")
    object.__setattr__(cfg, "kafka_listeners", tuple(out))


def _spec(cfg, row) -> KafkaListenerSpec:
    if isinstance(row, KafkaListenerSpec):
        row = {k: getattr(row, k) for k in KEYS}
    if not isinstance(row, dict) or set(row) - set(KEYS):
        raise InvalidConfigError(f"kafka_listeners: each entry is a table of "
                                 f"{', '.join(KEYS)}, got {row!r}"[:200])
    name, port = row.get("name"), row.get("port")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidConfigError(f"kafka_listeners: name must be 1-64 of [A-Za-z0-9_], got "
                                 f"{name!r}"[:120])
    if type(port) is not int or not 0 <= port <= 65535:
        raise InvalidConfigError(f"kafka_listeners[{name}]: port must be 0..65535, got {port!r}")
    host = row.get("host") if row.get("host") is not None else cfg.host
    security = row.get("security") if row.get("security") is not None else PLAINTEXT
    if not isinstance(host, str) or not host:
        raise InvalidConfigError(f"kafka_listeners[{name}]: host must be an address")
    if security not in SECURITY:
        raise InvalidConfigError(f"kafka_listeners[{name}]: security must be one of "
                                 f"{', '.join(SECURITY)}, got {security!r}"[:160])
    if security in (SSL, SASL_SSL) and cfg.tls_cert is None:
        raise InvalidConfigError(f"kafka_listeners[{name}]: {security} needs tls_cert and tls_key")
    advertised = row.get("advertised")
    if advertised is not None:
        try:
            if not isinstance(advertised, str):
                raise InvalidConfigError("")
            parse_address(advertised)
        except LogbrokerError:
            raise InvalidConfigError(f"kafka_listeners[{name}]: advertised must be "
                                     f"\"HOST:PORT\", got {advertised!r}"[:160]) from None
    return KafkaListenerSpec(name, host, port, advertised, security)
