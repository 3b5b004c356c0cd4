#!/bin/sh
# Runs the pinned Bun. A fresh machine has only Node.js and npm, so Bun comes from the npm registry.
# Every path ends in `exec` of Bun itself, so a signal for this script's caller (npm run forwards
# SIGTERM and SIGINT to its child) reaches Bun, not a shell or npx in between (D14).
set -e
BUN_VERSION=1.4.5
if command -v bun >/dev/null 2>&1 && [ "$(bun --version)" = "$BUN_VERSION" ]; then
  exec bun "$@"
fi
# Where the last run found npx's Bun (inside the clone's node_modules, which only its user writes):
# asking npx costs a second or more of CPU, on every `./stowage …` command.
HERE=$(dirname "$0")
CACHE="$HERE/../node_modules/.cache/stowage-bun-$BUN_VERSION"
if [ -r "$CACHE" ]; then
  BIN_DIR=$(cat "$CACHE")
  if [ -x "$BIN_DIR/bun" ] && [ "$("$BIN_DIR/bun" --version 2>/dev/null)" = "$BUN_VERSION" ]; then
    PATH="$BIN_DIR:$PATH"
    export PATH
    exec "$BIN_DIR/bun" "$@"
  fi
fi
# npx runs its command under `sh -c`, which dies of a SIGTERM and leaves Bun running: ask npx only
# where its Bun is, then run that Bun directly.
BUN=$(npx --yes "bun@$BUN_VERSION" -e 'process.stdout.write(process.execPath)')
if [ ! -x "$BUN" ]; then
  echo "scripts/bun.sh: npx did not provide bun@$BUN_VERSION (got '$BUN')" >&2
  exit 1
fi
# Scripts that Bun runs (`bun run test:all` calls `bun …`) find this same Bun first on PATH. npx's
# Bun is `bun.exe`; its package's .bin folder has the `bun` link.
BIN_DIR=$(cd "$(dirname "$BUN")/../../.bin" 2>/dev/null && pwd || true)
if [ -z "$BIN_DIR" ] || [ ! -x "$BIN_DIR/bun" ]; then
  BIN_DIR="${TMPDIR:-/tmp}/stowage-bun-$BUN_VERSION-$(id -u)"
  mkdir -p "$BIN_DIR" && ln -sf "$BUN" "$BIN_DIR/bun"
fi
# Remembered only once the clone has its node_modules (a fresh clone's first `npm run serve`
# installs them): nothing is made in a clone that has none.
if [ -d "$HERE/../node_modules" ]; then
  mkdir -p "$HERE/../node_modules/.cache" && printf '%s\n' "$BIN_DIR" > "$CACHE.$$" && mv -f "$CACHE.$$" "$CACHE" || true
fi
PATH="$BIN_DIR:$PATH"
export PATH
exec "$BUN" "$@"
