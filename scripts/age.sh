#!/bin/sh
# Installs Debian's `age` CLI, the reference the SDK's age v1 encryption is checked against both ways
# (test/sdk/age.test.ts, DESIGN.md D20), when missing. CI and the test support both call this, so a
# fresh machine works either way (scripts/lib/apt.sh). libsodium23 too: the command line seals and
# opens the payload with the system's libsodium where it loads (src/sdk/aead-native.ts), and the
# tests check that path (Debian installs it with vim, but a slim machine may lack it).
# Usage: sh scripts/age.sh install
set -eu
PACKAGES="age libsodium23"

have_all() {
  command -v age >/dev/null 2>&1 && command -v age-keygen >/dev/null 2>&1 && { ldconfig -p 2>/dev/null || /sbin/ldconfig -p; } | grep -q 'libsodium\.so\.23 '
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install age "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/age.sh install" >&2
  exit 2
  ;;
esac
