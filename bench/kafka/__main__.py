"""Kafka listener: librdkafka beside our Python clients (issue 15, "Bench"):
W1 and W2 produced and consumed by confluent-kafka (librdkafka, C) through
the broker's Kafka listener and by logbroker's own Python clients through
our listener, the same broker build, alternating rounds, medians.

    python -m bench.kafka                # 3 rounds of each client, ~2 minutes
    python -m bench.kafka --rounds 5
    python -m bench.kafka --quick --json # smoke test: tiny counts, one round each

Each round is a bench.broker run (bench/broker/phases.py, its broker and
worker process machinery) restricted to W1 and W2: a fresh ``logbroker
serve --kafka-port 0`` (``--port 0``, flush "fsync": fsync before every
ack, a temporary data dir under ``--dir``) and, one client process at a
time, **W1** (200,000 records of 1 KiB) and **W2** (1,000,000 records of
100 B), 16-byte keys (1,024 distinct), one partition, acks=all, linger 5 ms,
batch 1 MiB, idempotent, no compression: produced until every record is
acknowledged, then consumed from offset 0 until every record came (counts,
bytes and last offsets checked). Client (a) is ``logbroker.Producer`` /
``logbroker.Consumer`` on our listener (bench/broker/worker.py), client (b)
confluent-kafka's ``Producer`` / ``Consumer`` (``assign`` at offset 0) on
the Kafka listener (bench/kafka/worker.py), client (b') the same with
delivery reports of failures only (no Python callback per record; the
count checked against the high watermark). Rounds go a, b, b', a, ...

Before the rounds, the machine's limit as bench/peers measures it
(bench/peers/limits.py: sequential writes with fdatasync per 64 KiB and per
1 MiB, 4 KiB append + fdatasync, loopback TCP), turned into the records/s
W1 and W2 would reach if that were the only cost. Reported per phase and
client: records/s, MB/s, broker CPU s, client CPU s (median, min-max), the
ratios (b)/(a) and (b')/(a), and the target: W2 produce >= 1.5x (a). Every loop is
bounded by a count and a time limit; every process is stopped by its PID;
the work dir is removed.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from unittest import mock

from bench.broker import server
from bench.broker.phases import QUICK, Params, Run
from bench.broker.report import calibration, summarize
from bench.broker.server import BrokerServer
from bench.common import harness
from bench.common.environment import environment
from bench.common.procs import spawn
from bench.peers import limits
from logbroker.cli.serve import KAFKA_READY

# (a) our clients on our listener; (b) confluent-kafka on the Kafka listener, a delivery callback per
# record; (b') the same with delivery reports of failures only (producer; its consume is (b)'s)
CLIENTS = ("python", "kafka", "kafka-lean")
LABELS = {"python": "(a) logbroker Python", "kafka": "(b) confluent-kafka",
          "kafka-lean": "(b') confluent-kafka, error reports only"}
PHASES = ("W1.produce", "W1.consume", "W2.produce", "W2.consume")
TARGET = ("W2.produce", 1.5)
METRICS = (("records_per_s", "records/s", 0), ("mb_per_s", "MB/s", 1), ("seconds", "seconds", 2),
           ("broker_cpu_s", "broker CPU s", 2), ("broker_cpu_us_per_record", "broker CPU µs/record", 2),
           ("client_cpu_s", "client CPU s", 2), ("other_cpu_share", "other procs, cores", 2))


class KafkaServer(BrokerServer):
    """``logbroker serve ... --kafka-port 0``; knows its Kafka address."""

    def __init__(self, data_dir: str) -> None:
        super().__init__(data_dir, "fsync", extra_args=["--kafka-port", "0"])
        self.kafka_bootstrap = ""

    def start(self, timeout: float = 30.0) -> KafkaServer:
        super().start(timeout)
        line = ""
        for _ in range(4):  # optional lines (metrics, console), then Kafka's
            line = self._next_line(timeout)
            if line.startswith(KAFKA_READY):
                self.kafka_bootstrap = line[len(KAFKA_READY):].strip()
                break
        if not self.kafka_bootstrap.startswith("127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"no Kafka listener on 127.0.0.1 ({line!r}); log:\n{self.log()[-2000:]}")
        return self

    def _next_line(self, timeout: float) -> str:
        """The next stdout line, within ``timeout`` s. Not read_line: the ready
        line's readline may have buffered this one already, and a selector on
        the pipe would not see it; a thread's readline does."""
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return box[0] if box else ""


def spawn_kafka_worker(args: list, **kwargs):
    """bench.broker's ``spawn`` with ``bench.kafka.worker`` (its modes plus the
    Kafka ones) in place of ``bench.broker.worker``: the rest of its Worker as is."""
    return spawn(["bench.kafka.worker" if a == "bench.broker.worker" else a for a in args], **kwargs)


