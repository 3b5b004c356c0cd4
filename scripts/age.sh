#!/bin/sh
# Installs Debian's `age` CLI, the reference the SDK's age v1 encryption is checked against both ways
# (test/sdk/age.test.ts, DESIGN.md D20), when missing. CI and the test support both call this, so a
# fresh machine works either way (scripts/lib/apt.sh). libsodium23 too: the command line seals and
# opens the payload with the system's libsodium where it loads (src/sdk/aead-native.ts), and the
# tests check that path (Debian installs it with vim, but a slim machine may lack it). OpenSSL's
# libcrypto 3 too: the SDK on Bun and the command line prefer its ChaCha20-Poly1305 to libsodium's
# (aead-native.ts), and the package test expects it. Debian 13 renamed the package libssl3t64.
# Usage: sh scripts/age.sh install
set -eu
if apt-cache show libssl3t64 >/dev/null 2>&1; then SSL=libssl3t64; else SSL=libssl3; fi
PACKAGES="age libsodium23 $SSL"

have_all() {
  libs=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p; })
  command -v age >/dev/null 2>&1 && command -v age-keygen >/dev/null 2>&1 &&
    printf '%s\n' "$libs" | grep -q 'libsodium\.so\.23 ' && printf '%s\n' "$libs" | grep -q 'libcrypto\.so\.3 '
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
