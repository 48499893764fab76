"""A child process for the broker kill -9 test: produces continuously.

Usage: producer.py BOOTSTRAP TOPIC MAX_SECONDS [PARTITIONS]
Prints "ack <partition> <offset> <value>" for every acknowledged record and
"fail <value> <error>" for one whose delivery failed; record i goes to
partition i % PARTITIONS (default 1); stops (flushing) when stdin closes or
after MAX_SECONDS. Bounded by count and time.
"""

import sys
import threading
import time

from logbroker import Producer

bootstrap, topic, max_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
partitions = int(sys.argv[4]) if len(sys.argv) > 4 else 1
stop = threading.Event()
out_lock = threading.Lock()


def watch_stdin() -> None:
    sys.stdin.read()
    stop.set()


def report(value: bytes):
    def done(handle) -> None:
        exc = handle.exception()
        with out_lock:
            if exc is None:
                meta = handle.result()
                sys.stdout.write(f"ack {meta.partition} {meta.offset} {value.decode()}\n")
            else:
                sys.stdout.write(f"fail {value.decode()} {type(exc).__name__}\n")
            sys.stdout.flush()
    return done


threading.Thread(target=watch_stdin, daemon=True).start()
deadline = time.monotonic() + max_seconds
with Producer(bootstrap=bootstrap, acks="all", idempotent=True, linger_ms=1,
              delivery_timeout_ms=int(max_seconds * 1000) + 60_000) as producer:
    print("ready", flush=True)
    for i in range(2_000_000):
        if stop.is_set() or time.monotonic() > deadline:
            break
        value = b"v%07d" % i
        producer.send(topic, value, partition=i % partitions).add_done_callback(report(value))
        if i % 50 == 49:
            time.sleep(0.002)  # a steady stream (<= 25,000 a second), not a flood of buffered records
    producer.flush()
print("done", flush=True)
