#!/bin/sh
# Installs Debian's python3-prometheus-client, whose text-format parser (the Prometheus project's
# own Python client) checks the gateway's GET /metrics exposition in test/metrics (DESIGN.md D19),
# when missing. CI and the test support both call this, so a fresh machine works either way
# (scripts/lib/apt.sh).
# Usage: sh scripts/prometheus-parser.sh install
set -eu
PACKAGES="python3-prometheus-client"

have_all() {
  /usr/bin/python3 -c "import prometheus_client.parser" >/dev/null 2>&1
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install prometheus-parser "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/prometheus-parser.sh install" >&2
  exit 2
  ;;
esac
