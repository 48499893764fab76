"""A child process for kill -9 tests: appends durably and reports acks.

Usage: appender.py DATA_DIR ROUND THREADS MAX_SECONDS
Prints "<offset> <value>" on stdout after each append is acknowledged
(returned from a durable append). Bounded by count and time.
"""

import sys
import threading
import time

from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.records import build_batch
from logbroker.storage.store import Store

data_dir, round_no, threads, max_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
store = Store.open(data_dir, StorageConfig(log=LogConfig(segment_bytes=4096), map_size=64 << 20))
if store.topics.get("k") is None:
    store.create_topic("k")
log = store.get_log("k", 0)
out_lock = threading.Lock()
deadline = time.monotonic() + max_seconds


def run(t: int) -> None:
    for i in range(20_000):
        if time.monotonic() > deadline:
            return
        values = [b"r%d-t%d-%d-%d" % (round_no, t, i, j) for j in range(1 + i % 3)]
        info = log.append([build_batch(values)])
        with out_lock:
            for j, v in enumerate(values):
                sys.stdout.write(f"{info.first_offset + j} {v.decode()}\n")
            sys.stdout.flush()


print("ready", flush=True)
workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
store.close()
