"""A consume-transform-produce processor in a process of its own (killed with
SIGKILL by tests/cluster/test_txn_nemesis.py): reads every partition of
INPUT (read_committed, from the group's committed offsets), and for each
poll writes, in one transaction, one OUTPUT record per input record to the
same partition (value ``"<partition>:<offset>:<input value>"``) and commits
the input offsets in it (``send_offsets_to_transaction``).

    python eos_processor.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS [PAUSE_MS]

PAUSE_MS: each transaction waits a random 0..PAUSE_MS ms between its sends
and its commit, so a kill often lands while its records are written but
not committed (they must then be aborted, never read as committed).

Prints ``ready``, then ``commit <records>`` per committed transaction and
``abort <error>`` per aborted one, flushed at once. An abortable error
aborts the transaction and rewinds to the committed offsets (Kafka's
exactly-once loop); a fatal one (fenced) exits 3, an abort that fails exits
4 (the next processor's ``init_transactions`` aborts what this one left). Bounded: it stops by
itself after 600 s.
"""

import random
import sys
import time

from logbroker import Consumer, Producer
from logbroker.errors import LogbrokerError, ProducerFencedError

FATAL = (ProducerFencedError,)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _rewind(consumer: Consumer, parts: list) -> None:
    """Positions back to the group's committed offsets (the start without one)."""
    for tp in parts:
        off = consumer.committed(*tp)
        if off is None:
            consumer.seek_to_beginning([tp])
        else:
            consumer.seek(tp[0], tp[1], off)


def main() -> None:
    bootstrap, source, sink, group, txn_id, count = sys.argv[1:7]
    pause = int(sys.argv[7]) / 1000 if len(sys.argv) > 7 else 0.0
    parts = [(source, p) for p in range(int(count))]
    deadline = time.monotonic() + 600
    with Consumer(bootstrap, group=group, isolation_level="read_committed",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  request_timeout_ms=5_000) as consumer, \
            Producer(bootstrap, transactional_id=txn_id, linger_ms=5, request_timeout_ms=5_000,
                     delivery_timeout_ms=30_000) as producer:
        consumer.assign(parts)
        producer.init_transactions()
        _rewind(consumer, parts)
        _say("ready")
        while time.monotonic() < deadline:
            records = consumer.poll(0.3, max_records=200)
            if not records:
                continue
            try:
                producer.begin_transaction()
                ends = {}
                for r in records:
                    producer.send(sink, b"%d:%d:" % (r.partition, r.offset) + (r.value or b""),
                                  partition=r.partition)
                    ends[(r.topic, r.partition)] = r.offset + 1
                if pause:
                    producer.flush()  # the records are in the log, uncommitted, during the pause
                    time.sleep(random.uniform(0, pause))
                producer.send_offsets_to_transaction(ends, consumer.group_metadata())
                producer.commit_transaction()
                _say(f"commit {len(records)}")
            except FATAL as exc:
                _say(f"fatal {exc}")
                sys.exit(3)
            except LogbrokerError as exc:
                _say(f"abort {exc}")
                try:
                    producer.abort_transaction()
                except FATAL as fatal:
                    _say(f"fatal {fatal}")
                    sys.exit(3)
                except LogbrokerError as failed:  # the harness starts another: it fences this one
                    _say(f"abort failed {failed}")
                    sys.exit(4)
                _rewind(consumer, parts)


if __name__ == "__main__":
    main()
