#!/usr/bin/env bash
# Installs Debian's kcat (the Kafka command-line client, librdkafka) if `kcat`
# is not on PATH: tests/kafka/test_listener_clients.py runs it against the
# broker's Kafka listener. Needs root; otherwise says so and exits 0 (the kcat
# tests then skip) unless LOGBROKER_KCAT_REQUIRED=1.
set -euo pipefail
command -v kcat >/dev/null && exit 0
bash "$(dirname "$0")/apt-install.sh" LOGBROKER_KCAT_REQUIRED "$0" kcat
if [ "$(id -u)" = 0 ] && ! command -v kcat >/dev/null; then
    echo "kcat is installed but there is no kcat on PATH" >&2
    exit 1
fi
