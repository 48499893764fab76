"""The counters a scrape answers, as prometheus_client metric families, and
which names a scrape may show (docs/metrics.md).

``BrokerCollector(broker, metrics).collect()`` runs in the metrics
server's render thread (exporter.py), never on the broker's loop: the
hot-path counters (metrics/stats.py) and the other plain numbers the loop
bumps (auth failures, denials, quotas, refused connections, open
connections), read as they are at each scrape: a few hundred samples at
most, no topic or group name among them. The per-partition and per-group
part is state_text.py's.

Contract: ``collect`` never raises. A section that fails (a bug) is
logged, counted in ``logbroker_scrape_errors_total`` (``failed``) and left
out; the rest is answered.
"""

from __future__ import annotations

import logging

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..security.acl import GROUP, TOPIC
from .stats import Histogram

log = logging.getLogger("logbroker.metrics")


class Names:
    """Which topic and group names a scrape may show: all (``principal``
    None, or ACLs not enforced), else those the principal may describe
    (the broker's own check, BrokerAuth.allows, as the console's
    access.py). Memoized per name for one render; any thread (the ACLs
    are an immutable index, replaced whole on a change)."""

    def __init__(self, auth=None, principal: "str | None" = None) -> None:
        self.auth, self.principal = auth, principal
        self.everything = principal is None or auth is None or not auth.enforcing
        self._seen: dict = {}

    def topic(self, name: str) -> bool:
        return self.everything or self._may(TOPIC, name)

    def group(self, name: str) -> bool:
        return self.everything or self._may(GROUP, name)

    def _may(self, kind: str, name: str) -> bool:
        ok = self._seen.get((kind, name))
        if ok is None:
            ok = self._seen[kind, name] = self.auth.allows(self.principal, "describe", kind, name)
        return ok


class BrokerCollector:
    """A prometheus_client custom collector over one broker's state."""

    def __init__(self, broker, metrics) -> None:
        """``metrics``: the BrokerMetrics (its ``requests``, ``traffic``,
        ``commit`` stats and ``auth_failures`` count)."""
        self.broker, self.metrics = broker, metrics
        self.requests, self.traffic, self.commit = metrics.requests, metrics.traffic, metrics.commit
        self.scrape_errors = 0

    def describe(self):
        return []  # no up-front description: a registry must not call collect() at register

    def failed(self, what: str) -> None:
        """Count and log one section left out of a scrape (call inside ``except``)."""
        self.scrape_errors += 1
        log.exception("collecting metrics failed: %s (that part is left out of this scrape)", what)

    def collect(self):
        out: list = []
        for section in (self._requests, self._commit, lambda: _journal_families(self.broker),
                        lambda: _kafka_families(self.broker),
                        lambda: _connections(self.broker), lambda: _txn_families(self.broker)):
            try:
                out.extend(section())
            except Exception:  # noqa: BLE001 - a scrape answers whatever it could collect
                self.failed("counters")
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

    def _commit(self):
        return [_histogram("logbroker_fsync_duration_seconds", "Time of one fsync of a "
                           "partition's log by the group commit.", self.commit.fsync),
                _histogram("logbroker_group_commit_waiters", "Produce parts (and other "
                           "waiters) one fsync made durable: the group commit's batch.",
                           self.commit.batch)]


def _journal_families(broker) -> list:
    """The write-ahead journal's counters (storage/journal.py; plain ints its
    writers bump, read as they are), when the broker runs one."""
    journal = getattr(getattr(broker, "store", None), "journal", None)
    if journal is None:
        return []
    return [CounterMetricFamily("logbroker_journal_writes", "Group commits of many logs made "
                                "durable by one journal write and fdatasync.",
                                value=journal.commits),
            CounterMetricFamily("logbroker_journal_bytes", "Bytes written to the journal "
                                "(entries' headers and the batches).", value=journal.written),
            CounterMetricFamily("logbroker_journal_checkpoints", "Journal checkpoints: one "
                                "syncfs made the segment files durable, the journal's files "
                                "before it deleted.", value=journal.checkpoints)]


def _kafka_families(broker) -> list:
    """With the Kafka listener on: its Fetch answers' partitions by path
    (kafka/fetch_records.py: a file slice, or read and converted)."""
    if getattr(broker, "kafka", None) is None:
        return []
    from ..kafka.fetch_records import PATHS

    fam = CounterMetricFamily("logbroker_kafka_fetch_slices", "Partitions a Kafka Fetch "
                              "answered with records, by path: slice (the segment's bytes as "
                              "they lie, sendfile) or converted (read, our batches rebuilt).",
                              labels=("path",))
    for path, n in list(PATHS.items()):
        fam.add_metric([path], n)
    return [fam]


def _txn_families(broker) -> list:
    """The transaction coordinator's outcomes (txn_manager.py ``outcomes``:
    plain ints the loop bumps, read as they are)."""
    outcomes = getattr(getattr(broker, "txns", None), "outcomes", None)
    if outcomes is None:
        return []
    fam = CounterMetricFamily("logbroker_transactions", "Transactions this broker's "
                              "coordinator completed (committed, aborted) or aborted for their "
                              "timeout (timed_out, counted in aborted too once complete), by "
                              "outcome.", labels=("outcome",))
    for outcome, n in list(outcomes.items()):
        fam.add_metric([outcome], n)
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


def _connections(broker) -> list:
    if broker is None:  # no broker (a scrape's own tests)
        return []
    return [_gauge("logbroker_connections", "Client connections open.", len(broker.connections))]


def _gauge(name: str, doc: str, value) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    buckets, total, _ = h.snapshot()
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=total)
