#!/usr/bin/env bash
# `planwire mcp` driven by the official MCP SDKs: the TypeScript SDK (@modelcontextprotocol/sdk,
# pinned in package.json, with ajv for the 2020-12 schema checks) and the Python SDK (mcp, pinned
# in requirements.txt). Installs each once into <repo>/.cache/ (idempotent: mcp-sdk/ for npm,
# mcp-py/ a venv), builds planwire, then runs node's test runner on *.test.mjs and pytest.
#
#   tests/mcp/run.sh            # PLANWIRE_BIN overrides the binary (default target/debug/planwire)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
NODE_CACHE="$REPO/.cache/mcp-sdk"
PY_CACHE="$REPO/.cache/mcp-py"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

install_node() {
  if ! cmp -s "$HERE/package.json" "$NODE_CACHE/package.json" || [[ ! -d "$NODE_CACHE/node_modules/@modelcontextprotocol/sdk" ]]; then
    echo "[mcp] installing the npm packages of tests/mcp/package.json into $NODE_CACHE"
    rm -rf "$NODE_CACHE"; mkdir -p "$NODE_CACHE"
    cp "$HERE/package.json" "$NODE_CACHE/package.json"
    (cd "$NODE_CACHE" && npm install --no-save --no-package-lock --loglevel=error </dev/null)
  fi
}

install_python() {
  if ! cmp -s "$HERE/requirements.txt" "$PY_CACHE/requirements.txt" || [[ ! -x "$PY_CACHE/bin/python" ]]; then
    echo "[mcp] installing tests/mcp/requirements.txt into the venv $PY_CACHE"
    rm -rf "$PY_CACHE"
    python3 -m venv "$PY_CACHE"
    "$PY_CACHE/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements.txt" </dev/null
    cp "$HERE/requirements.txt" "$PY_CACHE/requirements.txt"
  fi
}

# Both installs mostly wait on their registries: side by side, a fresh one takes about a minute.
install_node &
node_install=$!
install_python
wait "$node_install"
# ESM resolves packages next to the importing file: link the cached install in (gitignored).
ln -sfn "$NODE_CACHE/node_modules" "$HERE/node_modules"

if [[ -z "${PLANWIRE_BIN:-}" ]]; then
  (cd "$REPO" && cargo build -q -p planwire)
  export PLANWIRE_BIN="$REPO/target/debug/planwire"
fi
cd "$HERE"
status=0
node --test --test-concurrency=1 ./*.test.mjs || status=1
"$PY_CACHE/bin/python" -m pytest -q -p no:cacheprovider test_python_sdk.py || status=1
exit "$status"
