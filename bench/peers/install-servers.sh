#!/usr/bin/env bash
# Installs the peer servers of the benchmark (Debian packages) if missing:
# redis-server, nats-server, rabbitmq-server. Needs root; otherwise says what
# is missing and exits 0 (the peers smoke test then skips) unless
# LOGBROKER_PEERS_REQUIRED=1. Services are not started by the install
# (policy-rc.d), so nothing listens on their default ports: the bench starts
# each server itself on 127.0.0.1.
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v nats-server >/dev/null || missing+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "peer servers missing (${missing[*]}) and not root: run 'sudo $0'" >&2
    [ "${LOGBROKER_PEERS_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
fi
trap '[ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
echo "apt-get install ${missing[*]}" >&2
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
