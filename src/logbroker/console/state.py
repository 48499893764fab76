"""The broker's state as plain data for the console, taken on the broker's loop.

``take(broker)`` must run on the broker's event loop (the console's aiohttp
handlers and its sampler do): it iterates dicts the loop mutates, so it
never runs in another thread. The per-partition numbers come from the
metrics' ``Snapshot.take`` (metrics_collect.py), the one place that reads
them; this adds topics, groups with their members, the cluster view and
the traffic counters. Cheap: no I/O, one pass over logs and groups.

Transactions: ``txns`` holds, per partition with a log here, its last
stable offset and its open transactions (read only for the partitions whose
snapshot row counts any: O(1) per partition otherwise). The transactional
ids this broker coordinates are not part of it: ``txn_ids(broker)`` copies
their (frozen) states for the transactions page, whose view runs off the
loop (pages.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..metrics.collect import Snapshot


@dataclass(frozen=True)
class State:
    broker_id: int
    address: str  # host:port of this broker
    taken_ms: int
    connections: int
    topics: dict  # name -> partition count
    logs: dict  # (topic, partition) -> (log_start, hw, log_end, size_bytes, offline)
    groups: list  # of dicts: name, state, protocol, generation, members, offsets
    traffic: dict  # (topic, partition) -> (bytes_in, records_in, bytes_out)
    cluster: "dict | None"  # None on a single node (metadata's cluster_state)
    # (topic, partition) -> (last stable offset, ((producer id, epoch, first offset,
    # opened ms), ...)) for each partition with a log here (empty in states made by hand)
    txns: dict = field(default_factory=dict)


def take(broker, traffic=None) -> State:
    """The state of ``broker`` now (on its loop); ``traffic``: the TrafficStats."""
    snap = Snapshot.take(broker)
    logs = {(t, p): (start, hw, end, size, down)
            for _lg, t, p, end, hw, start, size, down, _lso, _n in snap.logs}
    txns = {(t, p): (lso, _open_of(lg) if n else ())
            for lg, t, p, _e, _h, _s, _z, _d, lso, n in snap.logs}
    topics = broker.meta.topic_counts()
    counts = {} if traffic is None else {tp: tuple(v) for tp, v in list(traffic.parts.items())}
    return State(broker.config.broker_id, f"{broker.config.host}:{broker.port}",
                 int(time.time() * 1000), snap.connections, topics, logs,
                 [_group(g) for g in broker.coordinator.groups() if g.members or g.offsets],
                 counts, broker.meta.cluster_state(snap.cluster), txns)


def _open_of(lg) -> tuple:
    try:
        return tuple(lg.open_transactions_detail())
    except Exception:  # noqa: BLE001 - a log closed under us shows none, never fails the page
        return ()


def txn_ids(broker) -> list:
    """The states (coordinator/txn_state.TxnState: frozen) of the
    transactional ids this broker coordinates and has loaded, copied on the
    loop (one C-level copy per state partition); [] without a coordinator."""
    txns = getattr(broker, "txns", None)
    if txns is None:
        return []
    out: list = []
    for view in list(txns.views.values()):
        if view.ready:
            out += list(view.txns.values())
    return out


def _group(g) -> dict:
    return {"name": g.name, "state": g.state, "protocol": g.protocol, "generation": g.generation,
            "members": [(mb.member_id, mb.instance_id, mb.client_id, mb.host, mb.assignment)
                        for mb in list(g.members.values())],
            "offsets": {tp: co.offset for tp, co in list(g.offsets.items())}}
