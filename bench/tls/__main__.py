"""TLS and TLS+SCRAM vs plaintext (issue 14): bench.broker's W1 on a broker
without security, with TLS, and with TLS plus SCRAM-SHA-256 authentication,
alternated rounds, medians.

    python -m bench.tls                  # 5 rounds each, ~3-4 minutes
    python -m bench.tls --rounds 3 --records 100000

Each round is one ``bench.broker`` run (phases.py) restricted to W1: a fresh
``logbroker serve`` (``--port 0``, a temporary data dir under ``--dir``,
flush "fsync") and, in separate client processes (bench/broker/worker.py),
**W1 produce** (200,000 records of 1 KiB, 16-byte keys, acks="all",
linger_ms=5, batch_size=1 MiB, until every record is acknowledged) then
**W1 consume** (``assign`` + ``seek_to_beginning``, ``poll`` until every
record came). Plaintext first, then alternating. The TLS rounds give the
broker ``--tls-cert/--tls-key`` (an ECDSA P-256 certificate for 127.0.0.1
made with trustme, TLS 1.3, the default ciphers) and the clients
``tls_ca=``; there fetch answers are read from the segments and written
through the TLS transport instead of ``sendfile``. The TLS+SCRAM rounds add
``--auth-required``: the user ``bench`` is created once the broker is up
(the loopback bootstrap rule), and every client connection authenticates
with SCRAM-SHA-256 (4096 iterations) before its first request; ACLs are
not enforced (no super users), as on a broker with authentication only.
Rounds go plain, tls, tls+scram, plain, ... Reported: records/s, the
broker's and the client's CPU seconds per phase, and each variant's ratio
to plaintext of the medians. Every process is stopped by PID; the work
dir is removed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import tempfile

from bench.broker.phases import Params, Run
from bench.broker.server import BrokerServer

PHASES = ("W1.produce", "W1.consume")
VARIANTS = ("plain", "tls", "tls+scram")
USER, PASSWORD = "bench", "bench-password"


def make_certs(directory: str) -> tuple[list, dict]:
    """The broker's TLS flags and the clients' TLS keywords (trustme: the dev extra)."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    paths = {name: os.path.join(directory, name) for name in ("ca.pem", "cert.pem", "key.pem")}
    ca.cert_pem.write_to_path(paths["ca.pem"])
    leaf.cert_chain_pems[0].write_to_path(paths["cert.pem"])
    leaf.private_key_pem.write_to_path(paths["key.pem"])
    return (["--tls-cert", paths["cert.pem"], "--tls-key", paths["key.pem"]],
            {"tls_ca": paths["ca.pem"]})


class ScramServer(BrokerServer):
    """A broker with ``--auth-required`` that has the user ``bench`` once started."""

    def __init__(self, data_dir: str, flags: list, client: dict) -> None:
        super().__init__(data_dir, "fsync", extra_args=[*flags, "--auth-required"])
        self.client = client

    def start(self, timeout: float = 30.0) -> "BrokerServer":
        from logbroker.client import Admin

        super().start(timeout)
        with Admin(self.bootstrap, **self.client) as admin:
            admin.create_user(USER, PASSWORD)
        return self


class TlsRun(Run):
    """A bench.broker run whose broker and clients speak TLS (and SCRAM)."""

    def __init__(self, p: Params, workdir: str, flags: list, client: dict, scram: bool) -> None:
        super().__init__(p, "fsync", workdir, tick=lambda: None, profiler=None)
        data = os.path.join(self.dir, "data")
        if scram:
            self.server = ScramServer(data, flags, client)
            client = {**client, "username": USER, "password": PASSWORD}
        else:
            self.server = BrokerServer(data, "fsync", extra_args=flags)
        self.client = client

    def phase(self, name: str, spec: dict) -> dict:
        return super().phase(name, {**spec, "tls": self.client})


def one_round(variant: str, p: Params, workdir: str, certs: tuple) -> dict:
    if variant == "plain":
        run = Run(p, "fsync", workdir, lambda: None, None)
    else:
        run = TlsRun(p, workdir, *certs, scram=variant == "tls+scram")
    phases = run.run(("w1",))["phases"]
    return {name: {"records_s": phases[name]["records_per_s"],
                   "broker_cpu_s": phases[name]["broker"]["cpu_s"],
                   "client_cpu_s": phases[name]["cpu_s"]} for name in PHASES}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.tls", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each (default 5)")
    ap.add_argument("--records", type=int, default=Params.w1_records)
    ap.add_argument("--dir", default=os.getcwd(), help="where the work dir goes")
    args = ap.parse_args(argv)
    p = dataclasses.replace(Params(), w1_records=args.records)
    workdir = tempfile.mkdtemp(prefix="tls-ab-", dir=args.dir)
    results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    try:
        certs = make_certs(workdir)
        for i in range(args.rounds * len(VARIANTS)):
            variant = VARIANTS[i % len(VARIANTS)]
            r = one_round(variant, p, workdir, certs)
            results[variant].append(r)
            print(f"round {i // len(VARIANTS) + 1} {variant:9}: " + "  ".join(
                f"{n} {r[n]['records_s']:,.0f} records/s (broker CPU {r[n]['broker_cpu_s']:.2f} s, "
                f"client CPU {r[n]['client_cpu_s']:.2f} s)" for n in PHASES), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nmedians over {args.rounds} rounds each (W1: {p.w1_records:,} x 1 KiB, acks=all, "
          "flush fsync)")
    for name in PHASES:
        for key, label in (("records_s", "records/s"), ("broker_cpu_s", "broker CPU s"),
                           ("client_cpu_s", "client CPU s")):
            vals = {v: [r[name][key] for r in rs] for v, rs in results.items()}
            med = {v: statistics.median(xs) for v, xs in vals.items()}
            cells = [f"{v} {med[v]:,.2f} ({min(vals[v]):,.3g}-{max(vals[v]):,.3g})"
                     for v in VARIANTS]
            ratios = [f"{v}/plain {med[v] / med['plain'] if med['plain'] else float('nan'):.3f}"
                      for v in VARIANTS[1:]]
            print(f"  {name:10} {label:13} " + "  ".join(cells + ratios))


if __name__ == "__main__":
    main()
