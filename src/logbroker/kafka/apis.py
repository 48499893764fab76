"""The API profile: every Kafka API the codec speaks, by key (docs/kafka.md).

Most ranges stop at the API's last non-flexible version: clients work when
each API is capped there. The flexible versions served are where a client
needs them: ApiVersions v3 (librdkafka starts its handshake there),
Metadata v9-12 (topic ids for KIP-848 groups), InitProducerId v2-4 and the
transaction APIs' v3 (the clients' PRODUCER_FENCED, KIP-588) and the APIs
flexible from v0 (docs/kafka.md §1.1). ``ApiVersions`` (``api_versions.py``) advertises
exactly this table, in key order.
"""

from __future__ import annotations

from .apis_acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from .apis_admin import CREATE_TOPICS, DELETE_TOPICS
from .apis_configs import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from .apis_consumer_group import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT
from .apis_core import (API_VERSIONS, FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, METADATA,
                        OFFSET_FOR_LEADER_EPOCH, PRODUCE)
from .apis_groups import (FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT,
                          OFFSET_FETCH, SYNC_GROUP)
from .apis_group_admin import DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS
from .apis_offset_delete import OFFSET_DELETE
from .apis_sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .apis_partitions import (CREATE_PARTITIONS, DELETE_RECORDS, DESCRIBE_CLUSTER,
                              DESCRIBE_LOG_DIRS, ELECT_LEADERS)
from .apis_reassign import ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS
from .apis_txn import (ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, DESCRIBE_TRANSACTIONS, END_TXN,
                       LIST_TRANSACTIONS, TXN_OFFSET_COMMIT)
from .schema import Api

PROFILE: tuple = tuple(sorted((
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
    JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, SASL_HANDSHAKE,
    API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID,
    OFFSET_FOR_LEADER_EPOCH, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS,
    ALTER_CONFIGS, DESCRIBE_LOG_DIRS, SASL_AUTHENTICATE, CREATE_PARTITIONS, DELETE_GROUPS,
    ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS, OFFSET_DELETE, DESCRIBE_CLUSTER, CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_DESCRIBE, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN,
    TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS), key=lambda api: api.key))
APIS: dict = {api.key: api for api in PROFILE}
BY_NAME: dict = {api.name: api for api in PROFILE}

# The first flexible version of each API (Kafka's "flexibleVersions"): the
# profile's ranges stay below it but ApiVersions', whose ``flexible`` starts
# there (tests/kafka/test_codec.py checks both).
FIRST_FLEXIBLE = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4,
                  15: 5, 16: 3, 17: 2, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3,
                  26: 3, 28: 3, 29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 35: 2, 36: 2, 37: 2, 42: 2,
                  43: 2, 44: 1, 45: 0, 46: 0, 47: 1, 60: 0, 65: 0, 66: 0, 68: 0, 69: 0}
# SaslHandshake (17) and OffsetDelete (47) have no flexible version ("none"): past their last


def api_for(key: int) -> "Api | None":
    """The profile's API of ``key``, or None."""
    return APIS.get(key)
