#!/bin/sh
# Runs the pinned Bun. A fresh machine has only Node.js and npm, so Bun comes from the npm registry.
set -e
BUN_VERSION=1.4.5
if command -v bun >/dev/null 2>&1 && [ "$(bun --version)" = "$BUN_VERSION" ]; then
  exec bun "$@"
fi
exec npx --yes "bun@$BUN_VERSION" "$@"
