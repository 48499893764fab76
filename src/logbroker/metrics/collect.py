"""Scrape-time collection of the broker's metrics (docs/metrics.md).

``BrokerCollector(broker, stats).collect()`` runs in the metrics server's
thread on every scrape. It turns the hot-path counters (metrics_stats.py)
into metric families and computes the gauges from the broker's state: a
``snapshot`` of plain numbers taken *on the broker's event loop* (so no
dict the loop mutates is iterated from another thread), waited for at most
``SNAPSHOT_TIMEOUT_S``. Group lag in seconds then reads one batch header
per lagging group-partition from this thread (the log's own lock guards
it), at most ``LAG_SECONDS_READS`` per scrape.

Contract: ``collect`` never raises. A section that fails (a bug, a loop
that does not answer in time) is logged, counted in
``logbroker_scrape_errors_total`` and left out; the rest is answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..errors import LogbrokerError
from ..records import format as fmt
from .stats import Histogram

log = logging.getLogger("logbroker.metrics")
SNAPSHOT_TIMEOUT_S = 5.0
LAG_SECONDS_READS = 1000  # batch headers read per scrape for group lag in seconds
PART = ("topic", "partition")
GROUP_PART = ("group", "topic", "partition")


class Snapshot:
    """The broker's state as numbers, taken on the loop (``take``)."""

    __slots__ = ("logs", "connections", "offsets", "cluster")

    @classmethod
    def take(cls, broker) -> "Snapshot":
        s = cls()
        s.connections = len(broker.connections)
        s.logs = [(lg, lg.topic, lg.partition, lg.log_end_offset, lg.high_watermark,
                   lg.log_start_offset, lg.size_in_bytes(), lg.offline is not None)
                  for lg in broker.store.logs()]
        s.offsets = [(g.name, tp, co.offset) for g in broker.coordinator.groups()
                     for tp, co in list(g.offsets.items())]
        s.cluster = broker.meta.cluster_numbers()  # None on a single node
        return s


