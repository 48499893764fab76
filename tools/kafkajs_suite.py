#!/usr/bin/env python3
"""KafkaJS's own integration suite against a logbroker cluster: the conformance run.

    python tools/kafkajs_suite.py --suite PATH [--groups admin,producer,consumer,broker]
                                  [--pattern REGEX] [--data-dir DIR] [--json OUT] [--markdown]

PATH is a local copy of github.com/tulios/kafkajs at tag v2.2.4 with its
devDependencies installed (``npm install`` in it; ``--install`` does that).
Nothing of the suite is fetched by this script or committed here.

The suite expects what its docker-compose file sets up: brokers 0, 1 and 2
on localhost, each with a PLAINTEXT listener (9092 / 9095 / 9098), an SSL one
(9093 / 9096 / 9099) and a SASL_SSL one (9094 / 9097 / 9100: PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), users ``test`` / ``testtest`` (PLAIN) and
``testscram`` (``testtestscram=256`` for SCRAM-SHA-256, ``testtestscram=512``
for SCRAM-SHA-512), ``bob`` / ``bobbob`` and ``alice`` / ``alicealice`` (the
ACL specs' principals), auto-created topics of 2 partitions, replication
factor 2, no initial rebalance delay and ACLs enforced only where a binding
matches (``allow_everyone_if_no_acl_found = true``, as the suite's Kafka has
``allow.everyone.if.no.acl.found``; no ``auth_required``, so our own
listener and the brokers' connections to each other stay anonymous, allowed
while no binding names the cluster). This script starts
etcd and three brokers so (tools/cluster.py, data in a temporary directory
unless ``--data-dir``), runs jest on the chosen spec groups with
``KAFKA_VERSION=2.4`` (the suite's default), and prints one row per spec
file: passed, failed, skipped, and how many of the failures are
transactional (the transactions issue's). The suite's one docker use
(scripts/addPartitions.sh runs ``kafka-topics --alter`` in a container) is
answered by a ``docker`` shim on PATH that runs ``logbroker topics alter``.

Exit status: 0 when the run finished (whatever failed), 1 when the cluster
or jest could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import HOST, Cluster, StartError, default_logbroker  # noqa: E402

GROUPS = ("admin", "producer", "consumer", "broker")
BASE = {0: 9092, 1: 9095, 2: 9098}  # the suite's PLAINTEXT ports; SSL +1, SASL_SSL +2
OUR_PORT = 19555  # our protocol's listener of broker 0 (+1, +2)
USERS = (("test", "testtest", "testtest"), ("testscram", "testtestscram=256", "testtestscram=512"),
         ("bob", "bobbob", "bobbob"), ("alice", "alicealice", "alicealice"))
TRANSACTIONAL = re.compile(r"transaction|txn|exactly.once|read_committed|isolation|"
                           r"control (batch|record)|aborted", re.I)

_DOCKER_SHIM = """#!/usr/bin/env bash
# The suite's scripts/addPartitions.sh through logbroker (tools/kafkajs_suite.py).
if [ "$1" = ps ]; then echo logbroker-kafka1; exit 0; fi
if [ "$1" = exec ]; then
  cmd="${@: -1}"
  topic=$(sed -n 's/.*--topic \\([^ ]*\\).*/\\1/p' <<<"$cmd")
  parts=$(sed -n 's/.*--partitions \\([0-9]*\\).*/\\1/p' <<<"$cmd")
  exec "$LOGBROKER" topics alter "$topic" --partitions "$parts" -b "$LOGBROKER_BOOTSTRAP"
fi
echo "docker shim: unsupported: $*" >&2; exit 2
"""


def broker_config(i: int, certs: dict, plaintext_only: bool = False) -> str:
    """Broker ``i``'s TOML: its three Kafka listeners (``plaintext_only``: the
    PLAINTEXT one) and the suite's broker settings."""
    plain, ssl, sasl = BASE[i], BASE[i] + 1, BASE[i] + 2
    common = """
auto_create_topics = true
default_partitions = 2
default_replication_factor = 2
group_initial_rebalance_delay_ms = 0
"""
    if plaintext_only:
        return common + f'kafka_port = {plain}\nkafka_advertised = "localhost:{plain}"\n'
    listeners = "".join(
        f'\n[[kafka_listeners]]\nname = "{name}"\nhost = "{HOST}"\nport = {port}\n'
        f'advertised = "localhost:{port}"\nsecurity = "{name}"\n'
        for name, port in (("PLAINTEXT", plain), ("SSL", ssl), ("SASL_SSL", sasl)))
    return common + f"""
allow_everyone_if_no_acl_found = true
tls_cert = "{certs['cert']}"
tls_key = "{certs['key']}"
tls_ca = "{certs['cert']}"
""" + listeners


