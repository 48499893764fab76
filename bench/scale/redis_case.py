"""The Redis column of ``python -m bench.scale``: the same records on Redis
Streams with ``appendfsync always`` (fsync before the reply, as our acks=all
with fsync), one stream per partition.

One fresh ``redis-server`` per case (``bench.peers.servers.start_redis``:
127.0.0.1, AOF, no RDB, no automatic AOF rewrite; stopped by PID), one
redis-py connection (RESP2, hiredis when installed):

- produce: record i (100 B, the field ``v``) is ``XADD``-ed to stream ``i %
  P``, in non-transactional pipelines of ``BATCH`` (1,000) commands, one
  round trip each (``bench.peers.loops.redis_xadd_all``, as the peers
  bench's produce and scale runs). Redis fsyncs its AOF once per event-loop
  pass, before replying to what that pass read (~16 KiB of a pipeline), so
  a pipeline of 1,000 XADDs of 100 B costs ~8 fdatasyncs (strace), not one
  per command.
- consume: ``XREAD COUNT 1000 STREAMS`` from ``0-0`` over ``ceil(1000 /
  (records per stream))`` unfinished streams at a time (one stream at 1 and
  100 partitions, 10 at 1,000, 100 at 10,000), so every reply carries about
  1,000 entries as a batching client's would
  (``bench.peers.loops.redis_read_streams``).

Figures: produce and consume records/s, the CPU per record of this process
and of the server meanwhile (µs), and the server's RSS once idle after the
consume (and Redis's own ``used_memory``).
"""

from __future__ import annotations

import math
import os
import time

from bench.common.procfs import status_kib
from bench.peers.loops import Deadline, redis_read_streams, redis_xadd_all
from bench.peers.scale import names_of
from bench.peers.servers import start_redis
from bench.scale.common import VALUE, timed

BATCH = 1000  # XADDs per pipeline round trip; XREAD COUNT, and entries per reply aimed at
FIGURES = ("produce_rec_s", "produce_client_us", "produce_server_us", "consume_rec_s",
           "consume_client_us", "consume_server_us", "rss_mb", "used_memory_mb")


def run_redis_case(workdir: str, partitions: int, records: int, bound: float, log) -> dict:
    """One fresh ``redis-server --appendfsync always``: produce, consume, idle RSS."""
    import redis

    server = start_redis(os.path.join(workdir, f"redis-p{partitions}"), "always")
    pid = server.proc.pid
    out: dict = {"case": "redis", "partitions": partitions, "flush": "always", "pid": pid,
                 "batch": BATCH}
    r = redis.Redis(host="127.0.0.1", port=server.port, protocol=2)
    try:
        r.ping()  # connected before the clock starts
        names = names_of({"prefix": "scale", "topics": partitions})
        fields = {b"v": VALUE}
        per_stream = math.ceil(records / partitions)
        group = min(partitions, math.ceil(BATCH / per_stream))
        out["streams_per_read"] = group

        def produce() -> int:
            items = ((names[i % partitions], fields) for i in range(records))
            return redis_xadd_all(r, items, records, BATCH, Deadline(bound))

        wall, own, srv, added = timed(produce, [pid])
        if added != records:
            raise RuntimeError(f"Redis: {added} of {records} records added")
        out.update(produce_rec_s=records / wall, produce_client_us=own / records * 1e6,
                   produce_server_us=srv / records * 1e6)

        def consume() -> int:
            return redis_read_streams(r, names, per_stream, BATCH, group, Deadline(bound),
                                      fields=(b"v",))[0]

        wall, own, srv, got = timed(consume, [pid])
        if got != records:
            raise RuntimeError(f"Redis: {got} of {records} records read back")
        out.update(consume_rec_s=records / wall, consume_client_us=own / records * 1e6,
                   consume_server_us=srv / records * 1e6)
        time.sleep(0.2)  # idle: the last replies are out
        out["rss_mb"] = status_kib(pid, "VmRSS") / 1024
        out["used_memory_mb"] = r.info("memory")["used_memory"] / 2**20
        log(f"{partitions} Redis streams (appendfsync always): produce "
            f"{out['produce_rec_s']:,.0f} rec/s, consume {out['consume_rec_s']:,.0f} rec/s, "
            f"RSS {out['rss_mb']:.0f} MB")
    finally:
        r.close()
        server.stop()
    return out


def redis_missing() -> "str | None":
    """Why the Redis case cannot run here, or None."""
    import importlib.util
    import shutil

    missing = [x for x, ok in (("redis-server", shutil.which("redis-server")),
                               ("the redis package", importlib.util.find_spec("redis"))) if not ok]
    if missing:
        return (f"{' and '.join(missing)} not installed (bench/peers/install-servers.sh, "
                "pip install 'redis[hiredis]'); --no-redis skips the Redis column")
    return None
