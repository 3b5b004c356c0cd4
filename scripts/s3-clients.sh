#!/bin/sh
# Installs Debian's S3 clients, aws-cli, rclone and boto3 (python3-boto3), that the S3 API's end-to-end tests drive unchanged
# (test/s3api/*, DESIGN.md D18), when missing. Debian's aws-cli is /usr/bin/aws: another `aws` earlier
# on PATH (a pyenv shim) is not the one the tests use. CI and the test support both call this
# (scripts/lib/apt.sh).
# Usage: sh scripts/s3-clients.sh install
set -eu
PACKAGES="awscli rclone python3-boto3"

have_all() {
  [ -x /usr/bin/aws ] && [ -x /usr/bin/rclone ] && [ -f /usr/lib/python3/dist-packages/boto3/__init__.py ]
}

case "${1:-}" in
install)
  . "$(dirname "$0")/lib/apt.sh"
  apt_install s3-clients "$PACKAGES"
  ;;
*)
  echo "usage: sh scripts/s3-clients.sh install" >&2
  exit 2
  ;;
esac
