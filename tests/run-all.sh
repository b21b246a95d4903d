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
free_disk() { df -Pk . | awk 'NR==2 {printf "%.1f GB free", $4/1048576}'; }
echo "=== disk: $(free_disk)"
failed=()
passed=()
# Each tier's output also goes to target/tier-logs/, and the summary at the end repeats the last
# lines of every tier that failed: a CI report that keeps only the tail of a long run then still
# shows why. (tee runs in a process substitution, so a process a tier leaves behind cannot hold
# the script up.)
logs=target/tier-logs
rm -rf "$logs"; mkdir -p "$logs"
declare -A tier_log=()
step() {
  local name=$1; shift
  local log
  log="$logs/$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '-').log"
  tier_log[$name]=$log
  echo "=== ${name}"
  local t0=$SECONDS
  if "$@" > >(tee "$log") 2>&1; then passed+=("${name}"); echo "=== ${name}: ok ($((SECONDS - t0)) s)"
  else failed+=("${name}"); echo "=== ${name}: FAILED ($((SECONDS - t0)) s)"; fi
}

step "cargo fmt" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
step "cargo test" cargo test --workspace
step "build planwire" cargo build -p planwire
# The three crates package and build from their packaged sources alone (planwire against the
# packaged planwire-protocol and planwire-sandbox; cargo needs them in one command until those
# are on crates.io). cargo treats such a packaged dependency as a registry crate, one that never
# changes, so a checkout where this tier ran before verified planwire against the earlier run's
# copy (a submission failed so: "no field `busy_timeout_ms`"). Two leftovers of each are
# removed first:
# - the unpacked source, $CARGO_HOME/registry/src/<hash of this checkout's path>/: cargo
#   unpacks it only when that folder is missing. No crate of this workspace comes from
#   crates.io, so every unpacked copy of one is a leftover.
# - its build in target/debug: its fingerprint is its version, so cargo would reuse it. That
#   unit's dep-info names a source under registry/src; the workspace's own build stays.
package_crates() {
  local crate lib dep hash
  for crate in planwire-protocol planwire-sandbox; do
    lib=${crate//-/_}
    rm -rf -- "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$crate"-*
    for dep in target/debug/deps/"$lib"-*.d; do
      [ -e "$dep" ] && grep -q '/registry/src/' "$dep" || continue
      hash=${dep##*-}; hash=${hash%.d}
      rm -rf -- target/debug/deps/*"$lib"-"$hash".* target/debug/.fingerprint/"$crate"-"$hash"
    done
  done
  # --locked --offline: cargo test has fetched every crate of Cargo.lock, so this needs no
  # network, and the packaged crates build with the versions everything else was tested with.
  cargo package -p planwire-protocol -p planwire-sandbox -p planwire --allow-dirty --locked --offline
}
step "cargo package" package_crates
step "planwire acp (official ACP SDK client)" bash tests/acp/run.sh
step "planwire mcp (official MCP SDK clients: TypeScript and Python)" bash tests/mcp/run.sh
# libFuzzer over every parser, a fixed time each (installs the pinned cargo-fuzz into
# .cache/cargo-fuzz; needs the nightly toolchain). See fuzz/README.md. It is CPU-bound and the
# real-CLI tier mostly waits on its CLIs and the mock, so the two run side by side; the fuzz
# output is printed when it ends.
fuzz_log=target/fuzz-smoke.log
fuzz_t0=$SECONDS
echo "=== fuzz (30 s per target): started, beside the real-CLI tier"
bash fuzz/run.sh 30 >"$fuzz_log" 2>&1 &
fuzz_pid=$!

# The real-CLI tier: the pinned CLIs from npm against our mock model server.
tier_log["real-CLI install"]=$logs/real-CLI-install.log
bash tests/realcli/install.sh > >(tee "${tier_log["real-CLI install"]}") 2>&1
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

tier_log[fuzz]=$fuzz_log
sleep 1 # the last tier's tee may still be writing
for name in "${failed[@]}"; do
  log=${tier_log[$name]:-}
  [ -n "$log" ] && [ -f "$log" ] || continue
  echo
  echo "=== why ${name} failed (all of its output is in ${log})"
  echo "--- the lines that say FAIL, panicked or error, the first 30:"
  grep -E -m 30 '(^|[[:space:]])(FAIL|FAILED|FATAL|panicked|error(\[E[0-9]+\])?:)' "$log"
  echo "--- the last 40 lines:"
  tail -n 40 "$log"
done
echo
echo "=== disk at the end: $(free_disk)"
echo "tiers passed: ${passed[*]:-none}"
echo "tiers failed: ${failed[*]:-none}"
echo "${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
