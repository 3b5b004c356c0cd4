# Sourced by scripts/ceph.sh and scripts/postgres.sh: installs Debian packages for the tests when the
# caller's `have_all` says they are missing. A lock serialises concurrent callers (dpkg allows one at
# a time; a second test process would otherwise fail on its lock), and whoever waited looks again.
# Usage (after defining have_all): apt_install NAME "PACKAGES"
apt_install() {
  name=$1
  packages=$2
  have_all && return 0
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
      echo "scripts/$name.sh: $name is not installed and this user cannot install it; as root run: apt-get install -y --no-install-recommends $packages" >&2
      return 1
    fi
  else SUDO=""; fi
  exec 9>"/tmp/stowage-$name-install.lock"
  flock 9
  have_all && return 0 # another process installed it while this one waited
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $packages
}
