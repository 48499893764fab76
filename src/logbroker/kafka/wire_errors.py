"""Our error codes as Kafka's (docs/kafka.md §3.5), for the Kafka listener.

Every code our registry (``logbroker.errors``) shares with Kafka has
Kafka's number and meaning, so most answers go out unchanged. The
exceptions: PARTITION_OFFLINE (57) is Kafka's LOG_DIR_NOT_FOUND, so it goes
out as KAFKA_STORAGE_ERROR (56, Kafka's answer for an offline log dir);
CLUSTER_UNAVAILABLE and BROKER_UNAVAILABLE become LEADER_NOT_AVAILABLE (5,
retriable: the client refreshes its metadata and retries); our other
connection-level codes (1000 and up) never go on the Kafka wire: they become
UNKNOWN_SERVER_ERROR (-1).
"""

from __future__ import annotations

from ..errors import (BrokerUnavailableError, ClusterUnavailableError,
                      CoordinatorNotAvailableError, LeaderNotAvailableError,
                      PartitionOfflineError, StorageError, UnknownError)

_REMAP = {PartitionOfflineError.code: StorageError.code,
          ClusterUnavailableError.code: LeaderNotAvailableError.code,
          BrokerUnavailableError.code: LeaderNotAvailableError.code}
_OURS_ONLY = 1000  # codes from here on are logbroker's own (connection level)


def kafka_code(code: int) -> int:
    """The Kafka error code to send for our error ``code`` (0 stays 0)."""
    code = _REMAP.get(code, code)
    return UnknownError.code if code >= _OURS_ONLY else code


def kafka_group_code(code: int) -> int:
    """``kafka_code`` for a group coordinator's answer (the group
    administration APIs): a broker that cannot reach the cluster right now
    (CLUSTER_UNAVAILABLE, BROKER_UNAVAILABLE) is COORDINATOR_NOT_AVAILABLE
    (15, retriable), Kafka's answer while its coordinator is not active,
    rather than the partition-level LEADER_NOT_AVAILABLE."""
    if code in (ClusterUnavailableError.code, BrokerUnavailableError.code):
        return CoordinatorNotAvailableError.code
    return kafka_code(code)


def kafka_message(message: str) -> "str | None":
    """A nullable error message field: None for none."""
    return message or None
