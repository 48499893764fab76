"""The Kafka protocol listener: a second asyncio server of the broker
(``kafka_port``; docs/kafka.md, "Listener").

``KafkaListener(broker)`` is started by the broker once its handlers
exist and closed at shutdown; each accepted connection is a
``KafkaConnection`` (connection.py). Connections count against the
broker's own limits (``max_connections``, ``max_connections_per_ip``:
``broker/admission.py``, shared with our listener); a refused Kafka
connection is closed at once, without an answer (Kafka does the same:
its clients see the connection end and retry with backoff). The broker's
1 s sweep calls ``sweep(now)`` for the frame and idle timeouts.

With ``tls_cert`` the Kafka listener speaks TLS too, with the same
context as ours (mutual TLS with ``tls_client_auth``) and the same
handshakes (``broker/tls.TlsListener``): bounded by ``frame_timeout_ms``,
counted against the limits from acceptance, a failure logged in one line.

``advertised`` is the "HOST:PORT" Metadata gives Kafka clients:
``kafka_advertised``, or the listener's host and bound port (set
``kafka_advertised`` when listening on a wildcard address).
"""

from __future__ import annotations

import asyncio
import logging

from .admission import peer_ip
from ..broker.config import parse_address
from ..errors import InvalidRequestError
from ..kafka import serve_data, serve_groups, serve_membership, serve_meta, serve_sasl
from ..kafka import serve_group_admin
from ..kafka import serve_configs
from ..kafka.apis import API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, FETCH, FIND_COORDINATOR, \
    INIT_PRODUCER_ID, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, PRODUCE, \
    SASL_AUTHENTICATE, SASL_HANDSHAKE
from .kafka_connection import KafkaConnection
from ..kafka.plan import KafkaSite

log = logging.getLogger("logbroker.kafka")

# the APIs served, by key; ApiVersions advertises exactly these
HANDLERS = {API_VERSIONS.key: serve_meta.api_versions, METADATA.key: serve_meta.metadata,
            CREATE_TOPICS.key: serve_meta.create_topics, DELETE_TOPICS.key: serve_meta.delete_topics,
            INIT_PRODUCER_ID.key: serve_meta.init_producer_id, PRODUCE.key: serve_data.produce,
            FETCH.key: serve_data.fetch, LIST_OFFSETS.key: serve_data.list_offsets,
            FIND_COORDINATOR.key: serve_groups.find_coordinator,
            OFFSET_COMMIT.key: serve_groups.offset_commit,
            SASL_HANDSHAKE.key: serve_sasl.sasl_handshake,
            SASL_AUTHENTICATE.key: serve_sasl.sasl_authenticate,
            OFFSET_FETCH.key: serve_groups.offset_fetch, **serve_membership.handlers()}
HANDLERS.update(serve_group_admin.handlers())  # ListGroups, DescribeGroups, DeleteGroups
HANDLERS[32] = serve_configs.describe_configs  # DescribeConfigs
HANDLERS[23] = serve_data.offset_for_leader_epoch  # OffsetForLeaderEpoch


def _not_served(site, header, body):
    raise InvalidRequestError(f"api key {header.api_key} is not served yet")


class KafkaListener:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.connections: set[KafkaConnection] = set()
        self.server: "asyncio.Server | None" = None
        self.port = 0
        self.advertised = ""
        self.site: "KafkaSite | None" = None

    async def start(self) -> None:
        """Bind ``host:kafka_port`` and serve."""
        from .tls import TlsListener, listener_context

        cfg = self.broker.config
        context = listener_context(cfg)
        factory = (lambda: KafkaConnection(self)) if context is None else TlsListener(
            self.broker, context, lambda: KafkaConnection(self), self, answer_refusals=False).protocol
        self.server = await asyncio.get_running_loop().create_server(
            factory, cfg.host, cfg.kafka_port, reuse_address=True, backlog=512)
        self.port = self.server.sockets[0].getsockname()[1]
        host, port = (parse_address(cfg.kafka_advertised) if cfg.kafka_advertised
                      else (cfg.host, self.port))
        self.advertised = f"{host}:{port}"
        node = self.broker.node  # cluster mode: Metadata reads its view (cluster_meta.py)
        self.site = KafkaSite(cfg.broker_id, host, port, cfg, frozenset(HANDLERS),
                              None if node is None else node.view)
        log.info("Kafka listener on %s:%d (advertised %s)", cfg.host, self.port, self.advertised)

    def handler(self, api_key: int):
        """The plan maker of an API (one the codec decoded, so in the profile)."""
        return HANDLERS.get(api_key, _not_served)

    def register(self, conn: KafkaConnection, transport) -> bool:
        """Count ``conn`` (False: refused, its transport aborted). A TLS
        connection comes counted by its handshake (``conn.ip`` set)."""
        if self.server is None or not self.server.is_serving() or transport.is_closing():
            self.unregister(conn)
            transport.abort()
            return False
        if conn.ip is None:
            ip = peer_ip(transport)
            why = self.broker.admission.admit(ip)
            if why is not None:
                log.debug("refused a Kafka connection from %s: %s", ip,
                          self.broker.admission.message(why, ip))
                transport.abort()
                return False
            conn.ip = ip
        self.connections.add(conn)
        return True

    def unregister(self, conn: KafkaConnection) -> None:
        if conn.ip is not None:
            self.broker.admission.release(conn.ip)
            conn.ip = None
        self.connections.discard(conn)

    def sweep(self, now: float) -> None:
        for conn in list(self.connections):
            conn.idle_check(now)

    def close(self) -> None:
        """Stop accepting; connections stay until the broker drains them."""
        if self.server is not None:
            self.server.close()
