#!/bin/sh
# Installs Debian's PostgreSQL (server, client and contrib's `unaccent`) for the tests that run on
# PostgreSQL (DESIGN.md D16), when missing. The tests start and stop their own server
# (test/support/postgres.ts) as the `postgres` OS user on a temp folder; CI and the test support
# both call this, so a fresh machine works either way (scripts/lib/apt.sh). The binaries land in /usr/lib/postgresql/15/bin, not on PATH.
# Usage: sh scripts/postgres.sh install
set -eu
PACKAGES="postgresql"
BIN=/usr/lib/postgresql/15/bin

have_all() {
  for bin in initdb postgres pg_ctl; do
    [ -x "$BIN/$bin" ] || return 1
  done
  [ -f /usr/share/postgresql/15/extension/unaccent.control ] || return 1
  id -u postgres >/dev/null 2>&1
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install postgres "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/postgres.sh install" >&2
  exit 2
  ;;
esac
