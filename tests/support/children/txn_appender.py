"""A child process for the transactions kill -9 test: three producers of
this round write transactional batches and commit or abort them, durably,
and report each acknowledged write.

Usage: txn_appender.py DATA_DIR ROUND MAX_SECONDS
Prints "B <producer> <offset>" after each acknowledged batch and
"M <producer> <offset> <commit 0/1>" after each acknowledged marker.
"""

import random
import sys
import time

from logbroker.records import build_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

data_dir, round_no, max_seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
store = Store.open(data_dir, StorageConfig(log=LogConfig(segment_bytes=4096), map_size=64 << 20))
if store.topics.get("x") is None:
    store.create_topic("x")
log = store.get_log("x", 0)
rng = random.Random(round_no)
deadline = time.monotonic() + max_seconds
producers = [round_no * 10 + p for p in range(3)]
seqs = {p: 0 for p in producers}
opened = set()
print("ready", flush=True)
for i in range(20_000):
    if time.monotonic() > deadline:
        break
    p = rng.choice(producers)
    if p in opened and rng.random() < 0.3:
        commit = rng.random() < 0.5
        info = log.append_marker(p, 0, commit, round_no, 0)
        opened.discard(p)
        print(f"M {p} {info.first_offset} {int(commit)}", flush=True)
    else:
        n = 1 + i % 3
        raw = build_batch([b"t%d-%d-%d" % (round_no, i, j) for j in range(n)], producer_id=p,
                          producer_epoch=0, base_sequence=seqs[p], transactional=True)
        info = log.append([raw])
        seqs[p] += n
        opened.add(p)
        print(f"B {p} {info.first_offset}", flush=True)
    if rng.random() < 0.2:
        log.append([build_batch([b"plain-%d" % i])])
store.close()
