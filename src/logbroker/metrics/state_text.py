"""The per-partition and per-group part of a scrape, as Prometheus text
(docs/metrics.md): ``state_text(state, traffic, store, names)``.

From a ``Gathered`` state (snapshot.py) and the traffic counters
(stats.py), keeping only the topics and groups ``names`` (collect.py
``Names``) lets the scraper describe: the partition gauges (offsets,
sizes, LSO lag, open transactions), the partition traffic counters, the
groups' committed offsets and lag, the partition counts, and the cluster
gauges. Runs in the render thread, never on the broker's loop.

Written line by line as the text format (0.0.4) rather than through
prometheus_client's metric families: those make one tracked object per
sample (``Sample``), and 200,000 of them alive for the length of a render
are promoted to the collector's oldest generation, whose full collections
(~150 ms of the broker's heap at 20,000 partitions) then stall every
thread, the broker's loop included. Strings, ints and ``array`` columns
are not tracked. Label values are escaped as the format requires.

Group lag in seconds reads one batch header per lagging group-partition
(the log's own lock guards it), at most ``LAG_SECONDS_READS`` per render.
"""

from __future__ import annotations

import logging
import os
import time

from ..errors import LogbrokerError
from ..records import format as fmt

log = logging.getLogger("logbroker.metrics")
LAG_SECONDS_READS = 1000  # batch headers read per render for group lag in seconds
GAUGES = (("log_end_offset", "ends", "The next offset to be assigned."),
          ("high_watermark", "hws", "The offset below which records are committed (visible to "
           "consumers)."),
          ("log_start_offset", "starts", "The first offset retention kept."),
          ("size_bytes", "sizes", "Bytes of the partition's segments on disk."))
TRAFFIC = (("bytes_in", "Bytes appended by produce requests (retried duplicates not counted)."),
           ("records_in", "Records appended by produce requests."),
           ("bytes_out", "Bytes of records sent in fetch answers to clients."),
           ("records_out", "Records clients read (counted when a client's next fetch moves "
            "past them)."))


def state_text(g, traffic, store, names) -> str:
    """The text of ``g`` (a Gathered) and ``traffic`` (a TrafficStats) for
    ``names``; ``store``: the broker's Store (logs for lag in seconds)."""
    out: list = []
    _partitions(out, g, names)
    _traffic(out, traffic, names)
    _groups(out, g, store, names)
    _head(out, "logbroker_partitions", "gauge", "Partitions with a log on this broker.")
    out.append(f"logbroker_partitions {len(g)}\n")
    _head(out, "logbroker_partitions_offline", "gauge", "Partitions taken offline by damage "
          "or an I/O error.")
    out.append(f"logbroker_partitions_offline {sum(g.offline)}\n")
    if g.cluster is not None:
        _cluster(out, g.cluster)
    return "".join(out)


def _partitions(out: list, g, names) -> None:
    topics, parts = g.topics, g.partitions
    keep = range(len(g)) if names.everything else [
        i for i in range(len(g)) if names.topic(topics[i])]
    labels = [f'topic="{_esc(topics[i])}",partition="{parts[i]}"' for i in keep]
    for name, column, doc in GAUGES:
        metric, values = f"logbroker_partition_{name}", getattr(g, column)
        _head(out, metric, "gauge", doc)
        out.extend(f"{metric}{{{lab}}} {values[i]}\n" for lab, i in zip(labels, keep))
    hws, lsos, open_txns = g.hws, g.lsos, g.open_txns
    metric = "logbroker_partition_lso_lag_records"
    _head(out, metric, "gauge", "High watermark minus last stable offset: records "
          "read_committed consumers cannot read yet (open transactions hold them).")
    out.extend(f"{metric}{{{lab}}} {max(hws[i] - lsos[i], 0)}\n" for lab, i in zip(labels, keep))
    metric = "logbroker_partition_open_transactions"
    _head(out, metric, "gauge", "Transactions open on the partition (first batch written, "
          "no marker yet).")
    out.extend(f"{metric}{{{lab}}} {open_txns[i]}\n" for lab, i in zip(labels, keep))