class BrokerCollector:
    """A prometheus_client custom collector over one broker's state."""

    def __init__(self, broker, loop: asyncio.AbstractEventLoop, metrics) -> None:
        """``metrics``: the BrokerMetrics (its ``requests``, ``traffic``,
        ``commit`` stats and ``auth_failures`` count)."""
        self.broker, self.loop, self.metrics = broker, loop, metrics
        self.requests, self.traffic, self.commit = metrics.requests, metrics.traffic, metrics.commit
        self.scrape_errors = 0

    def describe(self):
        return []  # no up-front description: the registry must not call collect() at register

    def collect(self):
        out: list = []
        snap: "list[Snapshot]" = []
        for section in (self._requests, self._traffic, self._commit,
                        lambda: _kafka_families(self.broker),
                        lambda: snap.append(self._snapshot()) or [],
                        lambda: _state_families(snap[0]) if snap else [],
                        lambda: self._group_families(snap[0]) if snap else []):
            try:
                out.extend(section())
            except Exception:  # noqa: BLE001 - a scrape answers whatever it could collect
                self.scrape_errors += 1
                log.exception("collecting metrics failed (that part is left out of this scrape)")
        errors = CounterMetricFamily("logbroker_scrape_errors", "Metric sections a scrape "
                                     "left out because collecting them failed (see the broker log).")
        errors.add_metric([], self.scrape_errors)
        auth = CounterMetricFamily("logbroker_auth_failures", "Connections or requests refused "
                                   "because authentication failed.")
        auth.add_metric([], self.metrics.auth_failures)
        throttled = CounterMetricFamily("logbroker_auth_throttled", "Authentication attempts "
                                        "refused by the password-guessing throttle.")
        throttled.add_metric([], self.metrics.auth_throttles)
        denials = CounterMetricFamily("logbroker_authorization_denials", "Requests refused "
                                      "because no ACL allowed them, by kind.", labels=("request",))
        for kind, count in sorted(dict(self.metrics.authz_denials).items()):
            denials.add_metric([kind], count)
        out += [errors, auth, throttled, denials, *_limit_families(self.broker)]
        return out

    # -- hot-path counters ---------------------------------------------------------------------
    def _requests(self):
        count = CounterMetricFamily("logbroker_requests", "Requests handled, by kind.",
                                    labels=("request",))
        errs = CounterMetricFamily("logbroker_request_errors", "Requests answered with a "
                                   "top-level error (refused, or a bug), by kind.",
                                   labels=("request",))
        hist = HistogramMetricFamily("logbroker_request_duration_seconds", "Time from a request "
                                     "read to its answer ready (a produce's fsync or replication "
                                     "and a fetch's long-poll wait included).", labels=("request",))
        for kind, h in list(self.requests.latency.items()):
            buckets, total, n = h.snapshot()
            count.add_metric([kind.__name__], n)
            hist.add_metric([kind.__name__], buckets, total)
        for kind, n in list(self.requests.errors.items()):
            errs.add_metric([kind.__name__], n)
        return [count, errs, hist]

    def _traffic(self):
        fams = [CounterMetricFamily("logbroker_partition_bytes_in", "Bytes appended by produce "
                                    "requests (retried duplicates not counted).", labels=PART),
                CounterMetricFamily("logbroker_partition_records_in", "Records appended by "
                                    "produce requests.", labels=PART),
                CounterMetricFamily("logbroker_partition_bytes_out", "Bytes of records sent in "
                                    "fetch answers to clients.", labels=PART),
                CounterMetricFamily("logbroker_partition_records_out", "Records clients read "
                                    "(counted when a client's next fetch moves past them).",
                                    labels=PART)]
        for (topic, partition), values in list(self.traffic.parts.items()):
            for fam, value in zip(fams, list(values)):
                fam.add_metric([topic, str(partition)], value)
        return fams

    def _commit(self):
        return [_histogram("logbroker_fsync_duration_seconds", "Time of one fsync of a "
                           "partition's log by the group commit.", self.commit.fsync),
                _histogram("logbroker_group_commit_waiters", "Produce parts (and other "
                           "waiters) one fsync made durable: the group commit's batch.",
                           self.commit.batch)]

    # -- gauges from the broker's state -------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def take() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(Snapshot.take(self.broker))
                except BaseException as exc:  # noqa: BLE001 - handed to the scrape thread
                    fut.set_exception(exc)

        self.loop.call_soon_threadsafe(take)  # RuntimeError when the loop is closed: logged
        try:
            return fut.result(SNAPSHOT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"the broker's loop did not answer in {SNAPSHOT_TIMEOUT_S} s") from None

    def _group_families(self, snap: Snapshot):
        lag = GaugeMetricFamily("logbroker_group_lag_records", "Records between a group's "
                                "committed offset and the high watermark (partitions with a "
                                "replica on the group's coordinator).", labels=GROUP_PART)
        seconds = GaugeMetricFamily("logbroker_group_lag_seconds", "Age of the batch holding a "
                                    "group's next record to consume (0 when caught up).",
                                    labels=GROUP_PART)
        committed = GaugeMetricFamily("logbroker_group_committed_offset", "A group's committed "
                                      "offset.", labels=GROUP_PART)
        logs = {(t, p): (lg, hw) for lg, t, p, _end, hw, *_ in snap.logs}
        reads, now = 0, time.time()
        for group, (topic, partition), offset in snap.offsets:
            labels = [group, topic, str(partition)]
            committed.add_metric(labels, offset)
            found = logs.get((topic, partition))
            if found is None:
                continue
            lg, hw = found
            behind = max(hw - offset, 0)
            lag.add_metric(labels, behind)
            if not behind:
                seconds.add_metric(labels, 0.0)
            elif reads < LAG_SECONDS_READS:
                reads += 1
                stamp = _batch_timestamp_ms(lg, offset, hw)
                if stamp is not None:
                    seconds.add_metric(labels, max(now - stamp / 1000, 0.0))
        return [lag, seconds, committed]


def _kafka_families(broker) -> list:
    """With the Kafka listener on: its Fetch answers' partitions by path
    (kafka/fetch_records.py: a file slice, or read and converted)."""
    if getattr(getattr(broker, "config", None), "kafka_port", None) is None:
        return []
    from ..kafka.fetch_records import PATHS

    fam = CounterMetricFamily("logbroker_kafka_fetch_slices", "Partitions a Kafka Fetch "
                              "answered with records, by path: slice (the segment's bytes as "
                              "they lie, sendfile) or converted (read, our batches rebuilt).",
                              labels=("path",))
    for path, n in list(PATHS.items()):
        fam.add_metric([path], n)
    return [fam]


