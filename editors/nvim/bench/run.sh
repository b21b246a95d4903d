#!/usr/bin/env bash
# The Neovim transcript benchmark (bench.lua): a long planning run replayed at 1,000 lines/s
# into a real Neovim (in tmux), measured from outside. Arguments go to bench.lua:
#   bash editors/nvim/bench/run.sh                 # 2,000 and 20,000 events, 3 runs each
#   bash editors/nvim/bench/run.sh --quick         # smoke run (CI): fails only on a lost or doubled row
#   options: --sizes 2000,20000  --runs N  --ui tmux|headless  --json FILE
# Uses the Neovim of editors/nvim/test/run.sh (<repo>/.cache/nvim-0.11.4) and the release
# binary (built if missing; PLANWIRE_BIN overrides it). Generated scripts are cached in
# target/bench-cache/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
NVIM_EXE="${NVIM_BIN:-$REPO/.cache/nvim-0.11.4/bin/nvim}"
if [ ! -x "$NVIM_EXE" ]; then
  echo "no Neovim at $NVIM_EXE: run editors/nvim/test/run.sh once (it installs it), or set NVIM_BIN" >&2
  exit 2
fi
export PLANWIRE_BIN="${PLANWIRE_BIN:-$REPO/target/release/planwire}"
if [ ! -x "$PLANWIRE_BIN" ]; then
  (cd "$REPO" && cargo build -q --release -p planwire) </dev/null >&2
fi
PLANWIRE_BENCH_TMP="$(mktemp -d "${TMPDIR:-/tmp}/planwire-nvim-bench.XXXXXX")"
export PLANWIRE_BENCH_TMP NVIM_BIN="$NVIM_EXE"
trap 'rm -rf "$PLANWIRE_BENCH_TMP"' EXIT
export HOME="$PLANWIRE_BENCH_TMP/home" XDG_STATE_HOME="$PLANWIRE_BENCH_TMP/state" XDG_DATA_HOME="$PLANWIRE_BENCH_TMP/data"
export XDG_CONFIG_HOME="$PLANWIRE_BENCH_TMP/config" XDG_CACHE_HOME="$PLANWIRE_BENCH_TMP/cache"
mkdir -p "$HOME"
unset NVIM NVIM_LISTEN_ADDRESS VIMINIT MYVIMRC
"$NVIM_EXE" -l "$HERE/bench.lua" "$@" </dev/null
