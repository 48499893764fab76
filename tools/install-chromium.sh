#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver if `chromium` or
# `chromedriver` is not on PATH: the headless browser of the web console's
# tests (tests/console/test_browser.py, driven by selenium through
# /usr/bin/chromedriver). Needs root; otherwise says so and exits 0 (the
# browser tests then skip) unless LOGBROKER_BROWSER_REQUIRED=1.
set -euo pipefail
command -v chromium >/dev/null && command -v chromedriver >/dev/null && exit 0
bash "$(dirname "$0")/apt-install.sh" LOGBROKER_BROWSER_REQUIRED "$0" chromium chromium-driver
if [ "$(id -u)" = 0 ] && ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
    echo "chromium and chromium-driver are installed but chromium or chromedriver is not on PATH" >&2
    exit 1
fi
