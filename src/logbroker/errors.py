"""One error registry for the whole project.

Every error logbroker reports has a stable numeric ``code``, a stable ``name``,
a human ``message`` and a ``retriable`` flag. The wire protocol sends the code;
``for_code(code)`` maps it back to the exception class, so clients raise the
same types the broker raised. Codes are never reused or renumbered.
"""

from __future__ import annotations

from typing import ClassVar

_REGISTRY: dict[int, type["LogbrokerError"]] = {}


class LogbrokerError(Exception):
    """Base of every error logbroker raises on purpose."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message or self.name

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


def register(cls: type[LogbrokerError]) -> type[LogbrokerError]:
    """Class decorator: add ``cls`` to the registry under its unique code."""
    if cls.code in _REGISTRY:
        raise RuntimeError(f"error code {cls.code} registered twice")
    _REGISTRY[cls.code] = cls
    return cls


def for_code(code: int) -> type[LogbrokerError]:
    """The exception class for a wire error code (``UnknownError`` if unknown)."""
    return _REGISTRY.get(code, UnknownError)


def code_and_message(exc: BaseException) -> tuple[int, str]:
    """The ``(error, message)`` a response carries for ``exc``: a
    LogbrokerError's own; UNKNOWN and the exception's type for anything else."""
    if isinstance(exc, LogbrokerError):
        return exc.code, exc.message
    return UnknownError.code, f"{type(exc).__name__}: {exc}"


def all_errors() -> list[type[LogbrokerError]]:
    """Every registered error class, sorted by code (for docs and tests)."""
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


@register
class UnknownError(LogbrokerError):
    code, name = -1, "UNKNOWN"


@register
class OffsetOutOfRangeError(LogbrokerError):
    """A read asked for an offset below the log start or past the log end."""

    code, name = 1, "OFFSET_OUT_OF_RANGE"


@register
class InvalidFetchSessionEpochError(LogbrokerError):
    """A Fetch named a fetch session epoch its connection's session is not
    at (none open, another Fetch of it in flight, or an answer lost): open
    a new session (epoch 0)."""

    code, name, retriable = 71, "INVALID_FETCH_SESSION_EPOCH", True


@register
class CorruptRecordError(LogbrokerError):
    """Bytes that are not a valid record batch (bad length, magic, CRC, layout)."""

    code, name = 2, "CORRUPT_RECORD"

    def __init__(self, message: str = "", *, position: "int | None" = None) -> None:
        super().__init__(message)
        self.position = position


@register
class UnknownTopicOrPartitionError(LogbrokerError):
    code, name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


@register
class RecordTooLargeError(LogbrokerError):
    code, name = 10, "RECORD_TOO_LARGE"


@register
class InvalidTopicError(LogbrokerError):
    code, name = 17, "INVALID_TOPIC"


@register
class TopicAlreadyExistsError(LogbrokerError):
    code, name = 36, "TOPIC_ALREADY_EXISTS"


@register
class InvalidConfigError(LogbrokerError):
    code, name = 40, "INVALID_CONFIG"


@register
class StorageError(LogbrokerError):
    """The disk failed us (I/O error, full disk, unreadable metadata)."""

    code, name, retriable = 56, "STORAGE_ERROR", True


@register
class PartitionOfflineError(LogbrokerError):
    """Corruption below the recovery point: the partition serves nothing.

    The message names the file, byte position and offset of the damage.
    """

    code, name = 57, "PARTITION_OFFLINE"


@register
class InvalidRequestError(LogbrokerError):
    code, name = 42, "INVALID_REQUEST"


@register
class PolicyViolationError(LogbrokerError):
    """A request the broker's policy refuses (Kafka's code): more partitions
    in one CreateTopics, or on one broker, than its limits allow
    (docs/security.md, "Partition limits")."""

    code, name = 44, "POLICY_VIOLATION"


@register
class UnsupportedCompressionTypeError(LogbrokerError):
    """A Kafka batch names a compression codec this process cannot decode
    (its library is not installed). Kafka's code and name."""

    code, name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


@register
class InvalidRecordError(LogbrokerError):
    """A record a producer tried to put in a batch breaks the format's limits."""

    code, name = 87, "INVALID_RECORD"


@register
class RequestTimedOutError(LogbrokerError):
    """The broker or the client gave up waiting (acks, a response)."""

    code, name, retriable = 7, "REQUEST_TIMED_OUT", True


