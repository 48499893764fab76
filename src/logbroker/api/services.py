"""What the handlers work with: one object the broker builds at start
(broker/server.py) and every handler receives first.

``meta`` is the metadata interface (metadata/interface.py): the single
node's or the cluster's, the one place the two modes differ. ``requests``
and ``traffic`` are the metrics' hot-path counters (None while metrics and
the console are off: one check per request).
"""

from __future__ import annotations


class Services:
    __slots__ = ("config", "store", "meta", "commit", "notifier", "groups", "auth", "port",
                 "requests", "traffic", "offload", "txns", "verifier")

    def __init__(self, *, config, store, meta, commit, notifier, groups, auth, port: int) -> None:
        """``groups``: the coordinator's GroupRequests; ``auth``: the BrokerAuth."""
        self.config, self.store, self.meta = config, store, meta
        self.commit, self.notifier, self.groups, self.auth = commit, notifier, groups, auth
        self.port = port  # the bound port of our listener
        self.requests = None  # metrics.stats.RequestStats, set when metrics are on
        self.traffic = None  # metrics.stats.TrafficStats, set by metrics or the console
        # ``await offload(fn, *args)``: fn run off the loop (the inflation thread,
        # api/inflation.py); None: run in place (handlers driven without a broker)
        self.offload = None
        # the transaction coordinator (coordinator/txn_manager.py), set by the broker
        self.txns = None
        # transactional batches verified with their coordinator (api/txn_verify.py); None: off
        self.verifier = None
