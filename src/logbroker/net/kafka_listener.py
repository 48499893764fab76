"""The Kafka protocol listener (``kafka_port``; docs/kafka.md, "Listener"):
a ``Listener`` (listener.py) whose connections are ``KafkaConnection``s,
and what they share: the ``KafkaSite`` the translators read and the
translator of each API (api/registry.KAFKA, the one table of what is
served; ApiVersions advertises exactly its keys).

Connections count against the broker's own limits, as ours; a refused one
is closed at once, without an answer (Kafka does the same). With
``tls_cert`` it speaks TLS with the same context as ours.

``advertised`` is the "HOST:PORT" Metadata gives Kafka clients:
``kafka_advertised``, or the listener's host and bound port (set
``kafka_advertised`` when listening on a wildcard address).
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
    def __init__(self, broker) -> None:
        cfg = broker.config
        super().__init__(broker, "Kafka ", cfg.host, cfg.kafka_port, KafkaConnection,
                         answer_refusals=False)
        self.advertised = ""
        self.site: "KafkaSite | None" = None

    async def start(self, start_serving: bool = True) -> None:
        """Bind ``host:kafka_port`` and serve; the site names the advertised address."""
        await super().start(start_serving)
        cfg = self.broker.config
        host, port = (parse_address(cfg.kafka_advertised) if cfg.kafka_advertised
                      else (cfg.host, self.port))
        self.advertised = f"{host}:{port}"
        self.site = KafkaSite(cfg.broker_id, host, port, cfg, frozenset(KAFKA), self.broker.meta)
        log.info("Kafka listener on %s:%d (advertised %s)", cfg.host, self.port, self.advertised)

    def handler(self, api_key: int):
        """The translator of an API: one the codec decoded, so in the
        profile, which KAFKA serves whole (tests/api/test_registry.py)."""
        return KAFKA[api_key][0]