def make_certs(where: str) -> dict:
    """A self-signed certificate for ``localhost`` (the suite does not verify it)."""
    cert, key = os.path.join(where, "cert.pem"), os.path.join(where, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return {"cert": cert, "key": key}


def create_users(bootstrap: str, ca: str) -> None:
    """The suite's users, as kafka-configs and its JAAS file make them: one
    credential per mechanism (``testscram`` has a password for each)."""
    from logbroker import Admin

    with Admin(bootstrap, tls_ca=ca) as admin:
        for name, sha256, sha512 in USERS:
            admin.create_user(name, sha256, sha512_password=sha512)


def run_jest(suite: str, pattern: str, out_json: str, env: dict, timeout: float) -> int:
    jest = os.path.join(suite, "node_modules", ".bin", "jest")
    args = [jest, "--ci", "--json", f"--outputFile={out_json}", "--testPathPattern", pattern,
            "--maxWorkers=2", "--forceExit", "--reporters=default"]
    done = subprocess.run(args, cwd=suite, env=env, timeout=timeout)
    return done.returncode


def table(result: dict, suite: str) -> list[dict]:
    """One row per spec file: counts by status; transactional failures apart."""
    rows = []
    for f in result.get("testResults", []):
        name = os.path.relpath(f["name"], suite)
        counts = {"passed": 0, "failed": 0, "skipped": 0, "failed_txn": 0}
        failures = []
        for t in f.get("assertionResults", []):
            status = {"pending": "skipped", "todo": "skipped"}.get(t["status"], t["status"])
            counts[status] = counts.get(status, 0) + 1
            if status == "failed":
                full = t.get("fullName", t.get("title", ""))
                if TRANSACTIONAL.search(full) or TRANSACTIONAL.search(name):
                    counts["failed_txn"] += 1
                failures.append(full)
        if not f.get("assertionResults") and f.get("status") == "failed":
            counts["failed"] += 1  # the file did not load or its setup failed
            failures.append(f"(file) {f.get('message', '')[:200]}")
        rows.append({"spec": name, **counts, "failures": failures})
    return sorted(rows, key=lambda r: r["spec"])


def summary(rows: list[dict]) -> dict:
    out = {}
    for group in GROUPS:
        mine = [r for r in rows if r["spec"].startswith(f"src/{group}/")]
        passed = sum(r["passed"] for r in mine)
        failed = sum(r["failed"] for r in mine)
        txn = sum(r["failed_txn"] for r in mine)
        out[group] = {"passed": passed, "failed": failed, "failed_txn": txn,
                      "skipped": sum(r["skipped"] for r in mine)}
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| spec | passed | failed | of which transactional | skipped |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['spec']} | {r['passed']} | {r['failed']} | {r['failed_txn']} | "
                     f"{r['skipped']} |")
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/kafkajs_suite.py", description=__doc__.split("\n")[0])
    parser.add_argument("--suite", required=True, help="a copy of tulios/kafkajs at v2.2.4")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help="spec groups: " + ",".join(GROUPS))
    parser.add_argument("--pattern", default=None, help="jest --testPathPattern (overrides --groups)")
    parser.add_argument("--data-dir", default=None, help="the cluster's data (default: a temp dir)")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the rows as JSON to OUT")
    parser.add_argument("--markdown", action="store_true", help="print the per-spec table")
    parser.add_argument("--install", action="store_true", help="npm install the suite's devDependencies")
    parser.add_argument("--plaintext-only", action="store_true",
                        help="one PLAINTEXT Kafka listener per broker and no users (the SSL and "
                             "SASL specs then fail)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="jest's time limit (s)")
    args = parser.parse_args(argv)
    suite = os.path.abspath(args.suite)
    if not os.path.exists(os.path.join(suite, "testHelpers", "index.js")):
        parser.error(f"{suite} is not a kafkajs checkout (no testHelpers/index.js)")
    if args.install:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=suite, check=True)
    if not os.path.exists(os.path.join(suite, "node_modules", ".bin", "jest")):
        parser.error("the suite's devDependencies are missing: run with --install")
    groups = [g for g in args.groups.split(",") if g]
    pattern = args.pattern or f"src/({'|'.join(groups)})/"
    work = args.data_dir or tempfile.mkdtemp(prefix="kafkajs-suite-")
    os.makedirs(work, exist_ok=True)
    logbroker = default_logbroker()
    certs = make_certs(work)
    configs = {}
    for i in BASE:
        configs[i] = os.path.join(work, f"broker-{i}.toml")
        with open(configs[i], "w") as f:
            f.write(broker_config(i, certs, args.plaintext_only))
    cluster = Cluster(brokers=3, base_port=OUR_PORT, data_dir=os.path.join(work, "cluster"),
                      etcd_port=12379, etcd_peer_port=12380, first_id=0,
                      extra=lambda i: ["--config", configs[i]])
    shim = os.path.join(work, "bin")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "docker"), "w") as f:
        f.write(_DOCKER_SHIM)
    os.chmod(os.path.join(shim, "docker"), 0o755)
    out_json = os.path.join(work, "jest.json")
    try:
        cluster.start()
        if not args.plaintext_only:
            create_users(cluster.bootstrap, certs["cert"])
        env = dict(os.environ, KAFKA_VERSION="2.4", NODE_ENV="test",
                   KAFKAJS_DEBUG_PROTOCOL_BUFFERS="1", PATH=f"{shim}:{os.environ['PATH']}",
                   LOGBROKER=logbroker, LOGBROKER_BOOTSTRAP=cluster.bootstrap,
                   LOGBROKER_TLS_CA=certs["cert"])  # our listeners speak TLS: the shim's CLI
        began = time.monotonic()
        run_jest(suite, pattern, out_json, env, args.timeout)
        took = time.monotonic() - began
    except (StartError, subprocess.SubprocessError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
    if not os.path.exists(out_json):
        print("error: jest wrote no result", file=sys.stderr)
        return 1
    with open(out_json) as f:
        rows = table(json.load(f), suite)
    totals = summary(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": round(took), "groups": totals, "specs": rows}, f, indent=1)
    if args.markdown:
        print(markdown(rows))
    print(f"\njest took {took:.0f} s")
    for group, t in totals.items():
        ran = t["passed"] + t["failed"]
        if ran:
            print(f"{group:<9} {t['passed']:>4} passed {t['failed']:>4} failed "
                  f"({t['failed_txn']} transactional) {t['skipped']:>4} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
