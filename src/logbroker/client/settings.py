"""Client settings: validated once, shared by the sync and asyncio clients.

Out-of-range settings raise ``ValueError`` (a wrong type ``TypeError``) in
the constructor, so nothing the wire cannot carry (ints beyond 32 bits) is
ever sent; the consumer's ``group`` is checked as the broker checks it
(``InvalidGroupError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..errors import InvalidConfigError, InvalidGroupError
from .group.assignors import DEFAULT as DEFAULT_ASSIGNOR, choose
from .net.link import ClientOptions
from .validate import MAX_INT32, group as check_group

ACKS = {"all": -1, -1: -1, "-1": -1, 1: 1, "1": 1, 0: 0, "0": 0}
OFFSET_RESETS = ("earliest", "latest", "none")
MAX_BATCH = 1 << 30  # a batch column must stay below 2 GiB (int32 offsets, docs/format.md)


@dataclass(frozen=True)
class TlsSettings:
    """TLS to the brokers (docs/security.md), a keyword of every client: on
    when ``tls_ca`` (the CA bundle the brokers' certificates must chain to)
    or ``tls_cert`` is given; ``tls_cert``/``tls_key`` are this client's
    certificate and key for mutual TLS; ``tls_check_hostname=False`` accepts
    a trusted certificate that does not name the host dialled. ``username``
    and ``password`` authenticate every connection (SCRAM-SHA-256)."""

    tls_ca: "str | None" = None
    tls_cert: "str | None" = None
    tls_key: "str | None" = None
    tls_check_hostname: bool = True
    # authentication (SCRAM-SHA-256, docs/security.md): every connection, when given
    username: "str | None" = None
    password: "str | None" = field(default=None, repr=False)
    sasl_mechanism: str = "SCRAM-SHA-256"

    def sasl_credentials(self):
        """``SaslCredentials`` or None; ``ValueError`` for a half-given pair."""
        from .net.auth import SaslCredentials

        return SaslCredentials.make(self.username, self.password, self.sasl_mechanism)

    def tls_context(self):
        """The ``ssl.SSLContext`` for these settings, or None (plaintext);
        raises ``InvalidConfigError`` for a file that is missing or not PEM."""
        if self.tls_ca is None and self.tls_cert is None:
            if self.tls_key is not None:
                raise InvalidConfigError("tls_key needs tls_cert")
            return None
        from ..tls import client_context

        return client_context(self.tls_ca, self.tls_cert, self.tls_key, self.tls_check_hostname)


TLS_SETTINGS = tuple(f.name for f in fields(TlsSettings))


@dataclass(frozen=True)
class ProducerSettings(TlsSettings):
    """See ``Producer``'s docstring for the meaning of each field."""

    acks: int = -1
    linger_ms: float = 0.0
    batch_size: int = 1 << 20
    idempotent: bool = True
    max_in_flight: int = 5
    buffer_memory: int = 8 << 20  # more adds queueing delay, not throughput (docs/architecture.md 28)
    max_request_size: int = 16 << 20
    max_block_ms: int = 60_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100  # the first retry's wait, doubling (jittered) up to:
    retry_backoff_max_ms: int = 1_000
    auto_create_topics: bool = True

    @classmethod
    def make(cls, *, acks="all", idempotent: "bool | None" = None, **kw) -> "ProducerSettings":
        if acks not in ACKS:
            raise ValueError(f"acks must be 'all', 1 or 0, got {acks!r}")
        code = ACKS[acks]
        if idempotent is None:
            idempotent = code == -1
        elif idempotent and code != -1:
            raise ValueError("idempotent=True needs acks='all'")
        check_names(cls, kw, "Producer")
        s = cls(acks=code, idempotent=idempotent, **kw)
        for name in ("batch_size", "max_in_flight", "buffer_memory", "max_request_size",
                     "max_block_ms", "delivery_timeout_ms"):
            _bounded(s, name, 1, MAX_BATCH if name in ("batch_size", "max_request_size")
                     else MAX_INT32)
        for name in ("linger_ms", "retry_backoff_ms", "retry_backoff_max_ms"):
            _bounded(s, name, 0, MAX_INT32)
        if s.idempotent and s.max_in_flight > 5:
            raise ValueError("an idempotent producer allows at most 5 requests in flight "
                             "(the broker remembers 5 batches per producer)")
        return s


ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}  # Fetch / ListOffsets isolation


