#!/bin/sh
# Installs the Debian packages of a one-node Ceph (mon, OSD, radosgw) for the S3 tests, when
# missing. The tests start and stop the cluster themselves (test/support/ceph.ts); CI and the
# test support both call this, so a fresh machine works either way. A lock serialises concurrent
# callers (dpkg allows one at a time; a second test process would otherwise fail on its lock).
# Usage: sh scripts/ceph.sh install
set -eu
PACKAGES="ceph-mon ceph-osd radosgw ceph-common"

have_all() {
  for bin in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
    command -v "$bin" >/dev/null 2>&1 || return 1
  done
}

case "${1:-}" in
install)
  have_all && exit 0
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
      echo "scripts/ceph.sh: Ceph is not installed and this user cannot install it; as root run: apt-get install -y --no-install-recommends $PACKAGES" >&2
      exit 1
    fi
  else SUDO=""; fi
  exec 9>/tmp/stowage-ceph-install.lock
  flock 9
  have_all && exit 0 # another process installed it while this one waited
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $PACKAGES
  ;;
*)
  echo "usage: sh scripts/ceph.sh install" >&2
  exit 2
  ;;
esac