@register
class InvalidGroupError(LogbrokerError):
    """A group name that breaks the naming rule (limits.check_group_name)."""

    code, name = 24, "INVALID_GROUP_ID"


@register
class GroupNotFoundError(InvalidGroupError):
    """A group with no committed offsets (describe, delete)."""

    code, name = 69, "GROUP_ID_NOT_FOUND"


@register
class UnsupportedVersionError(LogbrokerError):
    code, name = 35, "UNSUPPORTED_VERSION"


@register
class OutOfOrderSequenceError(LogbrokerError):
    """An idempotent producer's batch skipped sequence numbers."""

    code, name = 45, "OUT_OF_ORDER_SEQUENCE"


@register
class InvalidProducerEpochError(LogbrokerError):
    code, name = 47, "INVALID_PRODUCER_EPOCH"


@register
class UnknownProducerIdError(LogbrokerError):
    code, name = 59, "UNKNOWN_PRODUCER_ID"


# -- transactions (coordinator/txn_*.py, storage's transaction state) -------------------------


@register
class InvalidTxnStateError(LogbrokerError):
    """The request does not fit the transaction's state (an EndTxn with no
    open transaction, a transactional batch the coordinator never heard of)."""

    code, name = 48, "INVALID_TXN_STATE"


@register
class InvalidProducerIdMappingError(LogbrokerError):
    """The producer id is not the one the transactional id holds."""

    code, name = 49, "INVALID_PRODUCER_ID_MAPPING"


@register
class OperationNotAttemptedError(LogbrokerError):
    """Not tried because another part of the same request failed (an
    AddPartitionsToTxn is all or none: its other partitions' answer)."""

    code, name = 55, "OPERATION_NOT_ATTEMPTED"


@register
class InvalidTransactionTimeoutError(LogbrokerError):
    """A transaction timeout above ``transaction_max_timeout_ms`` (or below 1)."""

    code, name = 50, "INVALID_TRANSACTION_TIMEOUT"


@register
class ConcurrentTransactionsError(LogbrokerError):
    """The transactional id's previous transaction is still completing
    (its markers are being written): retry shortly."""

    code, name, retriable = 51, "CONCURRENT_TRANSACTIONS", True


@register
class TransactionCoordinatorFencedError(LogbrokerError):
    """A marker from a coordinator older than the partition has seen."""

    code, name = 52, "TRANSACTION_COORDINATOR_FENCED"


@register
class TransactionalIdAuthorizationFailedError(LogbrokerError):
    code, name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


@register
class ProducerFencedError(LogbrokerError):
    """A newer producer of the same transactional id has the epoch now
    (this one is a zombie: it must stop)."""

    code, name = 90, "PRODUCER_FENCED"


@register
class UnstableOffsetCommitError(LogbrokerError):
    """FetchOffsets asked for stable offsets (``require_stable``) of a
    partition whose group has offsets committed in a transaction that is
    not decided yet: retry once its marker lands."""

    code, name, retriable = 88, "UNSTABLE_OFFSET_COMMIT", True


@register
class TransactionalIdNotFoundError(LogbrokerError):
    code, name = 105, "TRANSACTIONAL_ID_NOT_FOUND"


@register
class FrameTooLargeError(LogbrokerError):
    """A frame longer than the broker's (or client's) limit; the connection closes."""

    code, name = 1001, "FRAME_TOO_LARGE"


@register
class TooManyConnectionsError(LogbrokerError):
    """The broker is at ``max_connections`` or at the limit of connections
    from the client's address (``max_connections_per_ip``); it answered the
    connection's first request with this, then closed it. Retry later."""

    code, name, retriable = 1002, "TOO_MANY_CONNECTIONS", True


@register
class BrokerUnavailableError(LogbrokerError):
    """The client could not reach the broker or lost the connection (client side)."""

    code, name, retriable = 1003, "BROKER_UNAVAILABLE", True


@register
class ClientClosedError(LogbrokerError):
    code, name = 1004, "CLIENT_CLOSED"


@register
class TlsError(LogbrokerError):
    """A TLS handshake or record failed (client side): the broker's
    certificate is not trusted or not for its host name, the broker refused
    ours, or the two sides share no protocol (docs/security.md)."""

    code, name = 1006, "TLS_ERROR"


# -- cluster (replication) ---------------------------------------------------------


