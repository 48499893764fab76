#!/usr/bin/env bash
# Installs KafkaJS (tests/js/package.json, pinned by its lock file) into
# tests/js/node_modules with the machine's Node.js and npm: the Kafka
# listener's tests run it by node (tests/support/kafkajs.py). Without node or
# npm it says so and exits 0 (those tests then skip) unless
# LOGBROKER_NODE_REQUIRED=1.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node/npm not found: the KafkaJS tests will skip" >&2
    [ "${LOGBROKER_NODE_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi
[ -f node_modules/kafkajs/package.json ] && exit 0
npm ci --no-audit --no-fund --loglevel=error
