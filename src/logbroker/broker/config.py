"""Broker settings: a frozen dataclass, from defaults, a TOML file and flags.

TOML layout (every key optional)::

    host = "127.0.0.1"
    port = 9555
    data_dir = "./data"
    log_level = "info"
    max_connections = 1024
    max_frame_bytes = 67108864
    idle_timeout_ms = 600000
    auto_create_topics = true
    default_partitions = 1
    metrics_port = 9556        # Prometheus /metrics (off unless set)
    metrics_auth = false       # /metrics asks HTTP Basic of a broker user (docs/metrics.md)
    tls_cert = "broker.pem"    # TLS on the listener (with tls_key; tls_ca for mTLS)
    auth_required = false      # SASL users only (logbroker users add)
    sasl_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]  # offered (docs/security.md)
    sasl_plain_over_plaintext = false  # PLAIN only over TLS unless true
    super_users = ["User:admin"]   # with auth_required: ACLs enforced (logbroker acls)
    allow_everyone_if_no_acl_found = false  # true: ACLs enforced; no ACL on it: open to all
    inter_broker_user = "broker"   # cluster + auth_required: brokers authenticate as it
    inter_broker_password_file = "/etc/logbroker/broker.pw"  # or env LOGBROKER_INTER_BROKER_PASSWORD
    etcd_ca = "etcd-ca.pem"    # etcd over TLS (etcd = "https://..."); etcd_cert/etcd_key: its client cert
    etcd_user = "logbroker"    # etcd authentication; password from env LOGBROKER_ETCD_PASSWORD or etcd_password_file
    console_port = 9557        # the read-only web console (off unless set)
    kafka_port = 9092          # the Kafka protocol listener (off unless set; docs/kafka.md)
    kafka_advertised = "broker1.example:9092"  # what Kafka clients are told [host:kafka_port]
    # or several Kafka listeners instead (broker/kafka_listeners.py; docs/kafka.md):
    # [[kafka_listeners]]  name = "SASL" port = 9094 security = "SASL_PLAINTEXT" advertised = "b1:9094"
    max_connections_per_ip = 1024
    quota_produce_bytes_per_s = 0  # per principal; 0: no quota
    quota_fetch_bytes_per_s = 0
    max_inflated_bytes_per_request = 67108864       # compressed produce (docs/security.md)
    inflation_bytes_per_s_per_connection = 134217728
    max_partitions_per_request = 10000   # CreateTopics, in all (docs/security.md)
    max_partitions_per_broker = 50000    # hosted here (replicas, in a cluster)

    [max_connections_per_ip_overrides]
    "10.0.0.7" = 4000

    [quotas."User:etl"]      # per-principal overrides (0: no quota)
    produce_bytes_per_s = 10485760

    [log]            # LogConfig defaults for every topic (topics may override)
    segment_bytes = 1073741824
    retention_ms = 604800000
    flush = "fsync"
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError, LogbrokerError
from ..limits import canonical_ip, parse_address
from ..storage.config import LogConfig, StorageConfig
from .fdlimit import segment_file_budget

LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class BrokerConfig:
    """Everything ``logbroker serve`` needs.

    - ``max_frame_bytes``: largest request accepted; larger ones close the
      connection with FRAME_TOO_LARGE.
    - ``max_inflight_bytes``: per connection, bytes of requests read but not
      yet answered; reading pauses above it (backpressure).
    - ``idle_timeout_ms``: a connection with no complete request for this
      long is closed; ``frame_timeout_ms``: a request must arrive whole
      within this long once it started (slow-loris guard).
    - ``housekeeping_ms``: period of retention, age rolls and checkpoints.
    """

    host: str = "127.0.0.1"
    port: int = 9555
    data_dir: str = "./data"
    broker_id: int = 0
    log_level: str = "info"
    max_connections: int = 1024
    max_frame_bytes: int = 64 << 20
    max_inflight_bytes: int = 128 << 20
    idle_timeout_ms: int = 600_000
    frame_timeout_ms: int = 30_000
    auto_create_topics: bool = True
    default_partitions: int = 1
    housekeeping_ms: int = 5_000
    shutdown_timeout_ms: int = 10_000
    # -- cluster mode (docs/cluster.md): off unless ``etcd`` is set ----------------------
    etcd: "str | None" = None
    cluster_name: str = "logbroker"
    advertised_address: "str | None" = None
    default_replication_factor: int = 0  # 0: min(3, live brokers)
    session_timeout_ms: int = 2_000
    replica_lag_time_max_ms: int = 10_000
    replica_timeout_ms: int = 5_000
    replica_fetch_max_bytes: int = 8 << 20
    # bytes/s a broker fetches for replicas a reassignment adds to it (Kafka's
    # follower.replication.throttled.rate; 0: unlimited, Kafka's default)
    reassignment_throttle_bytes_per_s: int = 0
    etcd_timeout_ms: int = 5_000
    # etcd over TLS and with authentication (docs/cluster.md, "Securing etcd"; cluster/etcd_access.py)
    etcd_ca: "str | None" = None  # CA bundle etcd's certificate is checked against (https:// address)
    etcd_cert: "str | None" = None  # client certificate for etcd --client-cert-auth (with etcd_key)
    etcd_key: "str | None" = None
    etcd_user: "str | None" = None  # etcd user; its password from env LOGBROKER_ETCD_PASSWORD, else:
    etcd_password_file: "str | None" = None
    # the secret brokers prove their identity with (cluster/peer_proof.py): env
    # LOGBROKER_CLUSTER_SECRET, else this file's first line, else one created in etcd
    cluster_secret_file: "str | None" = None
    # -- consumer groups (docs/groups.md) ------------------------------------------------
    offsets_topic_num_partitions: int = 16
    offsets_topic_replication_factor: int = 3  # at most the live brokers when created
    offsets_topic_segment_bytes: int = 100 << 20
    offsets_commit_timeout_ms: int = 5_000
    group_min_session_timeout_ms: int = 1_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 1_000
    group_initial_rebalance_delay_ms: int = 1_000
    # consumer-protocol groups (KIP-848; docs/kafka.md): Kafka's group.consumer.* defaults
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    # -- transactions (docs/protocol.md "Transactions"; coordinator/txn_manager.py): Kafka's
    transaction_state_num_partitions: int = 16
    transaction_state_replication_factor: int = 3  # at most the live brokers when created
    transaction_state_segment_bytes: int = 100 << 20
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_check_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 604_800_000
    # a producer's first transactional batch on a partition is verified with its coordinator
    # (KIP-890 part 1, api/txn_verify.py): no transaction opened that the coordinator never saw
    transaction_partition_verification_enable: bool = True
    # -- security and observability (docs/security.md, docs/metrics.md) -----------------
    metrics_port: "int | None" = None  # Prometheus /metrics on host:metrics_port; off when None
    tls_cert: "str | None" = None  # PEM certificate chain: TLS on the listener when set
    tls_key: "str | None" = None  # its PEM private key
    tls_ca: "str | None" = None  # CA bundle: verifies client certs and, in a cluster, other brokers
    tls_client_auth: bool = False  # mutual TLS: clients must present a cert signed by tls_ca
    auth_required: bool = False  # SASL: refuse anonymous requests (docs/security.md)
    # SASL mechanisms offered (security/auth.py); PLAIN checks the password against the
    # stored SCRAM credentials, over TLS only unless sasl_plain_over_plaintext
    sasl_mechanisms: tuple = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
    sasl_plain_over_plaintext: bool = False
    super_users: tuple = ()  # always allowed; set with auth_required: ACLs enforced
    # Kafka's allow.everyone.if.no.acl.found: true enforces ACLs (with or without
    # auth_required) and lets everyone at a resource no ACL names (security/acl.py)
    allow_everyone_if_no_acl_found: bool = False
    # brokers authenticate to each other as this user (cluster/peer_auth.py); its password
    # from env LOGBROKER_INTER_BROKER_PASSWORD, else the first line of this file
    inter_broker_user: "str | None" = None
    inter_broker_password_file: "str | None" = None
    console_port: "int | None" = None  # the read-only web console on host:console_port; off when None
    # /metrics (docs/metrics.md, "The server"; checked by metrics/settings.py)
    metrics_refresh_s: float = 5.0  # a scrape's snapshot of the partitions is at most this old
    metrics_max_connections: int = 16  # /metrics connections open at once; more are closed
    metrics_timeout_ms: int = 10_000  # TLS handshake, idle, request headers, answer write
    metrics_auth: bool = False  # HTTP Basic with a broker user (needs auth_required)
    metrics_tls: bool = False  # HTTPS with the listener's tls_cert (and tls_client_auth)
    # -- quotas and limits (docs/security.md, "Quotas and limits"): security/quotas.py -----
    max_connections_per_ip: int = 1024  # open connections from one IP address
    max_connections_per_ip_overrides: tuple = ()  # (("IP", limit), ...); TOML: a table IP = limit
    quota_produce_bytes_per_s: int = 0  # per principal (User:NAME or User:ANONYMOUS); 0: no quota
    quota_fetch_bytes_per_s: int = 0  # per principal; 0: no quota
    quotas: tuple = ()  # per-principal overrides; TOML: [quotas."User:NAME"] produce_bytes_per_s = N
    # compressed produce, inflated off the loop (docs/security.md, "Compression bombs")
    max_inflated_bytes_per_request: int = 64 << 20  # a request's compressed batches, inflated, in all
    inflation_bytes_per_s_per_connection: int = 128 << 20  # a connection's credit (burst: the above)
    # password guessing (docs/security.md, "Password guessing"): security/auth_throttle.py
    auth_failures_per_s_per_ip: int = 10  # failed SCRAM exchanges a second per address; 0: none
    auth_failures_per_s_per_user: int = 30  # per user name (its known addresses exempt); 0: none
    # -- partition limits (docs/security.md, "Partition limits"): metadata/budget.py -------
    max_partitions_per_request: int = 10_000  # partitions one CreateTopics asks for, in all
    max_partitions_per_broker: int = 50_000  # partitions (replicas) one broker hosts
    # -- the Kafka protocol listener (docs/kafka.md): off unless ``kafka_port`` is set -------
    kafka_port: "int | None" = None  # on host:kafka_port (0 picks a free port)
    kafka_advertised: "str | None" = None  # "HOST:PORT" Metadata names; default host:bound port
    # several Kafka listeners instead, each {name, port, host, advertised, security}
    # (broker/kafka_listeners.py): a tuple of KafkaListenerSpec once checked
    kafka_listeners: tuple = ()
    storage: StorageConfig = field(default_factory=StorageConfig)

    def __post_init__(self) -> None:
        if self.log_level not in LEVELS:
            raise InvalidConfigError(f"log_level must be one of {', '.join(LEVELS)}")
        if not 0 <= self.port <= 65535:
            raise InvalidConfigError(f"port must be 0..65535, got {self.port}")
        if not 0 <= self.broker_id < 1 << 31:
            raise InvalidConfigError(f"broker_id must be 0..2147483647, got {self.broker_id}")
        if self.etcd is not None:
            from ..cluster.etcd import parse_etcd_url

            parse_etcd_url(self.etcd)
            if self.advertised_address is not None:
                parse_address(self.advertised_address)
        if not self.cluster_name or not all(c.isalnum() or c in "._-" for c in self.cluster_name):
            raise InvalidConfigError(f"cluster_name must be letters, digits, '.', '_' or '-', got "
                                     f"{self.cluster_name!r}")
        if type(self.default_replication_factor) is not int or self.default_replication_factor < 0:
            raise InvalidConfigError("default_replication_factor must be >= 0 (0: min(3, brokers))")
        for name in ("max_connections", "max_frame_bytes", "max_inflight_bytes", "idle_timeout_ms",
                     "frame_timeout_ms", "default_partitions", "housekeeping_ms",
                     "session_timeout_ms", "replica_lag_time_max_ms", "replica_timeout_ms",
                     "replica_fetch_max_bytes", "etcd_timeout_ms", "offsets_topic_num_partitions",
                     "offsets_topic_replication_factor", "offsets_topic_segment_bytes",
                     "offsets_commit_timeout_ms", "group_min_session_timeout_ms",
                     "group_max_session_timeout_ms", "group_max_size",
                     "max_inflated_bytes_per_request", "inflation_bytes_per_s_per_connection",
                     "max_partitions_per_request", "max_partitions_per_broker",
                     "transaction_state_num_partitions", "transaction_state_replication_factor",
                     "transaction_state_segment_bytes", "transaction_max_timeout_ms",
                     "transaction_abort_timed_out_check_interval_ms",
                     "transactional_id_expiration_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidConfigError(f"{name} must be a positive integer, got {value!r}")
        if type(self.reassignment_throttle_bytes_per_s) is not int \
                or self.reassignment_throttle_bytes_per_s < 0:
            raise InvalidConfigError("reassignment_throttle_bytes_per_s must be >= 0 (0: "
                                     "unlimited)")
        if type(self.group_initial_rebalance_delay_ms) is not int \
                or self.group_initial_rebalance_delay_ms < 0:
            raise InvalidConfigError("group_initial_rebalance_delay_ms must be >= 0")
        for name in ("group_consumer_session_timeout_ms", "group_consumer_heartbeat_interval_ms"):
            if type(getattr(self, name)) is not int or not 1 <= getattr(self, name) <= 3_600_000:
                raise InvalidConfigError(f"{name} must be 1..3600000 ms")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise InvalidConfigError("group_consumer_heartbeat_interval_ms must be below "
                                     "group_consumer_session_timeout_ms")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise InvalidConfigError("group_min_session_timeout_ms exceeds "
                                     "group_max_session_timeout_ms")
        if self.metrics_port is not None and (type(self.metrics_port) is not int
                                              or not 0 <= self.metrics_port <= 65535):
            raise InvalidConfigError(f"metrics_port must be 0..65535, got {self.metrics_port!r}")
        if self.console_port is not None and (type(self.console_port) is not int
                                              or not 0 <= self.console_port <= 65535):
            raise InvalidConfigError(f"console_port must be 0..65535, got {self.console_port!r}")
        _check_kafka(self)
        from .kafka_listeners import check as check_kafka_listeners

        check_kafka_listeners(self)
        from ..metrics.settings import check_settings as check_metrics

        check_metrics(self)
        if isinstance(self.super_users, list):
            object.__setattr__(self, "super_users", tuple(self.super_users))
        if not all(isinstance(u, str) and u.startswith("User:") and len(u) > 5 for u in self.super_users):
            raise InvalidConfigError(f"super_users must be a list of \"User:NAME\", got {self.super_users!r}")
        for name in ("auth_required", "allow_everyone_if_no_acl_found",
                     "transaction_partition_verification_enable"):
            if type(getattr(self, name)) is not bool:
                raise InvalidConfigError(
                    f"{name} must be true or false, got {getattr(self, name)!r}")
        _check_sasl(self)
        from ..cluster.etcd_access import check_etcd_settings
        from ..cluster.peer_auth import check_settings

        check_settings(self)
        check_etcd_settings(self)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise InvalidConfigError("tls_cert and tls_key go together")
        if self.tls_client_auth and (self.tls_cert is None or self.tls_ca is None):
            raise InvalidConfigError("tls_client_auth needs tls_cert, tls_key and tls_ca")
        if self.offsets_topic_num_partitions > 1000:
            raise InvalidConfigError("offsets_topic_num_partitions must be 1..1000")
        if self.transaction_state_num_partitions > 1000:
            raise InvalidConfigError("transaction_state_num_partitions must be 1..1000")
        if self.transaction_max_timeout_ms > (1 << 31) - 1:
            raise InvalidConfigError("transaction_max_timeout_ms must be 1..2147483647")
        _check_limits(self)

    def group_limits(self):
        from ..coordinator.group import GroupLimits

        return GroupLimits(self.group_min_session_timeout_ms, self.group_max_session_timeout_ms,
                           self.group_max_size, self.group_initial_rebalance_delay_ms,
                           self.group_consumer_session_timeout_ms,
                           self.group_consumer_heartbeat_interval_ms)

    @classmethod
    def load(cls, path: "str | None" = None, **overrides: Any) -> "BrokerConfig":
        """Defaults, then the TOML file at ``path``, then non-None ``overrides``."""
        data: dict[str, Any] = {}
        if path:
            try:
                with open(path, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InvalidConfigError(f"cannot read config {path}: {exc}") from None
        log = data.pop("log", {})
        storage = data.pop("storage", {})
        data.update({k: v for k, v in overrides.items() if v is not None})
        known = {f.name for f in dataclasses.fields(cls)} - {"storage"}
        unknown = set(data) - known
        if unknown:
            raise InvalidConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
        if "max_open_files" not in storage:  # sized from the open-file limit (fdlimit.py)
            conns = data.get("max_connections", cls.__dataclass_fields__["max_connections"].default)
            if isinstance(conns, int):
                storage["max_open_files"] = segment_file_budget(conns)
        try:
            storage_cfg = StorageConfig(log=LogConfig.from_dict(log), **storage)
            return cls(storage=storage_cfg, **data)
        except TypeError as exc:
            raise InvalidConfigError(str(exc)) from None


def _check_kafka(cfg: BrokerConfig) -> None:
    """The Kafka listener's settings (docs/kafka.md). With auth_required its
    clients authenticate with SASL/SCRAM as ours do (kafka/serve_sasl.py).
    In a cluster each broker registers its Kafka
    address in etcd (docs/cluster.md)."""
    if cfg.kafka_port is None:
        if cfg.kafka_advertised is not None:
            raise InvalidConfigError("kafka_advertised needs kafka_port")
        return
    if type(cfg.kafka_port) is not int or not 0 <= cfg.kafka_port <= 65535:
        raise InvalidConfigError(f"kafka_port must be 0..65535, got {cfg.kafka_port!r}")
    if cfg.kafka_advertised is not None:
        if not isinstance(cfg.kafka_advertised, str):
            raise InvalidConfigError(f"kafka_advertised must be \"HOST:PORT\", got "
                                     f"{cfg.kafka_advertised!r}")
        parse_address(cfg.kafka_advertised)


def _check_sasl(cfg: BrokerConfig) -> None:
    """``sasl_mechanisms``: a non-empty list of SCRAM-SHA-256, SCRAM-SHA-512
    and PLAIN, each once (a tuple from then on)."""
    from ..protocol.auth_messages import MECHANISMS

    names = cfg.sasl_mechanisms
    if not isinstance(names, (list, tuple)) or not names or len(set(names)) != len(names) \
            or not set(names) <= set(MECHANISMS):
        raise InvalidConfigError(f"sasl_mechanisms must list some of {', '.join(MECHANISMS)}, "
                                 f"each once, got {names!r}"[:200])
    object.__setattr__(cfg, "sasl_mechanisms", tuple(names))
    if type(cfg.sasl_plain_over_plaintext) is not bool:
        raise InvalidConfigError("sasl_plain_over_plaintext must be true or false")


def _check_limits(cfg: BrokerConfig) -> None:
    """Check the quota and connection-limit settings; the tables from TOML
    become sorted tuples (the config stays hashable): overrides
    ``(("IP", limit), ...)`` with IPs in canonical form, quotas
    ``(("User:NAME", produce | None, fetch | None), ...)``."""
    for name in ("max_connections_per_ip", "quota_produce_bytes_per_s", "quota_fetch_bytes_per_s",
                 "auth_failures_per_s_per_ip", "auth_failures_per_s_per_user"):
        _count(getattr(cfg, name), name, 1 if name == "max_connections_per_ip" else 0)
    rows = _table(cfg.max_connections_per_ip_overrides, "max_connections_per_ip_overrides")
    overrides = {}
    for ip, limit in rows:
        overrides[_ip(ip)] = _count(limit, f"max_connections_per_ip_overrides[{ip!r}]", 0)
    object.__setattr__(cfg, "max_connections_per_ip_overrides", tuple(sorted(overrides.items())))
    quotas = {}
    for principal, rates in _table(cfg.quotas, "quotas"):
        _principal(principal)
        if isinstance(rates, (tuple, list)) and len(rates) == 2:  # the normalised form again
            rates = dict(zip(QUOTA_KEYS, rates))
        if not isinstance(rates, dict) or not rates or set(rates) - set(QUOTA_KEYS):
            raise InvalidConfigError(f"quotas.{principal!r} must be a table of "
                                     f"{' and/or '.join(QUOTA_KEYS)}, got {rates!r}"[:200])
        quotas[principal] = tuple(None if rates.get(k) is None else
                                  _count(rates[k], f"quotas.{principal!r}.{k}", 0)
                                  for k in QUOTA_KEYS)
    object.__setattr__(cfg, "quotas", tuple((p, *r) for p, r in sorted(quotas.items())))


QUOTA_KEYS = ("produce_bytes_per_s", "fetch_bytes_per_s")


def _principal(principal) -> None:
    from ..protocol import messages
    from ..protocol.auth_messages import check_user_name

    try:
        if not isinstance(principal, str) or not principal.startswith("User:"):
            raise LogbrokerError()
        check_user_name(principal[5:])
    except LogbrokerError:
        raise InvalidConfigError(f"quotas: {str(principal)[:60]!r} is not a principal "
                                 "\"User:NAME\" (NAME: 1-249 of [A-Za-z0-9._@-])") from None


def _count(value, name: str, least: int) -> int:
    if type(value) is not int or value < least:
        raise InvalidConfigError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def _table(value, name: str) -> list:
    """A TOML table (dict) or a sequence of pairs -> [(key, value)]."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, (tuple, list)) and all(isinstance(r, (tuple, list)) and len(r) >= 2
                                                for r in value):
        return [(r[0], r[1] if len(r) == 2 else tuple(r[1:])) for r in value]
    raise InvalidConfigError(f"{name} must be a table, got {value!r}"[:200])


def _ip(text) -> str:
    try:
        return canonical_ip(text)
    except (ValueError, TypeError):
        raise InvalidConfigError(f"max_connections_per_ip_overrides: {str(text)[:60]!r} is not "
                                 "an IP address") from None