class KafkaRun(Run):
    """A bench.broker run (W1, W2) on a broker with the Kafka listener; with
    ``client="kafka"`` its phases run confluent-kafka against that listener."""

    def __init__(self, p: Params, workdir: str, client: str) -> None:
        super().__init__(p, "fsync", workdir, tick=lambda: None, profiler=None)
        self.server = KafkaServer(os.path.join(self.dir, "data"))
        self.client = client

    def phase(self, name: str, spec: dict) -> dict:
        if self.client != "python":
            spec = {**spec, "mode": "kafka_" + spec["mode"], "kafka_bootstrap": self.server.kafka_bootstrap,
                    "reports": "errors" if self.client == "kafka-lean" else "each"}
        with mock.patch.object(server, "spawn", spawn_kafka_worker):  # Worker's lookup, during this phase
            return super().phase(name, spec)


# -- the machine's limit -------------------------------------------------------------------
def machine_limit(workdir: str, quick: bool, log) -> dict:
    """bench/peers' disk and loopback measurements (limits.measure), and what
    they allow W1/W2 (records/s of key + value bytes) if they were the only cost."""
    lim = limits.measure(workdir, quick, log)
    p = Params()
    out = {"measured": lim, "records_per_s": {}}
    for wl, value_attr in (("W1", "w1_value_bytes"), ("W2", "w2_value_bytes")):
        record = getattr(p, value_attr) + p.key_bytes
        out["records_per_s"][wl] = {
            "disk_fdatasync_64k": lim["seq_write_fsync_64k"]["mb_per_s"] * 1e6 / record,
            "disk_fdatasync_1m": lim["seq_write_fsync_1m"]["mb_per_s"] * 1e6 / record,
            "loopback_tcp": lim["tcp_blocking"]["gb_per_s"] * 1e9 / record}
    return out


# -- the run -------------------------------------------------------------------------------
def parse_args(argv):
    ap = harness.parser("kafka", __doc__, "tiny counts, one round of each client (smoke test)")
    ap.add_argument("--rounds", type=int, help="rounds of each client, >= 3 (default 3)")
    ap.add_argument("--no-limits", action="store_true", help="skip the machine's limit")
    args = harness.parse(ap, argv)
    if args.rounds is not None and args.rounds < (1 if args.quick else 3):
        ap.error("--rounds must be >= 3 (>= 1 with --quick)")
    return args


def run(args, workdir: str, err) -> dict:
    p = QUICK if args.quick else Params()
    rounds = args.rounds or (1 if args.quick else 3)
    log = harness.progress_log(err.file)
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "rounds": rounds}
    if not args.no_limits:
        results["limits"] = machine_limit(workdir, args.quick, log)
    runs = []
    for i in range(rounds * len(CLIENTS)):
        client = CLIENTS[i % len(CLIENTS)]
        log(f"round {i // len(CLIENTS) + 1}/{rounds}: {client}")
        one = KafkaRun(p, workdir, client).run(("w1", "w2"))
        one.update(client=client, round=i // len(CLIENTS))
        runs.append(one)
        log("  " + "  ".join(f"{n} {one['phases'][n]['records_per_s']:,.0f}/s" for n in PHASES))
    results["runs"] = runs
    results["summary"] = summarize([{**r, "flush": r["client"]} for r in runs])
    results["calibration_ms"] = calibration(runs)
    med = {c: {n: results["summary"][c][n]["records_per_s"]["median"] for n in PHASES} for c in CLIENTS}
    results["ratios"] = {c: {n: med[c][n] / med["python"][n] for n in PHASES} for c in CLIENTS[1:]}
    phase, want = TARGET
    results["targets"] = [{"target": f"{phase}: {LABELS[c]} / (a) >= {want}x", "client": c,
                           "measured": f"{med[c][phase]:,.0f} vs {med['python'][phase]:,.0f} records/s",
                           "ratio": results["ratios"][c][phase], "met": results["ratios"][c][phase] >= want}
                          for c in CLIENTS[1:]]
    return results


def tables(results: dict) -> list:
    s = results["summary"]
    rows = []
    for name in PHASES:
        for key, label, digits in METRICS:
            cells = [harness.fmt_s(s[c][name][key], digits) for c in CLIENTS]
            a = s["python"][name][key]["median"]
            ratios = [f"{s[c][name][key]['median'] / a:.2f}" if a else "-" for c in CLIENTS[1:]]
            rows.append((name, label, *cells, *ratios))
    out = [harness.table(f"W1/W2, flush fsync, medians (min–max) over {results['rounds']} rounds each",
                         ("phase", "metric", *(LABELS[c] for c in CLIENTS), "(b)/(a)", "(b')/(a)"), rows)]
    if "limits" in results:
        lim = results["limits"]
        rows = [(name, figure) for name, figure in limits.rows(lim["measured"])]
        rows += [(f"{wl}: {what}", f"{v:,.0f} records/s") for wl, per in lim["records_per_s"].items()
                 for what, v in per.items()]
        out.append(harness.table("The machine's limit (bench/peers/limits.py)", ("measure", "figure"), rows,
                                 justify="left"))
    out.append(harness.targets_table(results["targets"], ratio=True))
    return out


def main(argv=None) -> int:
    return harness.main(parse_args(argv), "kafka", run, tables)


if __name__ == "__main__":
    sys.exit(main())
