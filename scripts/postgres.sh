#!/bin/sh
# Installs Debian's PostgreSQL (server, client and contrib's `unaccent`) for the tests that run on
# PostgreSQL (DESIGN.md D16), when missing. The tests start and stop their own server
# (test/support/postgres.ts) as the `postgres` OS user on a temp folder; CI and the test support
# both call this, so a fresh machine works either way. A lock serialises concurrent callers (dpkg
# allows one at a time). The binaries land in /usr/lib/postgresql/15/bin, not on PATH.
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
  have_all && exit 0
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
      echo "scripts/postgres.sh: PostgreSQL is not installed and this user cannot install it; as root run: apt-get install -y --no-install-recommends $PACKAGES" >&2
      exit 1
    fi
  else SUDO=""; fi
  exec 9>/tmp/stowage-postgres-install.lock
  flock 9
  have_all && exit 0 # another process installed it while this one waited
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $PACKAGES
  ;;
*)
  echo "usage: sh scripts/postgres.sh install" >&2
  exit 2
  ;;
esac
