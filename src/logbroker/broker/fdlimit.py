"""Open-file budget of a broker process.

A partition's active segment is appended to and fsynced on every produce;
with more partitions than open descriptors the segment cache reopens files
round-robin (an ``open`` + ``close`` per append and per fsync). At start the
broker raises its soft ``RLIMIT_NOFILE`` to the hard limit (as the Go
runtime does; Kafka's docs ask operators for 100,000) and gives segment
descriptors what connections and the rest do not need, at most ``CEILING``
(4,096): 50,000 partitions stay under 5,000 open files; past it a busy
partition's append reopens its file (~10% more broker CPU per record at
10,000 partitions fed round-robin, throughput within noise; decision 105).
"""

from __future__ import annotations

import resource

MAX_SOFT = 1 << 20  # never ask for more than this many descriptors
RESERVE = 256  # LMDB, etcd and replication sockets, pipes, log files
FLOOR = 512  # StorageConfig's default: never fewer segment descriptors than that
CEILING = 4096  # nor more than this: 50,000 partitions stay under 5,000 descriptors


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (at most ``MAX_SOFT``);
    returns the soft limit now in force (unchanged where not permitted)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_SOFT if hard == resource.RLIM_INFINITY else min(hard, MAX_SOFT)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def segment_file_budget(max_connections: int) -> int:
    """Segment descriptors to keep open under the current soft limit: what
    is left after ``max_connections`` and ``RESERVE``, within
    [``FLOOR``, ``CEILING``]."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return CEILING
    return max(FLOOR, min(CEILING, soft - max_connections - RESERVE))
