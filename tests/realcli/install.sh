#!/usr/bin/env bash
# Install the pinned real planner CLIs into <repo>/.cache/planners/ for the real-CLI test tier.
#
#   tests/realcli/install.sh            # install (or verify the cached install) and print paths
#   tests/realcli/install.sh --force    # wipe the cache folder of each CLI and reinstall
#
# Exit codes:
#   0  all the CLIs and ACP agents (and rg) are usable; paths are in <repo>/.cache/planners/paths.env
#   3  the npm registry (or the Debian mirror, for rg) cannot be reached: the tier is UNAVAILABLE
#   1  anything else went wrong (a real failure)
#
# Each CLI gets its own npm prefix (<cache>/<tool>/), installed with --ignore-scripts. The
# postinstall scripts only hard-link the platform binary over a placeholder `bin/*.exe`; we do
# not need that because we always run the native binary from the platform package directly
# (see README.md, "Traps"). Idempotent: when the pinned version's native binary is present and
# answers --version, npm is not called at all.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${PLANWIRE_PLANNERS_CACHE:-$ROOT/.cache/planners}"

CLAUDE_PKG="@anthropic-ai/claude-code"; CLAUDE_VER="2.1.197"
OPENCODE_PKG="opencode-ai";             OPENCODE_VER="1.18.33"
CODEX_PKG="@openai/codex";              CODEX_VER="0.171.0"
# ACP agents (planwire's `acp:` planners); opencode's ACP mode is the pinned opencode above.
QWEN_PKG="@qwen-code/qwen-code";        QWEN_VER="0.24.4"
CLAUDE_ACP_PKG="@zed-industries/claude-code-acp"; CLAUDE_ACP_VER="0.16.2"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

log()  { printf '[install] %s\n' "$*" >&2; }
loud() {
  printf '\n' >&2
  printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
  printf '!!! REAL-CLI TIER UNAVAILABLE: %s\n' "$*" >&2
  printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) loud "unsupported platform $(uname -s)-$(uname -m) (the tier is pinned to linux-x64)"; exit 3 ;;
esac

# ---- native binary locations inside each prefix --------------------------------------------
libc_musl() { ldd --version 2>&1 | grep -qi musl; }

claude_bin() {
  local nm="$CACHE/claude/node_modules/@anthropic-ai"
  if libc_musl && [[ -x "$nm/claude-code-linux-x64-musl/claude" ]]; then
    echo "$nm/claude-code-linux-x64-musl/claude"
  else
    echo "$nm/claude-code-linux-x64/claude"
  fi
}
opencode_bin() {
  # opencode's postinstall picks the "-baseline" build on CPUs without AVX2; do the same.
  local nm="$CACHE/opencode/node_modules"
  if ! grep -q avx2 /proc/cpuinfo 2>/dev/null && [[ -x "$nm/opencode-linux-x64-baseline/bin/opencode" ]]; then
    echo "$nm/opencode-linux-x64-baseline/bin/opencode"
  else
    echo "$nm/opencode-linux-x64/bin/opencode"
  fi
}
codex_bin() {
  echo "$CACHE/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
}

qwen_bin() { echo "$CACHE/qwen/node_modules/.bin/qwen"; }
claude_acp_bin() { echo "$CACHE/claude-acp/node_modules/.bin/claude-code-acp"; }