@dataclass(frozen=True)
class ConsumerSettings(TlsSettings):
    """See ``Consumer``'s docstring for the meaning of each field."""

    group: "str | None" = None
    auto_offset_reset: str = "latest"
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1 << 20  # per Fetch: its answer is decoded while the next is read (decision 114)
    max_partition_fetch_bytes: int = 8 << 20
    max_poll_records: int = 10_000
    prefetch_bytes: int = 32 << 20
    check_crcs: bool = True
    consumer_timeout_ms: "float | None" = None
    # group membership (subscribe() with a group; docs/client.md "Consumer groups")
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    group_instance_id: "str | None" = None
    partition_assignment_strategy: tuple = (DEFAULT_ASSIGNOR,)
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    metadata_max_age_ms: int = 5_000
    isolation_level: str = "read_uncommitted"  # or "read_committed" (transactions)

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {OFFSET_RESETS}")
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {tuple(ISOLATION_LEVELS)}, "
                             f"got {self.isolation_level!r}")
        if self.group is not None:
            check_group(self.group)
        for name in ("fetch_max_bytes", "max_partition_fetch_bytes", "max_poll_records",
                     "prefetch_bytes", "fetch_min_bytes", "session_timeout_ms",
                     "heartbeat_interval_ms", "max_poll_interval_ms", "auto_commit_interval_ms",
                     "metadata_max_age_ms"):
            _bounded(self, name, 1, MAX_INT32)
        _bounded(self, "fetch_max_wait_ms", 0, MAX_INT32)
        if self.consumer_timeout_ms is not None:
            _bounded(self, "consumer_timeout_ms", 0, MAX_INT32)
        self._check_membership()

    @property
    def isolation(self) -> int:
        """The wire value of ``isolation_level`` (Fetch, ListOffsets)."""
        return ISOLATION_LEVELS[self.isolation_level]

    def _check_membership(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be "
                             f"below session_timeout_ms ({self.session_timeout_ms})")
        if not isinstance(self.enable_auto_commit, bool):
            raise TypeError("enable_auto_commit must be a bool, not "
                            f"{type(self.enable_auto_commit).__name__}")
        if self.group_instance_id is not None:
            if self.group is None:
                raise ValueError("group_instance_id needs a group (Consumer(group=...))")
            if not isinstance(self.group_instance_id, str):
                raise TypeError("group_instance_id must be a str, not "
                                f"{type(self.group_instance_id).__name__}")
            try:
                check_group(self.group_instance_id)
            except InvalidGroupError:
                raise ValueError(f"group_instance_id {self.group_instance_id[:60]!r}: use 1-249 "
                                 "printable characters") from None
        object.__setattr__(self, "partition_assignment_strategy",
                           assignor_names(self.partition_assignment_strategy))


def assignor_names(names) -> tuple:
    """``partition_assignment_strategy``: one name or a non-empty list of
    names of ``assignors.ASSIGNORS``, in preference order (repeats dropped)."""
    items = [names] if isinstance(names, str) else names
    if not isinstance(items, (list, tuple)) or not all(isinstance(n, str) for n in items):
        raise TypeError("partition_assignment_strategy must be a name or a list of names, not "
                        f"{type(names).__name__}")
    return tuple(a.name for a in choose(items))


def client_options(bootstrap, client_id: str, request_timeout_ms: int,
                   connect_timeout_ms: int, tls: "TlsSettings | None" = None) -> ClientOptions:
    """The connection options every client takes (ms in, seconds kept);
    ``tls`` (the client's settings) builds the TLS context, once."""
    for name, value in (("request_timeout_ms", request_timeout_ms),
                        ("connect_timeout_ms", connect_timeout_ms)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 1 <= value <= MAX_INT32:
            raise ValueError(f"{name} must be a number in 1..{MAX_INT32}, got {value!r}")
    if not isinstance(client_id, str):
        raise TypeError(f"client_id must be a str, not {type(client_id).__name__}")
    return ClientOptions.make(bootstrap, client_id=client_id,
                              request_timeout=request_timeout_ms / 1000,
                              connect_timeout=connect_timeout_ms / 1000,
                              tls=None if tls is None else tls.tls_context(),
                              sasl=None if tls is None else tls.sasl_credentials())


def _bounded(settings, name: str, low: int, high: int) -> None:
    value = getattr(settings, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in {low}..{high}, got {value!r}")


def check_names(cls, settings: dict, client: str) -> None:
    """A TypeError naming the unknown settings and the known ones (not a
    dataclass's ``__init__() got an unexpected keyword argument``)."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"{client}() got unknown setting(s) {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join(sorted(known))}")
