"""The RF=3 row of ``python -m bench.scale``: one topic of P partitions
(default 1,000) with replication factor 3 on etcd + 3 brokers (fsync), the
same records produced (acks=all: each acknowledged once the three replicas
have it) and consumed as on one broker.

The cluster is ``bench.cluster.procs.Setup("cluster3")``, as the cluster
bench starts it: a one-member etcd with default raft ticks and brokers 1-3,
all on free 127.0.0.1 ports, started fresh per case and stopped by PID
(SIGTERM, SIGKILL after 30 s). Figures: the CreateTopics call (``create_s``)
and the longest Metadata round trip broker 1 gave another client meanwhile;
``isr_s``, from the call until every partition has a leader and 3 in-sync
replicas (produce starts then); produce and consume records/s and the CPU
per record of this process and of the 3 brokers together; the RSS and open
files of the broker leading the most partitions once idle; the clean stop
of the three.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter

from bench.common.procfs import status_kib
from bench.scale.common import TOPIC, consume, timed, timed_produce

FIGURES = ("create_s", "create_worst_rtt_ms", "isr_s", "produce_rec_s", "produce_client_us",
           "produce_broker_us", "consume_rec_s", "consume_client_us", "consume_broker_us",
           "rss_mb", "open_files", "stop_s")


def _replicated(admin, partitions: int, deadline: float) -> Counter:
    """Wait (bounded, every 0.1 s) until every partition has a leader and 3
    in-sync replicas; the count of partitions each broker leads."""
    for _ in range(int(max(deadline - time.monotonic(), 0) / 0.1) + 2):
        parts = admin.describe_cluster([TOPIC]).partitions
        if len(parts) == partitions and all(q.leader >= 0 and len(q.isr) == 3 for q in parts):
            return Counter(q.leader for q in parts)
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise TimeoutError(f"{TOPIC}: not every partition led and fully in sync within the case's bound")


def run_rf3_case(workdir: str, partitions: int, records: int, bound: float, log) -> dict:
    """etcd + 3 fresh brokers: create (RF=3), produce, consume, idle figures, stop."""
    from bench.cluster.procs import Setup
    from logbroker import Admin
    from logbroker.protocol import messages as m
    from tests.support.bombs import Pinger
    from tests.support.fixtures import RawConn

    setup = Setup("cluster3", os.path.join(workdir, f"rf3-p{partitions}")).start(60)
    out: dict = {"case": "rf3", "partitions": partitions, "flush": "fsync", "replication": 3,
                 "start_s": setup.start_s, "pids": setup.pids()}
    try:
        b, pids = setup.bootstrap, [br.pid for br in setup.brokers.values()]
        deadline = time.monotonic() + bound
        conn = RawConn(setup.brokers[1].port)  # another client's Metadata round trips meanwhile
        try:
            with Pinger(lambda: conn.call(m.Metadata(topics=()), 60)) as ping, \
                    Admin(b, request_timeout_ms=600_000) as admin:
                t0 = time.perf_counter()
                admin.create_topic(TOPIC, partitions, replication_factor=3)
                out["create_s"] = time.perf_counter() - t0
                leaders = _replicated(admin, partitions, deadline)
                out["isr_s"] = time.perf_counter() - t0
        finally:
            conn.close()
        out["create_worst_rtt_ms"] = max(ping.rtts, default=0.0) * 1000
        out["leaders"] = {str(i): leaders.get(i, 0) for i in setup.brokers}
        log(f"{partitions} partitions RF=3 on 3 brokers: create {out['create_s']:.2f} s, "
            f"all in sync after {out['isr_s']:.2f} s, leaders per broker {out['leaders']}")
        wall, own, _, brk = timed_produce(b, partitions, records, deadline, bound, pids)
        out.update(produce_rec_s=records / wall, produce_client_us=own / records * 1e6,
                   produce_broker_us=brk / records * 1e6)
        wall, own, brk, _ = timed(lambda: consume(b, partitions, records, deadline), pids)
        out.update(consume_rec_s=records / wall, consume_client_us=own / records * 1e6,
                   consume_broker_us=brk / records * 1e6)
        heavy = max(setup.brokers, key=lambda i: leaders.get(i, 0))
        pid = setup.brokers[heavy].pid
        out.update(heavy_broker=heavy, rss_mb=status_kib(pid, "VmRSS") / 1024,
                   open_files=len(os.listdir(f"/proc/{pid}/fd")))
        setup.stop(30)
        out["stop_s"] = setup.stop_s
        out["exit_codes"] = dict(setup.exit_codes)
        log(f"{partitions} partitions RF=3: produce {out['produce_rec_s']:,.0f} rec/s, consume "
            f"{out['consume_rec_s']:,.0f} rec/s, broker {heavy}: RSS {out['rss_mb']:.0f} MB, "
            f"{out['open_files']} files; stop {out['stop_s']:.2f} s")
    finally:
        setup.stop(30)  # again after a failure: only what is still running, by PID
    return out


def etcd_missing() -> "str | None":
    """Why the RF=3 case cannot run here, or None."""
    if shutil.which("etcd") is None:
        return "etcd not installed (tools/install-etcd.sh); --rf3 0 skips the RF=3 row"
    return None
