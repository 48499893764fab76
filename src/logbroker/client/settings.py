"""Producer and consumer settings: validated once, shared by sync and asyncio clients."""

from __future__ import annotations

from dataclasses import dataclass

ACKS = {"all": -1, -1: -1, "-1": -1, 1: 1, "1": 1, 0: 0, "0": 0}
OFFSET_RESETS = ("earliest", "latest", "none")


@dataclass(frozen=True)
class ProducerSettings:
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
    retry_backoff_ms: int = 100
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
        s = cls(acks=code, idempotent=idempotent, **kw)
        for name in ("batch_size", "max_in_flight", "buffer_memory", "max_request_size",
                     "max_block_ms", "delivery_timeout_ms"):
            if getattr(s, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(s, name)!r}")
        if s.linger_ms < 0 or s.retry_backoff_ms < 0:
            raise ValueError("linger_ms and retry_backoff_ms must be >= 0")
        if s.idempotent and s.max_in_flight > 5:
            raise ValueError("an idempotent producer allows at most 5 requests in flight "
                             "(the broker remembers 5 batches per producer)")
        return s


@dataclass(frozen=True)
class ConsumerSettings:
    """See ``Consumer``'s docstring for the meaning of each field."""

    group: "str | None" = None
    auto_offset_reset: str = "latest"
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 16 << 20
    max_partition_fetch_bytes: int = 8 << 20
    max_poll_records: int = 10_000
    prefetch_bytes: int = 32 << 20
    check_crcs: bool = True
    consumer_timeout_ms: "float | None" = None

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {OFFSET_RESETS}")
        if self.group is not None and not self.group:
            raise ValueError("group must be a non-empty string or None")
        for name in ("fetch_max_bytes", "max_partition_fetch_bytes", "max_poll_records",
                     "prefetch_bytes", "fetch_min_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.fetch_max_wait_ms < 0:
            raise ValueError("fetch_max_wait_ms must be >= 0")