@register
class LeaderNotAvailableError(LogbrokerError):
    """The partition has no live leader right now (an election is under way)."""

    code, name, retriable = 5, "LEADER_NOT_AVAILABLE", True


@register
class NotLeaderError(LogbrokerError):
    """This broker is not the partition's leader: refresh metadata and retry."""

    code, name, retriable = 6, "NOT_LEADER_OR_FOLLOWER", True


@register
class NotEnoughReplicasError(LogbrokerError):
    """The ISR is below ``min_insync_replicas``: nothing was written."""

    code, name, retriable = 19, "NOT_ENOUGH_REPLICAS", True


@register
class NotEnoughReplicasAfterAppendError(LogbrokerError):
    """Written by the leader, but the ISR shrank below ``min_insync_replicas``
    before every replica had it: not acknowledged (an idempotent retry is safe)."""

    code, name, retriable = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True


@register
class InvalidReplicationFactorError(LogbrokerError):
    code, name = 38, "INVALID_REPLICATION_FACTOR"


@register
class InvalidReplicaAssignmentError(LogbrokerError):
    """A replica list the cluster cannot take: empty, a broker twice, a
    broker that is not live or not registered, not the topic's replication
    factor or not one per new partition (CreateTopics' manual assignment,
    CreatePartitions, partition reassignment), or any list on a single node
    (CreateTopics: any but the broker's own id alone)."""

    code, name = 39, "INVALID_REPLICA_ASSIGNMENT"


@register
class NoReassignmentInProgressError(LogbrokerError):
    """A cancel named a partition that is not being reassigned."""

    code, name = 85, "NO_REASSIGNMENT_IN_PROGRESS"


@register
class FencedLeaderEpochError(LogbrokerError):
    """The request names a leader epoch older than the broker's."""

    code, name, retriable = 74, "FENCED_LEADER_EPOCH", True


@register
class UnknownLeaderEpochError(LogbrokerError):
    """The request names a leader epoch newer than the broker knows yet."""

    code, name, retriable = 75, "UNKNOWN_LEADER_EPOCH", True


@register
class ClusterUnavailableError(LogbrokerError):
    """The broker cannot reach etcd (cluster metadata) right now."""

    code, name, retriable = 1005, "CLUSTER_UNAVAILABLE", True


# -- consumer groups (membership) ---------------------------------------------------


@register
class CoordinatorLoadInProgressError(LogbrokerError):
    """The coordinator is rebuilding the group's state from its offsets log."""

    code, name, retriable = 14, "COORDINATOR_LOAD_IN_PROGRESS", True


@register
class CoordinatorNotAvailableError(LogbrokerError):
    """No broker coordinates the group right now (its offsets partition has no leader)."""

    code, name, retriable = 15, "COORDINATOR_NOT_AVAILABLE", True


@register
class NotCoordinatorError(LogbrokerError):
    """This broker does not coordinate the group: find the coordinator again."""

    code, name, retriable = 16, "NOT_COORDINATOR", True


@register
class IllegalGenerationError(LogbrokerError):
    """The request names a generation other than the group's current one
    (a stale member: it must rejoin; its commit was not applied)."""

    code, name = 22, "ILLEGAL_GENERATION"


@register
class InconsistentGroupProtocolError(LogbrokerError):
    """The member supports none of the assignors the group uses."""

    code, name = 23, "INCONSISTENT_GROUP_PROTOCOL"


@register
class UnknownMemberIdError(LogbrokerError):
    """The coordinator does not know this member (it left or was expired): rejoin."""

    code, name = 25, "UNKNOWN_MEMBER_ID"


@register
class InvalidSessionTimeoutError(LogbrokerError):
    code, name = 26, "INVALID_SESSION_TIMEOUT"


@register
class RebalanceInProgressError(LogbrokerError):
    """The group is rebalancing: rejoin (the member's partitions are not lost)."""

    code, name, retriable = 27, "REBALANCE_IN_PROGRESS", True


@register
class NonEmptyGroupError(LogbrokerError):
    """The group has active members (delete refused)."""

    code, name = 68, "NON_EMPTY_GROUP"


@register
class GroupSubscribedToTopicError(LogbrokerError):
    """Deleting a group's offsets of a topic its active members subscribe to."""

    code, name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


