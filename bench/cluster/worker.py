"""Client processes of the cluster bench.

    python -m bench.cluster.worker '<json spec>'

The broker bench's worker (bench/broker/worker.py: set up, ``READY``, wait
for ``go``, the timed section, one JSON line; ``{"error": ...}`` on error)
with two more modes (``spec["mode"]``); its own modes (produce, roundtrip)
run as they are there.

- ``consume``: the broker bench's consumer loop with the Consumer's
  ``prefetch_bytes`` from the spec. At its deadline, or after ``stall_s``
  (15) s without a record, it fails with a diagnosis: records and position
  per partition, each partition's high watermark, log end, leader and ISR
  as the brokers see them.
- ``steady``: the producer of the failover trials, a ``logbroker.Producer``
  (acks="all", every other setting its default) with one acknowledged
  warm-up record. It sends one ``value_bytes`` record every ``interval_ms``
  (paced to the clock, unkeyed, to the one-partition ``topic``) and notes
  each record's send time and, from a done callback on the client's I/O
  thread, its ack time or error. Times are ``time.monotonic()``:
  CLOCK_MONOTONIC, one clock for every process of the machine, so they
  compare with the bench's time of the kill. After ``go`` the bench writes
  ``kill <t>`` to stdin right after it sent SIGKILL to the leader at
  monotonic time ``t``. The worker stops sending once a record sent after
  ``t`` was acknowledged and ``after_s`` more seconds passed, or at
  ``deadline_s`` (or ``max_records``); then it flushes (bounded) and
  reports its counts, errors and the failover figures (``figures``).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from bench.common.stats import percentile_ms


def figures(sends: list, acks: dict, t_kill: "float | None") -> dict:
    """The trial's figures from ``sends`` (seq -> send time, by index) and
    ``acks`` (seq -> (ack time, error or None)), seconds after ``t_kill``:

    - ``first_ack_s``: the first ack of a record *sent after* the kill: the
      old leader was dead when it was sent, so the new leader wrote it;
    - ``first_ack_any_s``: the first ack received after the kill, of any
      record (records in flight at the kill are resent to the new leader,
      which acknowledges them together with or just before the new ones;
      an ack already on its way from the old leader would come within a
      millisecond or so of the kill);
    - ``max_gap_s``: the longest time between two consecutive acks from 1 s
      before the kill on: what a producer saw as the outage;
    - ``lat_before_*_ms``: send -> ack of the records sent in the second
      before the kill and acknowledged before it (the steady state)."""
    out: dict = {"sent": len(sends), "acked": sum(1 for t, e in acks.values() if e is None),
                 "failed": sum(1 for t, e in acks.values() if e is not None)}
    if t_kill is None:
        return out
    ok = [(t, seq) for seq, (t, e) in acks.items() if e is None]
    after = [t for t, seq in ok if t > t_kill and sends[seq] > t_kill]
    out["first_ack_s"] = min(after) - t_kill if after else None
    any_after = [t for t, _ in ok if t > t_kill]
    out["first_ack_any_s"] = min(any_after) - t_kill if any_after else None
    times = sorted(t for t, _ in ok if t >= t_kill - 1.0)
    gaps = [(b - a, a) for a, b in zip(times, times[1:])]
    if gaps:
        gap, at = max(gaps)
        out["max_gap_s"], out["max_gap_start_s"] = gap, at - t_kill
    before = sorted(int((acks[seq][0] - sends[seq]) * 1e9) for seq in range(len(sends))
                    if t_kill - 1.0 <= sends[seq] and seq in acks and acks[seq][1] is None and acks[seq][0] < t_kill)
    if before:
        out["lat_before_p50_ms"] = percentile_ms(before, 0.5)
        out["lat_before_p99_ms"] = percentile_ms(before, 0.99)
    out["records_sent_after_kill"] = sum(1 for t in sends if t > t_kill)
    return out


def diagnose(spec: dict, consumer, counts: dict) -> str:
    """Why a consumer is short of records: what it got and where it stands per
    partition, and each partition as the brokers see it (bounded calls)."""
    from logbroker import Admin

    topic, parts = spec["topic"], range(spec.get("partitions", 1))
    out = []
    try:
        out.append("positions " + str({p: consumer.position(topic, p) for p in parts}))
    except Exception as exc:  # noqa: BLE001 - a diagnosis reports what it can
        out.append(f"positions: {type(exc).__name__}: {exc}")
    try:
        with Admin(spec["bootstrap"], request_timeout_ms=5_000) as admin:
            desc = admin.describe_topics([topic])[topic]
            out.append("partitions " + "; ".join(
                f"{i.partition}: hw {i.high_watermark} end {i.log_end} leader {i.leader} isr {list(i.isr)}"
                + (f" error {i.error} {i.message}" if i.error else "") for i in desc.partitions))
            out.append("latest " + str({tp[1]: o.offset for tp, o in admin.list_offsets(
                [(topic, p) for p in parts], "latest", raise_errors=False).items() if hasattr(o, "offset")}))
    except Exception as exc:  # noqa: BLE001
        out.append(f"admin: {type(exc).__name__}: {exc}")
    return f"records per partition {counts}; " + "; ".join(out)


def consume(spec: dict):
    """The broker bench's consumer loop (assign, seek to the beginning, poll
    until ``records``; every key and value touched), with a diagnosis on timeout."""
    from logbroker import Consumer

    n, topic = spec["records"], spec["topic"]
    consumer = Consumer(spec["bootstrap"], auto_offset_reset="earliest",
                        **({"prefetch_bytes": spec["prefetch_bytes"]} if spec.get("prefetch_bytes") else {}))

    def timed(deadline) -> dict:
        consumer.assign([(topic, p) for p in range(spec.get("partitions", 1))])
        consumer.seek_to_beginning()
        got = nbytes = polls = 0
        counts: dict[int, int] = {}
        progress = time.perf_counter()
        while got < n and polls < n + 1000:
            records = consumer.poll(timeout=0.5)
            polls += 1
            got += len(records)
            for r in records:
                nbytes += len(r.key) + len(r.value)
                counts[r.partition] = counts.get(r.partition, 0) + 1
            now = time.perf_counter()
            progress = now if records else progress
            if now > deadline.at or now - progress > spec.get("stall_s", 15):
                raise TimeoutError(f"consume: {got:,} of {n:,} records, none for {now - progress:.1f} s; "
                                   + diagnose(spec, consumer, counts))
        return {"records": got, "bytes": nbytes, "polls": polls, "per_partition": counts}

    return timed, consumer.close


def steady(spec: dict):
    """The failover trial's producer (module docstring): set up, then the
    timed section sends until the kill's aftermath is measured."""
    from logbroker import Producer

    producer = Producer(spec["bootstrap"], acks="all")
    topic, interval = spec["topic"], spec["interval_ms"] / 1000
    producer.send(topic, b"warm-up").result(timeout=30)
    clock = time.monotonic

    def timed(deadline) -> dict:
        killed: list[float] = []
        stopping = threading.Event()

        def read_stdin() -> None:  # the bench's "kill <t>" after "go"
            for line in sys.stdin:
                word, *rest = line.split() or [""]
                if word == "kill" and rest:
                    killed.append(float(rest[0]))
                elif word == "stop":
                    break
            stopping.set()

        threading.Thread(target=read_stdin, daemon=True).start()
        sends: list[float] = []
        acks: dict[int, tuple] = {}
        first_new_ack: list[float] = []
        value = os.urandom(spec["value_bytes"])

        def done(handle, seq: int) -> None:
            now = clock()
            exc = handle.exception()
            acks[seq] = (now, None if exc is None else f"{type(exc).__name__}: {exc}")
            if exc is None and killed and sends[seq] > killed[0] and not first_new_ack:
                first_new_ack.append(now)

        start = clock()
        end = start + deadline.seconds
        seq = 0
        while seq < spec["max_records"] and not stopping.is_set():
            now = clock()
            if now >= end or (first_new_ack and now >= first_new_ack[0] + spec["after_s"]):
                break
            wait = start + seq * interval - now
            if wait > 0:
                time.sleep(wait)
            sends.append(clock())
            producer.send(topic, value).add_done_callback(lambda h, seq=seq: done(h, seq))
            seq += 1
        try:
            producer.flush(timeout=max(end + 5 - clock(), 1.0))
        except TimeoutError:
            pass
        t_kill = killed[0] if killed else None
        errors = sorted({e for _, e in list(acks.values()) if e is not None})
        return {"records": len(sends), "bytes": len(sends) * len(value), "t_kill": t_kill, "errors": errors[:5],
                **figures(sends, dict(acks), t_kill)}

    return timed, producer.close


def main() -> int:
    from bench.broker import worker

    worker.MODES = {**worker.MODES, "consume": consume, "steady": steady}
    return worker.main()


if __name__ == "__main__":
    sys.exit(main())
