"""What the cases of ``python -m bench.scale`` share: the record, the CPU
timing of a phase, our producer's and consumer's loops over one topic of P
partitions, and the median (min-max) of a figure over rounds."""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import time

VALUE = b"v" * 100
TOPIC = "scale"
TOPIC_MAX = 10_000  # partitions of one topic at most (limits.MAX_PARTITIONS)


def topic_partitions(partitions: int) -> list:
    """The (topic, partition) pairs of a case: TOPIC's ``partitions``, or,
    past TOPIC_MAX, topics ``scale-0``, ``scale-1``... of TOPIC_MAX each."""
    if partitions <= TOPIC_MAX:
        return [(TOPIC, q) for q in range(partitions)]
    return [(f"{TOPIC}-{q // TOPIC_MAX}", q % TOPIC_MAX) for q in range(partitions)]


def topics_of(partitions: int) -> list:
    """(topic, partitions) to create for a case: one CreateTopics each."""
    tps = topic_partitions(partitions)
    return [(tps[i][0], min(TOPIC_MAX, partitions - i)) for i in range(0, partitions, TOPIC_MAX)]


def own_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def timed(fn, pids) -> "tuple[float, float, float, object]":
    """``fn()``'s wall seconds, this process's CPU seconds, the CPU seconds
    of the server processes ``pids`` (summed) meanwhile, and what it returned."""
    from bench.common.procfs import cpu_seconds

    c0, s0, t0 = own_cpu(), sum(cpu_seconds(p) for p in pids), time.perf_counter()
    value = fn()
    wall = time.perf_counter() - t0
    return wall, own_cpu() - c0, sum(cpu_seconds(p) for p in pids) - s0, value


def produce(bootstrap: str, partitions: int, n: int, deadline: float, bound: float) -> list:
    """``n`` records of VALUE round-robin over the case's ``partitions`` by our
    sync Producer (acks=all, linger 5 ms), flushed; their handles (see
    ``acked``). TimeoutError past ``deadline`` (monotonic)."""
    from logbroker import Producer

    handles, tps = [], topic_partitions(partitions)
    with Producer(bootstrap, acks="all", linger_ms=5, request_timeout_ms=120_000) as producer:
        send, keep = producer.send, handles.append
        for i in range(n):
            topic, q = tps[i % partitions]
            keep(send(topic, VALUE, partition=q))
            if i % 10_000 == 0 and time.monotonic() > deadline:
                raise TimeoutError("producing took longer than the case's bound")
        producer.flush(bound)
    return handles


def acked(handles: list) -> None:
    """Raise unless every record was acknowledged (after the clock: a failed
    batch ends the case at once, not at the consumer's bound)."""
    failed = [exc for exc in (h.exception(0) for h in handles) if exc is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(handles)} records not acknowledged: "
                           f"{failed[0]!r}")


def timed_produce(bootstrap: str, partitions: int, n: int, deadline: float, bound: float,
                  pids) -> "tuple[float, float, float, float]":
    """``produce`` timed as ``timed_calls`` times it, its records then
    checked acknowledged (``acked``). The handles are dropped before
    returning: an application reading the records back holds none, and
    kept they are 100,000 objects every full collection of the cyclic GC
    walks in the phase that follows (~95 ms of a consumer's at 10,000
    partitions)."""
    wall, own, caller, servers, handles = timed_calls(
        lambda: produce(bootstrap, partitions, n, deadline, bound), pids)
    acked(handles)
    return wall, own, caller, servers


def timed_calls(fn, pids) -> "tuple[float, float, float, float, object]":
    """``timed`` with the calling thread's own CPU seconds too (after this
    process's): a client's ``send()`` or ``poll()`` runs in the caller's
    thread, its I/O in the client's own; the two share one GIL, so their
    sum, not the larger, is what a client can spend in the wall time."""
    t0 = time.thread_time()
    wall, own, servers, value = timed(fn, pids)
    return wall, own, time.thread_time() - t0, servers, value


def consume(bootstrap: str, partitions: int, n: int, deadline: float) -> None:
    """``n`` records back by one Consumer assigned every partition of TOPIC
    of the case from the beginning; TimeoutError past ``deadline`` (monotonic)."""
    from logbroker import Consumer

    with Consumer(bootstrap, fetch_max_wait_ms=100) as consumer:
        consumer.assign(topic_partitions(partitions))
        consumer.seek_to_beginning()
        got = 0
        while got < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got} of {n} within the case's bound")
            got += len(consumer.poll(0.5))


