#!/usr/bin/env bash
# Installs the peer servers of the benchmark (Debian packages) if missing:
# redis-server, nats-server, rabbitmq-server. Needs root; otherwise says what
# is missing and exits 0 (the peers smoke test then skips) unless
# LOGBROKER_PEERS_REQUIRED=1. Services are not started by the install
# (policy-rc.d, in tools/apt-install.sh), so nothing listens on their default
# ports: the bench starts each server itself on 127.0.0.1.
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v nats-server >/dev/null || missing+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
[ ${#missing[@]} -eq 0 ] && exit 0
bash "$(dirname "$0")/../../tools/apt-install.sh" LOGBROKER_PEERS_REQUIRED "$0" "${missing[@]}"