def _limit_families(broker) -> list:
    """Quota throttles and refused connections (plain numbers the loop
    bumps; read as they are, docs/security.md "Quotas and limits")."""
    throttle = CounterMetricFamily("logbroker_quota_throttle_seconds", "Throttle time handed "
                                   "to clients over their byte-rate quota, by kind.",
                                   labels=("kind",))
    quotas, admission = getattr(broker, "quotas", None), getattr(broker, "admission", None)
    for kind, seconds in (quotas.throttled_seconds() if quotas is not None
                          else {"produce": 0.0, "fetch": 0.0}).items():
        throttle.add_metric([kind], seconds)
    refused = CounterMetricFamily("logbroker_connections_refused", "Connections refused over "
                                  "max_connections or their address's limit, by reason.",
                                  labels=("reason",))
    for reason, count in sorted(dict(admission.refused if admission else {}).items()):
        refused.add_metric([reason], count)
    return [throttle, refused]


def _state_families(snap: Snapshot) -> list:
    out = [_gauge("logbroker_connections", "Client connections open.", snap.connections)]
    out += _log_families(snap.logs)
    if snap.cluster is not None:
        out += _cluster_families(snap.cluster)
    return out


def _batch_timestamp_ms(lg, offset: int, hw: int) -> "int | None":
    """The first timestamp of the batch holding ``offset`` (one header read),
    or None (retention removed it, the partition is offline, ...)."""
    try:
        part = lg.slice(offset, 1, upto=hw)
        if part is None or part.size < fmt.HEADER_SIZE:
            return None
        with part.fd() as fd:
            header = os.pread(fd, fmt.HEADER_SIZE, part.position)
        return fmt.read_header(header).first_timestamp
    except (LogbrokerError, OSError, ValueError) as exc:
        log.debug("lag seconds of %s at %d: %s", lg.name, offset, exc)
        return None


def _log_families(logs: list):
    fams = {name: GaugeMetricFamily(f"logbroker_partition_{name}", doc, labels=PART) for name, doc in (
        ("log_end_offset", "The next offset to be assigned."),
        ("high_watermark", "The offset below which records are committed (visible to consumers)."),
        ("log_start_offset", "The first offset retention kept."),
        ("size_bytes", "Bytes of the partition's segments on disk."))}
    offline = 0
    for _lg, topic, partition, end, hw, start, size, down in logs:
        labels = [topic, str(partition)]
        fams["log_end_offset"].add_metric(labels, end)
        fams["high_watermark"].add_metric(labels, hw)
        fams["log_start_offset"].add_metric(labels, start)
        fams["size_bytes"].add_metric(labels, size)
        offline += down
    return [*fams.values(), _gauge("logbroker_partitions", "Partitions with a log on this broker.",
                                   len(logs)),
            _gauge("logbroker_partitions_offline", "Partitions taken offline by damage or an I/O "
                   "error.", offline)]


def _cluster_families(c: dict):
    isr_shrinks = CounterMetricFamily("logbroker_isr_shrinks", "ISR shrinks this broker proposed "
                                      "as a leader (followers lagging).")
    isr_shrinks.add_metric([], c["shrinks"])
    isr_expands = CounterMetricFamily("logbroker_isr_expands", "ISR expands this broker proposed "
                                      "as a leader (a follower caught up).")
    isr_expands.add_metric([], c["expands"])
    changes = CounterMetricFamily("logbroker_controller_changes", "Changes of the controller "
                                  "this broker saw in etcd.")
    changes.add_metric([], c["controller_changes"])
    return [_gauge("logbroker_leader_partitions", "Partitions this broker leads.", c["leaders"]),
            _gauge("logbroker_under_replicated_partitions", "Partitions this broker leads whose "
                   "ISR is smaller than their replica set.", c["under"]),
            _gauge("logbroker_controller_active", "1 if this broker is the controller.",
                   c["controller"]),
            isr_shrinks, isr_expands, changes]


def _gauge(name: str, doc: str, value) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    buckets, total, _ = h.snapshot()
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=total)
