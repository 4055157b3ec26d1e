#!/usr/bin/env bash
# Debian's Chromium, for the test that opens plait's HTML report headless (through playwright,
# which drives the system's browser: it cannot download its own here). Installed once per
# machine, when this user may run apt-get (root); otherwise the test says how to install it.
set -euo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "setup: chromium is not installed (apt-get install chromium as root); the report's browser test will be skipped" >&2
  exit 0
fi
log=$(mktemp)
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: apt-get install chromium failed (log above)" >&2
  exit 1
fi
rm -f "$log"
