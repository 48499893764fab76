#!/usr/bin/env bash
# apt-install.sh REQUIRED_VAR SCRIPT PACKAGE...: installs Debian PACKAGEs for
# the install scripts (tools/install-etcd.sh, bench/peers/install-servers.sh),
# which call it with what is missing. Needs root; otherwise says what is
# missing and exits 0 (the tests that need the packages then skip) unless the
# environment variable named REQUIRED_VAR is 1. Services are not started by
# the install (policy-rc.d), so nothing listens on their default ports: the
# bench, the tests and `make cluster` start each server themselves on 127.0.0.1.
set -euo pipefail
required_var=$1 script=$2
shift 2
if [ "$(id -u)" != 0 ]; then
    echo "missing ($*) and not root: run 'sudo $script'" >&2
    [ "${!required_var:-0}" = 1 ] && exit 1
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
fi
trap '[ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
echo "apt-get install $*" >&2
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$@" >/dev/null
