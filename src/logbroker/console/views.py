"""Pure functions: the console's State (state.py) -> JSON-able dicts.

No I/O and no broker access here: every page's API answer is computed from
a ``State`` (and, for the charts, the sampled ``History``), so they are unit
tested on hand-made states. Unknown topics and groups raise the broker's own
errors (UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND), answered as 404.
"""

from __future__ import annotations

from ..errors import GroupNotFoundError, LogbrokerError, UnknownTopicOrPartitionError


def overview(state) -> dict:
    c = state.cluster
    partitions = sum(state.topics.values())
    if c is None:
        brokers = [{"id": state.broker_id, "address": state.address, "controller": True,
                    "self": True}]
        return {"mode": "single node", "cluster": None, "broker_id": state.broker_id,
                "address": state.address, "controller": state.broker_id, "brokers": brokers,
                "topics": len(state.topics), "partitions": partitions, "under_replicated": 0,
                "offline": _offline(state), "connections": state.connections,
                "groups": len(state.groups)}
    brokers = [{"id": i, "address": f"{h}:{p}", "controller": i == c["controller"],
                "self": i == state.broker_id} for i, h, p in c["brokers"]]
    return {"mode": "cluster", "cluster": c["name"], "broker_id": state.broker_id,
            "address": state.address, "controller": c["controller"], "brokers": brokers,
            "topics": len(state.topics), "partitions": partitions,
            "under_replicated": sum(1 for leader, replicas, isr, _ in c["partitions"].values()
                                    if len(isr) < len(replicas)),
            "offline": _offline(state), "connections": state.connections,
            "groups": len(state.groups)}


def _offline(state) -> int:
    return sum(1 for row in state.logs.values() if row[4])


def topics(state) -> dict:
    out = []
    for name in sorted(state.topics):
        rows = [state.logs.get((name, p)) for p in range(state.topics[name])]
        local = [r for r in rows if r is not None]
        out.append({"name": name, "partitions": state.topics[name],
                    "records": sum(max(hw - start, 0) for start, hw, *_ in local),
                    "size": sum(r[3] for r in local), "local_partitions": len(local),
                    "open_transactions": sum(len(state.txns.get((name, p), (0, ()))[1])
                                             for p in range(state.topics[name])),
                    "internal": name.startswith("__")})
    return {"topics": out}


def topic(state, name: str) -> dict:
    if name not in state.topics:
        raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
    c = state.cluster
    rows = []
    for p in range(state.topics[name]):
        if c is None:
            leader, replicas, isr = state.broker_id, [state.broker_id], [state.broker_id]
        else:
            leader, replicas, isr, _ = c["partitions"].get((name, p), (-1, (), (), -1))
        log = state.logs.get((name, p))
        start, hw, end, size, down = log if log is not None else (None,) * 4 + (False,)
        rows.append({"partition": p, "leader": leader, "replicas": list(replicas),
                     "isr": list(isr), "log_start": start, "hw": hw, "log_end": end,
                     "size": size, "offline": bool(down), "local": log is not None,
                     **partition_txns(state, name, p, hw)})
    return {"name": name, "partitions": rows}


def partition_txns(state, topic: str, partition: int, hw) -> dict:
    """A partition's transactions as its topic page shows them: ``lso``
    (last stable offset), ``lso_lag`` (HW - LSO: records read_committed
    consumers cannot read yet) and ``open_transactions`` (producer id,
    epoch, first offset, age in ms from the first batch's timestamp, None
    when unknown); None and [] where this broker has no log of it."""
    row = state.txns.get((topic, partition))
    if row is None:
        return {"lso": None, "lso_lag": None, "open_transactions": []}
    lso, open_ = row
    return {"lso": lso, "lso_lag": None if hw is None else max(hw - lso, 0),
            "open_transactions": [{"producer_id": pid, "producer_epoch": epoch,
                                   "first_offset": first, "age_ms": age_ms(opened, state.taken_ms)}
                                  for pid, epoch, first, opened in open_]}


