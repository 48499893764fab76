"""The sync ``Admin`` client: topics, groups and offsets (used by the CLI).

Every method is one blocking request (``list_offsets`` by topic name: two)
with a deadline of ``request_timeout_ms``. Read-only requests and offset
commits are retried on a lost connection until the deadline; creating and
deleting are sent once (a retry could report TOPIC_ALREADY_EXISTS for a
topic the first attempt created). Errors: ``BrokerUnavailableError``,
``RequestTimedOutError``, ``ClientClosedError``, or the broker's error as
its registered exception (``errors.for_code``), whose message names the
topic, partition or group.
"""

from __future__ import annotations

from typing import Iterable

from ..errors import ClientClosedError
from .admin_core import AdminCore
from .link import BrokerLink
from .loop_thread import LoopThread
from .producer import client_options


class Admin:
    """``Admin(bootstrap="127.0.0.1:9555", request_timeout_ms=30000,
    connect_timeout_ms=5000)``; a context manager. Thread-safe."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, client_id: str = "logbroker-admin",
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000) -> None:
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms)
        self._io = LoopThread("logbroker-admin-io")
        self._core = AdminCore(BrokerLink(self.options))
        self._closed = False

    def _run(self, coro):
        if self._closed:
            coro.close()
            raise ClientClosedError("the admin client is closed")
        return self._io.run(coro, self.options.request_timeout + self.options.connect_timeout + 1)

    # -- topics -------------------------------------------------------------------------------------
    def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        """Create topics: each a name, a ``NewTopic(name, partitions=1,
        configs={})`` or a ``(name, partitions[, configs])`` tuple (configs:
        LogConfig overrides such as ``retention_ms``). Returns ``{name: None
        or the error}``; with ``raise_errors`` raises the first error
        (``TopicAlreadyExistsError``, ``InvalidTopicError``,
        ``InvalidConfigError``) after all were tried."""
        return self._run(self._core.create_topics(list(topics), raise_errors))

    def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None, *,
                     exist_ok: bool = False) -> bool:
        """Create one topic; returns False if it existed and ``exist_ok``."""
        from ..errors import TopicAlreadyExistsError

        try:
            self.create_topics([(name, partitions, configs or {})])
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
            return False
        return True

    def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        """Delete topics and their data; ``{name: None or the error}``
        (``UnknownTopicOrPartitionError`` for a missing one)."""
        return self._run(self._core.delete_topics(list(names), raise_errors))

    def list_topics(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic."""
        return self._run(self._core.list_topics())

    def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        """``{name: TopicDescription(name, configs, partitions)}`` with
        ``PartitionInfo(partition, log_start, log_end, high_watermark,
        size_bytes, segments)`` per partition (-1s: partition offline); all
        topics when ``names`` is None. Raises for an unknown topic."""
        return self._run(self._core.describe_topics(None if names is None else list(names)))

    def describe_cluster(self) -> dict:
        """``{"brokers": [BrokerInfo(id, host, port)], "server": "logbroker x.y"}``."""
        return self._run(self._core.describe_cluster())

    # -- groups -------------------------------------------------------------------------------------
    def list_groups(self) -> list[str]:
        """Every group with committed offsets, sorted."""
        return self._run(self._core.list_groups())

    def describe_groups(self, groups: Iterable[str]) -> dict:
        """``{group: GroupDescription(group, partitions)}`` with a
        ``GroupPartition(topic, partition, committed, log_end, lag, commit_ms,
        lag_ms)`` per committed partition; an unknown group has none."""
        return self._run(self._core.describe_groups(list(groups)))

    def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        """Forget groups' offsets; ``{group: None or InvalidGroupError}``."""
        return self._run(self._core.delete_groups(list(groups), raise_errors))

    # -- offsets ------------------------------------------------------------------------------------
    def commit_offsets(self, group: str, offsets: dict) -> None:
        """Commit for ``group`` without a live consumer: ``{(topic,
        partition): offset or (offset, metadata)}``, offset = the next record
        to read. All valid entries are stored atomically; raises the first
        partition's error (unknown partition, negative offset)."""
        self._run(self._core.commit_offsets(group, offsets))

    def fetch_offsets(self, group: str, partitions=None) -> dict:
        """``{(topic, partition): OffsetAndMetadata(offset, metadata,
        commit_ms) or None}``; all committed partitions when ``partitions``
        is None."""
        return self._run(self._core.fetch_offsets(group, partitions))

    def list_offsets(self, partitions, spec="latest") -> dict:
        """``{(topic, partition): OffsetAndTimestamp(offset, timestamp)}``.

        ``partitions``: ``(topic, partition)`` pairs and/or topic names (all
        their partitions), with one ``spec`` for all — ``"earliest"`` (log
        start), ``"latest"`` (high watermark: the next offset to be written
        and readable) or a timestamp in ms (the earliest record at or after
        it; offset -1 if none) — or a dict ``{(topic, partition): spec}``."""
        return self._run(self._core.list_offsets(partitions, spec))

    def close(self) -> None:
        """Close the connection and the I/O thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._io.run(self._core.link.aclose(), 10)
        except (TimeoutError, ClientClosedError):
            pass
        self._io.stop()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
