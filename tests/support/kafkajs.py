"""KafkaJS (npm, pinned in tests/js/package.json) run by node against a broker.

``run_kafkajs(body, brokers=[...])`` runs ``body``, the inside of an async
function with ``kafka`` (a ``Kafka`` client for ``brokers``), ``K`` (the
kafkajs module), ``args`` (the JSON-able ``args`` given) and ``out(value)``
in scope, and returns what ``out`` was given last (a JSON value). A thrown
error fails the run with node's stderr. Skips when node or KafkaJS is
missing, or fails with LOGBROKER_NODE_REQUIRED=1 (CI).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from tests.support.fixtures import missing, require_tool

JS_DIR = pathlib.Path(__file__).resolve().parents[1] / "js"
MODULES = JS_DIR / "node_modules"

_PRELUDE = """
const K = require('kafkajs');
const args = JSON.parse(process.env.LB_ARGS);
let _out = null;
const out = (v) => { _out = v; };
const kafka = new K.Kafka({
  clientId: 'logbroker-test', brokers: args.brokers, logLevel: K.logLevel[args.logLevel],
  retry: { retries: args.retries, initialRetryTime: 100, maxRetryTime: 1000 },
  connectionTimeout: 5000, requestTimeout: 15000, ...(args.client || {}),
});
(async () => {
"""

_CODA = """
})().then(() => { process.stdout.write('\\n@@OUT ' + JSON.stringify(_out) + '\\n'); process.exit(0); },
          (e) => { console.error('@@ERROR', e && e.name, e && e.message, e && e.type,
                                  e && e.stack); process.exit(3); });
"""


def node_path() -> str:
    """node on PATH with KafkaJS installed; skips (or fails when required) otherwise."""
    node = require_tool("node", "LOGBROKER_NODE_REQUIRED", "tools/install-kafkajs.sh")
    if not (MODULES / "kafkajs" / "package.json").exists():
        missing("KafkaJS not installed: run 'bash tools/install-kafkajs.sh' (make test does)",
                "LOGBROKER_NODE_REQUIRED")
    return node


def run_kafkajs(body: str, brokers: "list[str]", args: "dict | None" = None,
                timeout: float = 60.0, log_level: str = "NOTHING", retries: int = 3,
                client: "dict | None" = None):
    """Run ``body`` (JavaScript, see the module doc) and return its ``out`` value.

    ``client``: extra options of the ``Kafka`` constructor (ssl, sasl, ...).
    Raises AssertionError with node's stderr when the script fails.
    """
    node = node_path()
    payload = dict(args or {}, brokers=brokers, logLevel=log_level, retries=retries,
                   client=client or {})
    env = dict(os.environ, NODE_PATH=str(MODULES), LB_ARGS=json.dumps(payload))
    done = subprocess.run([node, "-e", _PRELUDE + body + _CODA], env=env, text=True,
                          capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"kafkajs failed (rc {done.returncode}):\n{done.stderr[-4000:]}"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("@@OUT "):
            return json.loads(line[len("@@OUT "):])
    raise AssertionError(f"kafkajs printed no result:\n{done.stdout[-2000:]}")
