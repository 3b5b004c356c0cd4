#!/bin/sh
# Installs the Debian packages of a one-node Ceph (mon, OSD, radosgw) for the S3 tests, when
# missing. The tests start and stop the cluster themselves (test/support/ceph.ts); CI and the
# test support both call this, so a fresh machine works either way (scripts/lib/apt.sh).
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
  . "$(dirname "$0")/lib/apt.sh"
  apt_install ceph "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/ceph.sh install" >&2
  exit 2
  ;;
esac
