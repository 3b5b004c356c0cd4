#!/bin/sh
# Installs Debian's libsecp256k1 (Bitcoin Core's C library, with its recovery module), when
# missing: every signed request, login, grant and voucher recovers its signer through it where it
# loads (src/identity/secp256k1-native.ts, ≈ 10× @noble's pure JS), and the tests check that path
# (test/identity). CI and the test support both call this, so a fresh machine works either way
# (scripts/lib/apt.sh). Debian 12 ships the library as libsecp256k1-1 (libsecp256k1.so.1),
# Debian 13 as libsecp256k1-2 (libsecp256k1.so.2): whichever this machine's apt knows.
# Usage: sh scripts/secp256k1.sh install
set -eu
if apt-cache show libsecp256k1-2 >/dev/null 2>&1; then PACKAGES=libsecp256k1-2; else PACKAGES=libsecp256k1-1; fi

have_all() {
  { ldconfig -p 2>/dev/null || /sbin/ldconfig -p; } | grep -q 'libsecp256k1\.so\.[12] '
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install secp256k1 "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/secp256k1.sh install" >&2
  exit 2
  ;;
esac
