#!/bin/sh
# Installs Debian's S3 clients, aws-cli, rclone and boto3 (python3-boto3), that the S3 API's end-to-end tests drive unchanged
# (test/s3api/*, DESIGN.md D18), when missing. Debian's aws-cli is /usr/bin/aws: another `aws` earlier
# on PATH (a pyenv shim) is not the one the tests use. CI and the test support both call this
# (scripts/lib/apt.sh).
# Usage: sh scripts/s3-clients.sh install | install-boto3 (Debian's python3-boto3)
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
install-boto3)
  # Debian's boto3, for the S3 API's client tests when no python3 on PATH has one.
  have_all() {
    /usr/bin/python3 -c "import boto3" 2>/dev/null
  }
  . "$(dirname "$0")/lib/apt.sh"
  apt_install s3-clients-boto3 "python3-boto3"
  ;;
*)
  echo "usage: sh scripts/s3-clients.sh install|install-boto3" >&2
  exit 2
  ;;
esac
