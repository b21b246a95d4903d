#!/usr/bin/env bash
# Runs the fuzz targets for a fixed time each: `fuzz/run.sh [SECONDS] [TARGET...]`
# (default 30 s, every target). Installs the pinned cargo-fuzz into .cache/cargo-fuzz once,
# seeds the corpora from the repository's recordings (fuzz/seeds.py) and needs the nightly
# toolchain (`rustup toolchain install nightly`). A crash stops the run with its input in
# fuzz/artifacts/<target>/; fuzz/README.md says what to do with it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(frames ndjson jsonrpc claude codex opencode acp plan)
fi
version=0.13.2
# No sanitizer by default: the targets are safe Rust (no target reaches rusqlite's C), and
# AddressSanitizer instrumentation makes the build, most of a short run's time, longer.
# FUZZ_SANITIZER=address turns it on.
sanitizer=${FUZZ_SANITIZER:-none}
root=.cache/cargo-fuzz
if ! "$root/bin/cargo-fuzz" --version 2>/dev/null | grep -q "$version"; then
  cargo install cargo-fuzz --locked --version "$version" --root "$root"
fi
export PATH="$PWD/$root/bin:$PATH"
python3 fuzz/seeds.py
cargo +nightly fuzz build --sanitizer "$sanitizer" --fuzz-dir fuzz
mkdir -p fuzz/artifacts
for t in "${targets[@]}"; do
  echo "--- fuzz $t: ${secs} s"
  log="fuzz/artifacts/$t.log"
  rc=0
  cargo +nightly fuzz run --sanitizer "$sanitizer" --fuzz-dir fuzz "$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::peak_rss|^Done " "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    echo "!!! fuzz target $t failed (exit $rc): its input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
