"""The broker's state as plain data for the console, gathered on the
broker's loop in slices.

``await gather(broker, traffic)`` must run on the broker's event loop (the
console's aiohttp handlers and its sampler do): it reads dicts the loop
mutates, so it never runs in another thread. The per-partition numbers come
from the metrics' sliced ``Gathered.gather`` (metrics/snapshot.py: ~1 ms
of loop time per slice, then it yields), the one place that reads them;
turning those columns into the console's dicts, and the traffic counters,
are sliced the same way, so another client of the loop waits about one
slice whatever the number of partitions. Topics, groups with their
members and the cluster view are read whole, as before (per group, not
per partition).

Transactions: ``txns`` holds, per partition with a log here, its last
stable offset and its open transactions (their details read only for the
partitions whose open count is not 0). The transactional ids this broker
coordinates are not part of it: ``txn_ids(broker)`` copies their (frozen)
states for the transactions page, whose view runs off the loop (pages.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..metrics.snapshot import CHUNK, SLICE_S, Gathered, SliceClock


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


async def gather(broker, traffic=None, slice_s: float = SLICE_S) -> State:
    """The state of ``broker`` now (on its loop, in slices of ``slice_s``);
    ``traffic``: the TrafficStats."""
    g = await Gathered.gather(broker, slice_s)
    clock = SliceClock(slice_s)
    logs, txns = {}, {}
    topics, parts, store = g.topics, g.partitions, broker.store
    for i in range(len(g)):
        key = (topics[i], parts[i])
        logs[key] = (g.starts[i], g.hws[i], g.ends[i], g.sizes[i], bool(g.offline[i]))
        txns[key] = (g.lsos[i], _open_of(store, key) if g.open_txns[i] else ())
        if i % CHUNK == CHUNK - 1:
            await clock.tick()
    counts = {}
    if traffic is not None:
        parts_ = traffic.parts
        keys = list(parts_)  # the keys as they are: the loop may add keys meanwhile
        for i, tp in enumerate(keys):
            values = parts_.get(tp)
            if values is not None:
                counts[tp] = tuple(values)
            if i % CHUNK == CHUNK - 1:
                await clock.tick()
    return State(broker.config.broker_id, f"{broker.config.host}:{broker.port}",
                 int(time.time() * 1000), len(broker.connections), broker.meta.topic_counts(),
                 logs, [_group(g_) for g_ in broker.coordinator.groups()
                        if g_.members or g_.offsets],
                 counts, broker.meta.cluster_state(g.cluster), txns)


def _open_of(store, key) -> tuple:
    try:
        return tuple(store.get_log(*key).open_transactions_detail())
    except Exception:  # noqa: BLE001 - a log gone under us shows none, never fails the page
        return ()


def _group(g) -> dict:
    return {"name": g.name, "state": g.state, "protocol": g.protocol, "generation": g.generation,
            "members": [(mb.member_id, mb.instance_id, mb.client_id, mb.host, mb.assignment)
                        for mb in list(g.members.values())],
            "offsets": {tp: co.offset for tp, co in list(g.offsets.items())}}


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
