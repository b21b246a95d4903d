#!/usr/bin/env bash
# `planwire acp` driven by the official ACP TypeScript SDK (@agentclientprotocol/sdk, pinned in
# package.json). Installs the SDK once into <repo>/.cache/acp-sdk/ (idempotent), builds planwire,
# then runs every tests/acp/*.test.mjs with node's test runner.
#
#   tests/acp/run.sh            # PLANWIRE_BIN overrides the binary (default target/debug/planwire)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="$REPO/.cache/acp-sdk"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

want="$(node -e 'process.stdout.write(require(process.argv[1]).dependencies["@agentclientprotocol/sdk"])' "$HERE/package.json")"
have="$(node -e 'try{process.stdout.write(require(process.argv[1]).version)}catch{}' \
  "$CACHE/node_modules/@agentclientprotocol/sdk/package.json" 2>/dev/null || true)"
if [[ "$have" != "$want" ]]; then
  echo "[acp] installing @agentclientprotocol/sdk@$want into $CACHE"
  rm -rf "$CACHE"; mkdir -p "$CACHE"
  cp "$HERE/package.json" "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-save --no-package-lock --loglevel=error </dev/null)
fi
# ESM resolves packages next to the importing file: link the cached install in (gitignored).
ln -sfn "$CACHE/node_modules" "$HERE/node_modules"

if [[ -z "${PLANWIRE_BIN:-}" ]]; then
  (cd "$REPO" && cargo build -q -p planwire)
  export PLANWIRE_BIN="$REPO/target/debug/planwire"
fi
cd "$HERE"
exec node --test --test-concurrency=1 ./*.test.mjs