@register
class GroupMaxSizeReachedError(LogbrokerError):
    code, name = 81, "GROUP_MAX_SIZE_REACHED"


@register
class FencedInstanceIdError(LogbrokerError):
    """Another member joined with this ``group_instance_id`` (static membership)."""

    code, name = 82, "FENCED_INSTANCE_ID"


# -- the consumer group protocol (KIP-848; docs/kafka.md "Consumer groups of Kafka 4") ----------


@register
class UnknownTopicIdError(LogbrokerError):
    """No topic has this topic id (it was deleted, or re-created with a new id)."""

    code, name, retriable = 100, "UNKNOWN_TOPIC_ID", True


@register
class FencedMemberEpochError(LogbrokerError):
    """A consumer-protocol member's epoch is not the coordinator's (or its
    session expired): it must rejoin with epoch 0, releasing its partitions."""

    code, name = 110, "FENCED_MEMBER_EPOCH"


@register
class UnreleasedInstanceIdError(LogbrokerError):
    """A static member joined with an instance id another live member still holds."""

    code, name = 111, "UNRELEASED_INSTANCE_ID"


@register
class UnsupportedAssignorError(LogbrokerError):
    """The member named a server-side assignor the broker does not have."""

    code, name = 112, "UNSUPPORTED_ASSIGNOR"


@register
class InvalidRegularExpressionError(LogbrokerError):
    """A subscription's topic regex is not valid RE2 syntax, or too long."""

    code, name = 128, "INVALID_REGULAR_EXPRESSION"


@register
class StaleMemberEpochError(LogbrokerError):
    """An offset commit names an older epoch of a consumer-protocol member."""

    code, name = 113, "STALE_MEMBER_EPOCH"



# -- authentication and authorization (docs/security.md) ----------------------------------------------


@register
class TopicAuthorizationFailedError(LogbrokerError):
    """No ACL allows the principal this operation on the topic, or one
    denies it (broker/acl.py, docs/security.md "Authorization")."""

    code, name = 29, "TOPIC_AUTHORIZATION_FAILED"


@register
class GroupAuthorizationFailedError(LogbrokerError):
    """No ACL allows the principal this operation on the consumer group, or
    one denies it (broker/acl.py)."""

    code, name = 30, "GROUP_AUTHORIZATION_FAILED"


@register
class ClusterAuthorizationFailedError(LogbrokerError):
    """The connection may not do this cluster-level operation: administer
    users or ACLs (not authenticated and the bootstrap rule does not apply,
    or not a super user and no ACL allows it), or a cluster-wide request."""

    code, name = 31, "CLUSTER_AUTHORIZATION_FAILED"


@register
class UnsupportedSaslMechanismError(LogbrokerError):
    """The client asked for a SASL mechanism the broker does not offer."""

    code, name = 33, "UNSUPPORTED_SASL_MECHANISM"


@register
class IllegalSaslStateError(LogbrokerError):
    """A SASL request out of order (authenticate before the handshake, a
    second handshake, a step after the exchange ended)."""

    code, name = 34, "ILLEGAL_SASL_STATE"


@register
class SaslAuthenticationFailedError(LogbrokerError):
    """Wrong user name or password, a malformed or replayed SCRAM message,
    an exchange that took too long, or an anonymous request to a broker
    with ``auth_required``. Not retriable: retrying cannot fix a password."""

    code, name = 58, "SASL_AUTHENTICATION_FAILED"


@register
class ResourceNotFoundError(LogbrokerError):
    """The named resource (a user) does not exist."""

    code, name = 91, "RESOURCE_NOT_FOUND"


# -- partitions and records administration (CreatePartitions, ElectLeaders) ----------------
@register
class InvalidPartitionsError(LogbrokerError):
    """CreatePartitions asked for a count not above the topic's present one
    (partitions are only ever added), or above the partition limit."""

    code, name = 37, "INVALID_PARTITIONS"


@register
class PreferredLeaderNotAvailableError(LogbrokerError):
    """A preferred-leader election found the preferred replica not live or
    not in sync: the leader stays."""

    code, name, retriable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", True


@register
class EligibleLeadersNotAvailableError(LogbrokerError):
    """An unclean election found no live replica to lead the partition."""

    code, name, retriable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True


@register
class ElectionNotNeededError(LogbrokerError):
    """The partition is already led as the election would have it."""

    code, name = 84, "ELECTION_NOT_NEEDED"