@contextlib.contextmanager
def produced_broker(workdir: str, partitions: int, records: int):
    """A fresh ``logbroker serve`` in ``workdir``/p<partitions> holding one
    topic (TOPIC) of ``partitions`` partitions with ``records`` records sent
    by ``produce`` and acknowledged; yields (the broker, a monotonic deadline
    300 s on); stopped by PID on leaving."""
    from bench.common.procs import BrokerProcess
    from logbroker import Admin

    broker = BrokerProcess(os.path.join(workdir, f"p{partitions}"), "--log-level", "warning",
                           die_with_parent=True).start()
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic(TOPIC, partitions)
        deadline = time.monotonic() + 300
        acked(produce(broker.bootstrap, partitions, records, deadline, 300))
        yield broker, deadline
    finally:
        broker.stop()


def follow(bootstrap: str, partitions: int, seconds: float, pids) -> "tuple[float, float]":
    """CPU % of this process and of the server processes ``pids`` while one
    Consumer assigned every partition of the case, caught up at their ends,
    polls for ``seconds`` with nothing new arriving: what following idle
    partitions costs (fetch sessions). Measured after a warm-up of polls
    (positions resolved, the opening fetch answered): 1 s, plus 1 s per
    10,000 partitions."""
    from bench.common.procfs import cpu_seconds
    from logbroker import Consumer

    with Consumer(bootstrap) as consumer:
        consumer.assign(topic_partitions(partitions))
        consumer.seek_to_end()
        warm = time.monotonic() + 1.0 + partitions / 10_000
        while time.monotonic() < warm:
            consumer.poll(0.2)
        c0, s0, t0 = own_cpu(), sum(cpu_seconds(p) for p in pids), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            consumer.poll(0.2)
        wall = time.perf_counter() - t0
        return ((own_cpu() - c0) / wall * 100,
                (sum(cpu_seconds(p) for p in pids) - s0) / wall * 100)


def spread(vals: list) -> dict:
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def per_count(args, workdir: str, run_case) -> dict:
    """A bench's results over ``args.counts`` partition counts: one row per
    count from ``run_case(workdir, partitions, args, log)``, with the
    environment and the parameters (partitions, records, rounds)."""
    from bench.common import harness
    from bench.common.environment import environment

    log = harness.progress_log()
    cases = [run_case(workdir, p, args, log) for p in args.counts]
    return {"environment": environment(workdir), "params": {"partitions": args.counts,
                                                    "records": args.records,
                                                    "rounds": args.rounds},
            "quick": args.quick, "cases": cases}


def parse_counts(argv, name: str, doc: str, quick: tuple, *, partitions: str,
                 records: "tuple[int, str]", rounds: "tuple[int, str]", min_rounds: int = 1):
    """The command line of a bench over partition counts (``--partitions``
    of one topic each, at most TOPIC_MAX; ``--records``; ``--rounds``):
    ``records`` and ``rounds`` are (default, help), ``quick`` the
    (partitions, records, rounds) of ``--quick``; ``args.counts`` the
    counts as ints."""
    from bench.common import harness

    quick_text = f"{quick[0].replace(',', ' and ')} partitions, {quick[1]:,} records, " \
        f"{quick[2]} rounds"
    ap = harness.parser(name, doc, quick_text)
    ap.add_argument("--partitions", default=partitions, help=f"comma-separated partition counts "
                    f"(default {partitions}; at most {TOPIC_MAX:,}: one topic)")
    ap.add_argument("--records", type=int, default=records[0], help=records[1])
    ap.add_argument("--rounds", type=int, default=rounds[0], help=rounds[1])
    args = harness.parse(ap, argv)
    if args.quick:
        args.partitions, args.records, args.rounds = quick
    args.counts = [int(x) for x in args.partitions.split(",")]
    if any(not 1 <= c <= TOPIC_MAX for c in args.counts) or args.records < 1 \
            or args.rounds < min_rounds:
        ap.error(f"partitions 1-{TOPIC_MAX:,} each, records >= 1, rounds >= {min_rounds}")
    return args
