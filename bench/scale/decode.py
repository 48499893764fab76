"""What a consumer's own decoding costs at P partitions, with no broker and
no socket in the clock (issue 32): the client's share of a consume, which
bounds the ratio to one partition however fast the broker gets.

    python -m bench.scale.decode                              # 1, 1,000 and 10,000 partitions
    python -m bench.scale.decode --partitions 1,1000 --rounds 21 --json

For each partition count: a fresh broker, one topic of P partitions
holding ``records`` records of 100 B sent by bench.scale's producer (so the
batches are the sizes a lingering producer makes there), one Consumer
reading everything back while its fetch answers are kept (each part's row
and a copy of its bytes). Then, the broker stopped, the answers are
replayed ``rounds`` times through a fresh ``FetchBuffer`` in the answers'
order, each answer absorbed (the I/O thread's work: its parts' batch
headers walked and checked) and then taken to the last record (the
polling thread's: CRCs checked, records built), as a consumer does them.

Columns (medians of the rounds, ms for all the records): ``absorb``,
``take``, their sum, and ``x one``: one partition's sum over this one's,
the most a consume at P partitions can reach of one partition's rate while
the client's Python does this work on one GIL (the start-up, Metadata and
fetch sessions, comes on top). ``us a batch`` is what a batch costs
beyond its records' share of one partition's time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import harness
from bench.scale.common import consume, parse_counts, per_count, produced_broker, topic_partitions


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    return parse_counts(argv, "scale.decode", __doc__, ("1,100", 5_000, 3),
                        partitions="1,1000,10000",
                        records=(100_000, "records per case (default 100,000)"),
                        rounds=(11, "replays timed per case (default 11)"))


def captured_answers(bootstrap: str, partitions: int, records: int, deadline: float) -> list:
    """One Consumer's fetch answers while it reads the ``records`` back from
    the beginning: ``(parts, payload copies)`` each, in arrival order."""
    from logbroker.client.consumer.fetch_buffer import FetchBuffer

    answers: list = []
    absorb = FetchBuffer.absorb

    def keeping(self, parts, gens, payloads, *rest):
        answers.append((list(parts), [bytes(p) for p in payloads]))
        return absorb(self, parts, gens, payloads, *rest)

    FetchBuffer.absorb = keeping
    try:
        consume(bootstrap, partitions, records, deadline)
    finally:
        FetchBuffer.absorb = absorb
    return answers


def replay(answers: list, partitions: int, records: int) -> "tuple[float, float]":
    """Seconds absorbing and taking ``answers`` through a fresh FetchBuffer
    (every partition at offset 0); raises unless ``records`` come out."""
    from logbroker.client.consumer.fetch_buffer import FetchBuffer
    from logbroker.client.settings import ConsumerSettings

    settings = ConsumerSettings()
    buf, tps = FetchBuffer(1 << 40), topic_partitions(partitions)
    buf.assign(tps)
    for topic, partition in tps:
        buf.seek(topic, partition, 0)
    gens = [[buf.states[(p[0], p[1])].gen for p in parts] for parts, _ in answers]
    absorbing = taking = 0.0
    got = 0
    for (parts, payloads), gen in zip(answers, gens):
        t0 = time.perf_counter()
        buf.absorb(parts, gen, payloads)
        t1 = time.perf_counter()
        while True:
            out = buf.take(settings.max_poll_records, settings.check_crcs)
            if not out:
                break
            got += len(out)
        absorbing, taking = absorbing + t1 - t0, taking + time.perf_counter() - t1
    if got != records:
        raise RuntimeError(f"replayed {got} records, {records} were produced")
    return absorbing, taking


def batch_counts(answers: list) -> "tuple[int, int]":
    """(batches in ``answers``, median records a batch)."""
    from logbroker.records import format as fmt
    from logbroker.records.walker import scan_fields

    sizes = [fields[fmt.F_RECORD_COUNT] for parts, payloads in answers
             for part, data in zip(parts, payloads) if part.nbytes
             for _, fields in scan_fields(memoryview(data), 0, part.nbytes)]
    return len(sizes), int(statistics.median(sizes)) if sizes else 0


def run_case(workdir: str, partitions: int, args, log) -> dict:
    with produced_broker(workdir, partitions, args.records) as (broker, deadline):
        pid = broker.pid
        answers = captured_answers(broker.bootstrap, partitions, args.records, deadline)
    runs = [replay(answers, partitions, args.records) for _ in range(args.rounds)]
    batches, per_batch = batch_counts(answers)
    row = {"partitions": partitions, "pid": pid, "answers": len(answers), "batches": batches,
           "records_per_batch": per_batch,
           "absorb_ms": statistics.median(a for a, _ in runs) * 1000,
           "take_ms": statistics.median(t for _, t in runs) * 1000,
           "total_ms": statistics.median(a + t for a, t in runs) * 1000}
    log(f"{partitions} partitions: {batches:,} batches of ~{per_batch} records, "
        f"absorb {row['absorb_ms']:.1f} ms, take {row['take_ms']:.1f} ms")
    return row


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    results = per_count(args, workdir, run_case)
    one = next((c for c in results["cases"] if c["partitions"] == 1), None)
    for c in results["cases"]:
        c["x_one"] = one["total_ms"] / c["total_ms"] if one else None
        extra = c["batches"] - (one["batches"] if one else 0)
        c["us_per_batch"] = ((c["total_ms"] - one["total_ms"]) * 1000 / extra
                             if one and extra > 0 else None)
    return results


def tables(results: dict) -> list:
    p = results["params"]
    return [harness.table(
        f"A consumer's decoding alone, replayed: {p['records']:,} records of 100 B over P "
        f"partitions, ms, medians of {p['rounds']}",
        ("partitions", "answers", "batches", "records a batch", "absorb", "take", "total",
         "x one", "us a batch"),
        [(f"{c['partitions']:,}", str(c["answers"]), f"{c['batches']:,}",
          str(c["records_per_batch"]), f"{c['absorb_ms']:.1f}", f"{c['take_ms']:.1f}",
          f"{c['total_ms']:.1f}", "-" if c["x_one"] is None else f"{c['x_one']:.2f}",
          "-" if c["us_per_batch"] is None else f"{c['us_per_batch']:.1f}")
         for c in results["cases"]])]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale-decode", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