installed_version() { # prefix pkg -> version in package.json, or empty
  local pj="$1/node_modules/$2/package.json"
  [[ -f "$pj" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version||"")' "$pj" 2>/dev/null || true
}

bin_ok() { # bin expected_substring (empty: the entry point only needs to exist)
  [[ -x "$1" ]] || return 1
  [[ -z "$2" ]] && return 0
  local out
  out="$(timeout 30 "$1" --version </dev/null 2>/dev/null)" || return 1
  [[ "$out" == *"$2"* ]]
}

NPM_CHECKED=0
npm_reachable() {
  [[ $NPM_CHECKED == 1 ]] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    loud "npm is not installed on this machine"; exit 3
  fi
  local reg; reg="$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)"
  log "checking the npm registry ($reg) ..."
  if ! timeout 60 npm view "$CODEX_PKG@$CODEX_VER" version --fetch-retries=1 --fetch-timeout=20000 >/dev/null 2>&1; then
    loud "the npm registry ($reg) cannot be reached; cannot install $CLAUDE_PKG@$CLAUDE_VER, $OPENCODE_PKG@$OPENCODE_VER, $CODEX_PKG@$CODEX_VER"
    exit 3
  fi
  NPM_CHECKED=1
}

install_one() { # name pkg ver binfn version_substring
  local name="$1" pkg="$2" ver="$3" binfn="$4" want="$5"
  local prefix="$CACHE/$name"
  if [[ $FORCE == 0 && "$(installed_version "$prefix" "$pkg")" == "$ver" ]] && bin_ok "$("$binfn")" "$want"; then
    log "$name: $pkg@$ver already installed (cached)"
    return 0
  fi
  npm_reachable
  log "$name: installing $pkg@$ver into $prefix ..."
  rm -rf "$prefix"
  mkdir -p "$prefix"
  # A package.json of our own keeps npm from walking up to the repo (or a parent) as prefix.
  printf '{"name":"planwire-realcli-%s","private":true}\n' "$name" >"$prefix/package.json"
  local t0=$SECONDS
  if ! (cd "$prefix" && npm install --prefix "$prefix" --ignore-scripts --no-audit --no-fund \
          --no-save --no-package-lock --loglevel=error "$pkg@$ver" >"$prefix/npm-install.log" 2>&1); then
    if grep -qiE 'ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET|network|socket hang up' "$prefix/npm-install.log"; then
      loud "npm install $pkg@$ver failed: the registry cannot be reached (see $prefix/npm-install.log)"
      tail -5 "$prefix/npm-install.log" >&2
      rm -rf "$prefix"
      exit 3
    fi
    log "npm install $pkg@$ver FAILED:"; tail -20 "$prefix/npm-install.log" >&2
    rm -rf "$prefix"
    exit 1
  fi
  local bin; bin="$("$binfn")"
  if ! bin_ok "$bin" "$want"; then
    log "$name: native binary missing or broken after install: $bin"
    log "  (the optional dependency for this platform was not installed? see $prefix/npm-install.log)"
    exit 1
  fi
  log "$name: installed in $((SECONDS - t0)) s"
}

mkdir -p "$CACHE"
install_one claude   "$CLAUDE_PKG"   "$CLAUDE_VER"   claude_bin   "$CLAUDE_VER"
install_one opencode "$OPENCODE_PKG" "$OPENCODE_VER" opencode_bin "$OPENCODE_VER"
install_one codex    "$CODEX_PKG"    "$CODEX_VER"    codex_bin    "$CODEX_VER"
install_one qwen     "$QWEN_PKG"     "$QWEN_VER"     qwen_bin     "$QWEN_VER"
# claude-code-acp has no --version: the check is that its entry point exists and starts.
install_one claude-acp "$CLAUDE_ACP_PKG" "$CLAUDE_ACP_VER" claude_acp_bin ""

# ---- ripgrep (OpenCode's grep/glob tools need `rg` on PATH, else it downloads one from GitHub)
if command -v rg >/dev/null 2>&1; then
  RG="$(command -v rg)"
  log "rg: $RG (already on PATH)"
else
  SUDO=""
  [[ "$(id -u)" != 0 ]] && SUDO="sudo -n"
  log "rg missing: apt-get update && apt-get install -y ripgrep"
  if ! $SUDO apt-get update -qq >"$CACHE/apt.log" 2>&1; then
    loud "apt-get update failed (Debian mirror unreachable or no root); OpenCode needs rg (see $CACHE/apt.log)"
    exit 3
  fi
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ripgrep >>"$CACHE/apt.log" 2>&1; then
    loud "apt-get install ripgrep failed; OpenCode needs rg (see $CACHE/apt.log)"
    exit 3
  fi
  if ! RG="$(command -v rg)"; then
    log "apt-get installed ripgrep but rg is still not on PATH ($PATH)"
    exit 1
  fi
  log "rg: $RG (installed from Debian)"
fi

CLAUDE_BIN="$(claude_bin)"; OPENCODE_BIN="$(opencode_bin)"; CODEX_BIN="$(codex_bin)"
QWEN_BIN="$(qwen_bin)"; CLAUDE_ACP_BIN="$(claude_acp_bin)"
{
  echo "# written by tests/realcli/install.sh; native binaries of the pinned CLIs"
  echo "CLAUDE_BIN=$CLAUDE_BIN"
  echo "OPENCODE_BIN=$OPENCODE_BIN"
  echo "CODEX_BIN=$CODEX_BIN"
  echo "QWEN_BIN=$QWEN_BIN"
  echo "CLAUDE_ACP_BIN=$CLAUDE_ACP_BIN"
  echo "RG_BIN=$RG"
} >"$CACHE/paths.env"

echo "CLAUDE_BIN=$CLAUDE_BIN"
echo "OPENCODE_BIN=$OPENCODE_BIN"
echo "CODEX_BIN=$CODEX_BIN"
echo "QWEN_BIN=$QWEN_BIN"
echo "CLAUDE_ACP_BIN=$CLAUDE_ACP_BIN"
echo "RG_BIN=$RG"
log "paths written to $CACHE/paths.env"