def _traffic(out: list, traffic, names) -> None:
    parts = traffic.parts
    labels, counts = [], []  # no tuple per partition (module docstring)
    for key in list(parts):  # the keys as they are: the loop may add keys meanwhile
        values = parts.get(key)
        if values is not None and names.topic(key[0]):
            labels.append(f'topic="{_esc(key[0])}",partition="{key[1]}"')
            counts.append(values)
    for column, (name, doc) in enumerate(TRAFFIC):
        metric = f"logbroker_partition_{name}_total"
        _head(out, metric, "counter", doc)
        out.extend(f"{metric}{{{lab}}} {values[column]}\n" for lab, values in zip(labels, counts))


def _groups(out: list, g, store, names) -> None:
    lines: dict = {"committed": [], "lag": [], "seconds": []}
    if len(g.o_offsets):
        where: dict = {}  # topic -> {partition: index in g}
        for i, topic in enumerate(g.topics):
            where.setdefault(topic, {})[g.partitions[i]] = i
        reads, now = 0, time.time()
        for group, topic, partition, offset in zip(g.o_groups, g.o_topics, g.o_partitions,
                                                   g.o_offsets):
            if not (names.group(group) and names.topic(topic)):
                continue
            lab = f'group="{_esc(group)}",topic="{_esc(topic)}",partition="{partition}"'
            lines["committed"].append(f"logbroker_group_committed_offset{{{lab}}} {offset}\n")
            i = where.get(topic, {}).get(partition)
            if i is None or offset < 0:  # a negative commit (a reset request): no lag known
                continue
            hw = g.hws[i]
            behind = max(hw - offset, 0)
            lines["lag"].append(f"logbroker_group_lag_records{{{lab}}} {behind}\n")
            if not behind:
                lines["seconds"].append(f"logbroker_group_lag_seconds{{{lab}}} 0.0\n")
            elif reads < LAG_SECONDS_READS:
                reads += 1
                stamp = _batch_timestamp_ms(store, topic, partition, offset, hw)
                if stamp is not None:
                    lines["seconds"].append(f"logbroker_group_lag_seconds{{{lab}}} "
                                            f"{max(now - stamp / 1000, 0.0)}\n")
    for key, metric, doc in (
            ("lag", "logbroker_group_lag_records", "Records between a group's committed "
             "offset and the high watermark (partitions with a replica on the group's "
             "coordinator)."),
            ("seconds", "logbroker_group_lag_seconds", "Age of the batch holding a group's next "
             "record to consume (0 when caught up)."),
            ("committed", "logbroker_group_committed_offset", "A group's committed offset.")):
        _head(out, metric, "gauge", doc)
        out.extend(lines[key])


def _cluster(out: list, c: dict) -> None:
    for metric, kind, key, doc in (
            ("logbroker_leader_partitions", "gauge", "leaders", "Partitions this broker leads."),
            ("logbroker_under_replicated_partitions", "gauge", "under", "Partitions this broker "
             "leads whose ISR is smaller than their replica set."),
            ("logbroker_controller_active", "gauge", "controller", "1 if this broker is the "
             "controller."),
            ("logbroker_isr_shrinks_total", "counter", "shrinks", "ISR shrinks this broker "
             "proposed as a leader (followers lagging)."),
            ("logbroker_isr_expands_total", "counter", "expands", "ISR expands this broker "
             "proposed as a leader (a follower caught up)."),
            ("logbroker_controller_changes_total", "counter", "controller_changes", "Changes "
             "of the controller this broker saw in etcd.")):
        _head(out, metric, kind, doc)
        out.append(f"{metric} {c[key]}\n")


def _head(out: list, metric: str, kind: str, doc: str) -> None:
    out.append(f"# HELP {metric} {doc}\n# TYPE {metric} {kind}\n")


def _esc(value: str) -> str:
    """A label value escaped for the text format (backslash, quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _batch_timestamp_ms(store, topic: str, partition: int, offset: int,
                        hw: int) -> "int | None":
    """The first timestamp of the batch holding ``offset`` (one header read),
    or None (retention removed it, the partition is gone or offline, ...)."""
    try:
        part = store.get_log(topic, partition).slice(offset, 1, upto=hw)
        if part is None or part.size < fmt.HEADER_SIZE:
            return None
        with part.fd() as fd:
            header = os.pread(fd, fmt.HEADER_SIZE, part.position)
        return fmt.read_header(header).first_timestamp
    except (LogbrokerError, OSError, ValueError) as exc:
        log.debug("lag seconds of %s-%d at %d: %s", topic, partition, offset, exc)
        return None
