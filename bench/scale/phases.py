"""Where a consumer's first moments go at P partitions (issue 32): one
fresh broker per partition count, one topic of P partitions holding
``records`` records of 100 B (bench.scale's producer), then ``rounds``
Consumers in this process, each assigned every partition from the
beginning and reading everything back, with its phases timed from the
moment it is made.

    python -m bench.scale.phases                           # 1 and 1,000 partitions, 7 rounds
    python -m bench.scale.phases --partitions 1,1000,10000 --json

Phases (ms, medians of the rounds, min-max): ``positions`` the moment the
positions are known: the answer of a ListOffsets resolving
``seek_to_beginning`` (the Metadata and connections before it included),
or, when the first Fetch resolves them itself (decision 111), its answer
absorbed; ``first fetch`` the answer of the first
Fetch; ``absorbed`` its batches walked into the buffer; ``first
records`` the first ``poll`` that returned records; ``all`` every record
returned. Timed by wrapping the consumer's own methods for the run
(``Fetcher.list_offsets``, ``FetchBuffer.absorb``: their first calls
count). Brokers are
``logbroker serve`` on 127.0.0.1 in the work dir, stopped by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from bench.common import harness
from bench.scale.common import (parse_counts, per_count, produced_broker, spread,
                                topic_partitions)

PHASES = ("positions", "first fetch", "absorbed", "first records", "all")


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    return parse_counts(argv, "scale.phases", __doc__, ("1,100", 5_000, 2), partitions="1,1000",
                        records=(100_000, "records per case (default 100,000)"),
                        rounds=(7, "consumers timed per case (default 7)"))


@contextlib.contextmanager
def timed_phases(marks: dict):
    """Wrap the consumer's methods so their first calls are noted in
    ``marks`` (perf_counter): the end of ``Fetcher.list_offsets``
    (positions; else the end of the first absorb), the start of
    ``FetchBuffer.absorb`` (the first Fetch answered) and its end
    (absorbed); restored on exit."""
    from logbroker.client.consumer.fetch_buffer import FetchBuffer
    from logbroker.client.consumer.fetcher import Fetcher

    list_offsets, absorb = Fetcher.list_offsets, FetchBuffer.absorb

    async def listed(*a, **k):
        result = await list_offsets(*a, **k)
        marks.setdefault("positions", time.perf_counter())
        return result

    def absorbed(*a, **k):
        marks.setdefault("first fetch", time.perf_counter())
        result = absorb(*a, **k)
        now = time.perf_counter()
        marks.setdefault("absorbed", now)
        marks.setdefault("positions", now)  # known from the fetch itself: no ListOffsets ran
        return result

    Fetcher.list_offsets, FetchBuffer.absorb = listed, absorbed
    try:
        yield
    finally:
        Fetcher.list_offsets, FetchBuffer.absorb = list_offsets, absorb


def one_consumer(bootstrap: str, partitions: int, records: int, deadline: float) -> dict:
    """One Consumer from the beginning to the last record; its phases in ms."""
    from logbroker import Consumer

    marks: dict = {}
    with timed_phases(marks):
        t0 = time.perf_counter()
        got = 0
        with Consumer(bootstrap, fetch_max_wait_ms=100) as consumer:
            consumer.assign(topic_partitions(partitions))
            consumer.seek_to_beginning()
            while got < records:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"consumed {got} of {records} within the case's bound")
                n = len(consumer.poll(0.5))
                if n and "first records" not in marks:
                    marks["first records"] = time.perf_counter()
                got += n
        marks["all"] = time.perf_counter()
    return {k: (v - t0) * 1000 for k, v in marks.items()}


def run_case(workdir: str, partitions: int, args, log) -> dict:
    with produced_broker(workdir, partitions, args.records) as (broker, deadline):
        pid = broker.pid
        runs = [one_consumer(broker.bootstrap, partitions, args.records, deadline)
                for _ in range(args.rounds)]
    row = {"partitions": partitions, "pid": pid,
           **{ph: spread([r[ph] for r in runs]) for ph in PHASES}}
    log(f"{partitions} partitions: " + ", ".join(f"{ph} {row[ph]['median']:.1f} ms" for ph in PHASES))
    return row


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    from logbroker.client.consumer import sync  # noqa: F401 - imported before the clocks start

    return per_count(args, workdir, run_case)


def tables(results: dict) -> list:
    p = results["params"]
    return [harness.table(
        f"A consumer's phases from its creation, ms: {p['records']:,} records of 100 B over "
        f"P partitions from the beginning; medians of {p['rounds']} (min-max)",
        ("partitions",) + PHASES,
        [(f"{c['partitions']:,}",) + tuple(
            f"{c[ph]['median']:.1f} ({c[ph]['min']:.1f}-{c[ph]['max']:.1f})" for ph in PHASES)
         for c in results["cases"]])]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale-phases", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
