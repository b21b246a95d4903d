#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, idempotently:
#   Debian packages (only when missing), then code-server and playwright-core into
#   <repo>/.cache/vscode-e2e/ (cached there; reinstalled only when the pinned versions change).
# Usage: test/setup.sh   (prints nothing but progress; exits non-zero on failure)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${PLANWIRE_E2E_CACHE:-$REPO/.cache/vscode-e2e}"
CODE_SERVER_VERSION=4.100.3
PLAYWRIGHT_VERSION=1.56.1
STAMP="$CACHE/.installed-code-server-$CODE_SERVER_VERSION-playwright-$PLAYWRIGHT_VERSION"

log() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------------
PKGS=(g++ make python3 libkrb5-dev ripgrep chromium ca-certificates unzip binutils)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm (Node 20+) are required" >&2; exit 1
fi
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' \
  || { echo "Node 20+ is required (found $(node --version))" >&2; exit 1; }

# --- code-server + playwright-core into the cache ----------------------------------------------
if [ -f "$STAMP" ] && [ -x "$CACHE/node_modules/.bin/code-server" ] \
   && [ -d "$CACHE/node_modules/playwright-core" ]; then
  log "code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION cached in $CACHE"
  exit 0
fi

log "installing code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION into $CACHE"
mkdir -p "$CACHE/tmp"
export TMPDIR="$CACHE/tmp"
# code-server's ripgrep postinstall downloads from GitHub; seed its cache with Debian's rg.
RG_CACHE="$TMPDIR/vscode-ripgrep-cache-1.15.11"
mkdir -p "$RG_CACHE"
tar czf "$RG_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" \
  -C "$(dirname "$(command -v rg)")" rg
[ -f "$CACHE/package.json" ] || echo '{ "name": "planwire-vscode-e2e-cache", "private": true }' > "$CACHE/package.json"
# unsafe_perm: code-server's postinstall refuses to run as root otherwise.
# yes: node-pty runs `npx node-gyp`, which must not ask.
npm_config_unsafe_perm=true npm_config_yes=true npm_config_nodedir=/usr \
npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false \
  npm install --prefix "$CACHE" --unsafe-perm \
    "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" </dev/null
"$CACHE/node_modules/.bin/code-server" --version >/dev/null
rm -f "$CACHE"/.installed-*
touch "$STAMP"
log "installed"
