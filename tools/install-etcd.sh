#!/usr/bin/env bash
# Installs etcd (Debian's etcd-server, v3 API) if `etcd` is not on PATH: the
# metadata store of a logbroker cluster (design.md section 7), used by
# `make cluster` and by the cluster tests, which start their own etcd on free
# loopback ports. Needs root; otherwise says so and exits 0 (the cluster
# tests then skip) unless LOGBROKER_ETCD_REQUIRED=1. Debian's etcd service is
# not started (tools/apt-install.sh), so nothing listens on 2379/2380.
set -euo pipefail
command -v etcd >/dev/null && exit 0
bash "$(dirname "$0")/apt-install.sh" LOGBROKER_ETCD_REQUIRED "$0" etcd-server
if [ "$(id -u)" = 0 ] && ! command -v etcd >/dev/null; then
    echo "etcd-server is installed but there is no etcd on PATH" >&2
    exit 1
fi
