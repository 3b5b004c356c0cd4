#!/bin/sh
# Installs Debian's Chromium, the browser the console's test drives through playwright-core
# (test/console/browser.test.ts, DESIGN.md D19), when missing. CI and the test support both call
# this, so a fresh machine works either way (scripts/lib/apt.sh).
# Usage: sh scripts/chromium.sh install | path
set -eu
PACKAGES="chromium"

have_all() {
  command -v chromium >/dev/null 2>&1
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install chromium "$PACKAGES"
  ;;
path)
  command -v chromium
  ;;
*)
  echo "usage: sh scripts/chromium.sh install | path" >&2
  exit 2
  ;;
esac
