#!/usr/bin/env bash
# Every test tier, in order. This is the README's test command and what CI runs.
# Each tier installs what it needs (idempotently, cached under .cache/). A failing tier does
# not stop the others; the script exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# CI builds once from nothing: incremental state would only double target/ on its disk.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"; fi
# What the disk has: a full run needs about 5 GB (target/, fuzz/target/, .cache/). When a
# tier fails with "No space left on device", this line says whether the disk was short.
echo "=== disk: $(df -Pk . | awk 'NR==2 {printf "%.1f GB free", $4/1048576}')"
failed=()
passed=()
step() {
  local name=$1; shift
  echo "=== ${name}"
  local t0=$SECONDS
  if "$@"; then passed+=("${name}"); echo "=== ${name}: ok ($((SECONDS - t0)) s)"
  else failed+=("${name}"); echo "=== ${name}: FAILED ($((SECONDS - t0)) s)"; fi
}

step "cargo fmt" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
step "cargo test" cargo test --workspace
step "build planwire" cargo build -p planwire
# Both crates package and build from their packaged sources alone (planwire against the
# packaged planwire-protocol; cargo needs both in one command until that is on crates.io).
step "cargo package" cargo package -p planwire-protocol -p planwire --allow-dirty
step "planwire acp (official ACP SDK client)" bash tests/acp/run.sh
# libFuzzer over every parser, a fixed time each (installs the pinned cargo-fuzz into
# .cache/cargo-fuzz; needs the nightly toolchain). See fuzz/README.md. It is CPU-bound and the
# real-CLI tier mostly waits on its CLIs and the mock, so the two run side by side; the fuzz
# output is printed when it ends.
mkdir -p target
fuzz_log=target/fuzz-smoke.log
fuzz_t0=$SECONDS
echo "=== fuzz (30 s per target): started, beside the real-CLI tier"
bash fuzz/run.sh 30 >"$fuzz_log" 2>&1 &
fuzz_pid=$!

# The real-CLI tier: the pinned CLIs from npm against our mock model server.
bash tests/realcli/install.sh
rc=$?
if [ "$rc" -eq 3 ]; then
  echo "!!! REAL-CLI TIER UNAVAILABLE: the npm registry could not be reached; the real CLIs were NOT tested." >&2
  echo "!!! REAL-CLI TIER UNAVAILABLE"
elif [ "$rc" -ne 0 ]; then
  failed+=("real-CLI install")
else
  step "real CLIs (smoke)" python3 tests/realcli/smoke.py
  if [ -f tests/e2e/realcli.rs ]; then
    step "real CLIs through planwire" cargo test -p planwire --test e2e realcli -- --ignored --test-threads=1
  fi
fi

echo "=== fuzz (30 s per target)"
if wait "$fuzz_pid"; then fuzz_ok=1; else fuzz_ok=0; fi
cat "$fuzz_log"
if [ "$fuzz_ok" -eq 1 ]; then passed+=("fuzz"); echo "=== fuzz (30 s per target): ok ($((SECONDS - fuzz_t0)) s)"
else failed+=("fuzz"); echo "=== fuzz (30 s per target): FAILED ($((SECONDS - fuzz_t0)) s)"; fi

for runner in editors/nvim/test/run.sh editors/vscode/test/run.sh; do
  if [ -f "$runner" ]; then step "$runner" bash "$runner"; fi
done

echo
echo "tiers passed: ${passed[*]:-none}"
echo "tiers failed: ${failed[*]:-none}"
echo "${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