def age_ms(since_ms: int, now_ms: int) -> "int | None":
    """``now_ms - since_ms`` (never negative), None for an unknown time (< 0)."""
    return None if since_ms is None or since_ms < 0 else max(now_ms - since_ms, 0)


def group_lags(state, g: dict) -> list:
    """[(topic, partition, committed, hw, lag)] of a group's committed
    offsets; hw and lag are None where the partition has no log here."""
    out = []
    for (t, p), committed in sorted(g["offsets"].items()):
        log = state.logs.get((t, p))
        hw = None if log is None else log[1]
        known = hw is not None and committed >= 0  # a negative commit is a reset request
        out.append((t, p, committed, hw, max(hw - committed, 0) if known else None))
    return out


def total_lag(state, g: dict) -> int:
    return sum(row[4] or 0 for row in group_lags(state, g))


def groups(state) -> dict:
    return {"groups": [{"name": g["name"], "state": g["state"], "members": len(g["members"]),
                        "partitions": len(g["offsets"]), "lag": total_lag(state, g)}
                       for g in sorted(state.groups, key=lambda g: g["name"])]}


def group(state, name: str, history=None) -> dict:
    g = next((g for g in state.groups if g["name"] == name), None)
    if g is None:
        raise GroupNotFoundError(f"unknown group {name!r}")
    members = [{"member_id": mid, "instance_id": inst, "client_id": client, "host": host,
                "assignment": assignment_of(assignment)}
               for mid, inst, client, host, assignment in g["members"]]
    offsets = [{"topic": t, "partition": p, "committed": c, "hw": hw, "lag": lag}
               for t, p, c, hw, lag in group_lags(state, g)]
    return {"name": name, "state": g["state"], "protocol": g["protocol"],
            "generation": g["generation"], "members": members, "offsets": offsets,
            "lag": sum(o["lag"] or 0 for o in offsets),
            "lag_history": [] if history is None else history.lag_of(name)}


def assignment_of(data: bytes) -> list:
    """A member's assigned partitions as "topic-partition" strings: the
    logbroker client's encoding, or Kafka's ConsumerProtocol (a Kafka
    member's assignment is kept as its leader wrote it); [] for another
    client's or none."""
    if not data:
        return []
    from ..kafka.consumer_protocol import decode_assignment
    from ..kafka.errors import KafkaDecodeError
    from ..protocol.consumer_protocol import Assignment

    try:
        return [f"{t}-{p}" for t, p in Assignment.decode(data).partitions]
    except (LogbrokerError, ValueError, TypeError):
        pass
    try:
        return [f"{t}-{p}" for t, p in decode_assignment(data).partitions]
    except KafkaDecodeError:
        return []


def topic_totals(state) -> dict:
    """topic -> [bytes_in, records_in, bytes_out] summed over its partitions."""
    out: dict = {}
    for (t, _p), counts in state.traffic.items():
        acc = out.setdefault(t, [0, 0, 0])
        for i in range(3):
            acc[i] += counts[i]
    return out


def throughput(samples) -> dict:
    """Rates per topic between consecutive samples ``(ts_ms, topic_totals)``:
    {"topics": [...], "series": {topic: [[ts_ms, bytes_in/s, records_in/s,
    bytes_out/s], ...]}}. A counter that went down (a restart) counts as 0."""
    samples = list(samples)
    series: dict = {}
    for (t0, before), (t1, after) in zip(samples, samples[1:]):
        dt = (t1 - t0) / 1000
        if dt <= 0:
            continue
        for name, counts in after.items():
            prev = before.get(name, [0, 0, 0])
            series.setdefault(name, []).append(
                [t1, *(round(max(a - b, 0) / dt, 1) for a, b in zip(counts, prev))])
    return {"topics": sorted(series), "series": series}
