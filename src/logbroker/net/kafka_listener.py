"""A Kafka protocol listener (docs/kafka.md, "Listener" and "Listeners"):
a ``Listener`` (listener.py) whose connections are ``KafkaConnection``s,
and what they share: the ``KafkaSite`` the translators read and the
translator of each API (api/registry.KAFKA, the one table of what is
served; ApiVersions advertises exactly its keys).

One per entry of the broker's Kafka listeners (broker/kafka_listeners.py:
``kafka_listeners``, or the single one of ``kafka_port``), each with its
``KafkaListenerSpec``: TLS on SSL and SASL_SSL listeners (the broker's
``tls_cert`` context), SASL required on SASL_* ones (``sasl``, read by each
connection's session), and its site names the listener so Metadata and
FindCoordinator answer every broker's address on the listener the client
connected to (Kafka's rule).

Connections count against the broker's own limits, as ours; a refused one
is closed at once, without an answer (Kafka does the same).

``advertised`` is the "HOST:PORT" Metadata gives this listener's clients:
the spec's ``advertised``, or its host and bound port (set it when
listening on a wildcard address).
"""

from __future__ import annotations

import logging

from ..api.registry import KAFKA
from ..kafka.plan import KafkaSite
from ..limits import parse_address
from .kafka_connection import KafkaConnection
from .listener import Listener

log = logging.getLogger("logbroker.kafka")


class KafkaListener(Listener):
    def __init__(self, broker, spec) -> None:
        """``spec``: its broker/kafka_listeners.KafkaListenerSpec."""
        super().__init__(broker, "Kafka ", spec.host, spec.port, KafkaConnection,
                         answer_refusals=False, tls=spec.tls)
        self.spec = spec
        self.sasl = spec.sasl  # connections must authenticate first
        self.advertised = ""
        self.site: "KafkaSite | None" = None

    async def start(self, start_serving: bool = True) -> None:
        """Bind ``host:port`` and serve; the site names the advertised address."""
        await super().start(start_serving)
        cfg, spec = self.broker.config, self.spec
        host, port = (parse_address(spec.advertised) if spec.advertised
                      else (spec.host, self.port))
        self.advertised = f"{host}:{port}"
        self.site = KafkaSite(cfg.broker_id, host, port, cfg, frozenset(KAFKA), self.broker.meta,
                              spec.name, self.tls)
        log.info("Kafka listener %son %s:%d (advertised %s, %s)",
                 f"{spec.name} " if spec.name else "", spec.host, self.port, self.advertised,
                 spec.security)

    def handler(self, api_key: int):
        """The translator of an API: one the codec decoded, so in the
        profile, which KAFKA serves whole (tests/api/test_registry.py)."""
        return KAFKA[api_key][0]
