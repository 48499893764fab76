"""Prometheus metrics of a broker (``metrics_port``; docs/metrics.md).

``BrokerMetrics(broker).start()`` serves ``/metrics`` on
``config.host:config.metrics_port`` from a registry of its own (never the
process-global one); ``close()`` stops serving. Collection is cheap for the
hot path: counters are bumped where requests are handled, gauges are read
from the broker's state when scraped.
"""

from __future__ import annotations

import logging

log = logging.getLogger("logbroker.metrics")


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.port: "int | None" = None  # bound port once started (0 in the config picks one)

    def start(self) -> None:
        raise NotImplementedError("metrics are being built (issue 14)")

    def close(self) -> None:
        pass
