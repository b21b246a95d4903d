#!/usr/bin/env bash
# The VS Code extension's whole test: installs what it needs (idempotently, cached under
# <repo>/.cache/vscode-e2e/), runs the unit tests, builds the platform-specific .vsix with the
# planwire binary inside, installs it into a fresh code-server profile with no planwire on PATH
# and no planwire.serverPath, and runs the end-to-end test in that real VS Code (code-server
# driven by Chromium). Then a smoke run of the benchmark (bench/run.sh --smoke; it checks that
# every row is shown once and the plan appears, and never gates on timing).
# Ends with the line "N passed, N failed" and exits non-zero on any failure.
#
# Env: PLANWIRE_BIN (default <repo>/target/debug/planwire, built when missing),
#      E2E_KEEP=1 keeps the run directory, E2E_SKIP=1 runs only the unit tests,
#      BENCH_SKIP=1 skips the benchmark smoke run.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="$REPO/.cache/vscode-e2e"
ART="$REPO/test-artifacts/vscode"
export CI="${CI:-true}"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

PASSED=0
FAILED=0
RUN=""
CS_PGID=""

log() { printf '\n== %s\n' "$*"; }
finish() {
  echo
  echo "$PASSED passed, $FAILED failed"
  if [ "$FAILED" -gt 0 ]; then exit 1; fi
  exit 0
}
fatal() {
  echo "FATAL: $*" >&2
  FAILED=$((FAILED + 1))
  finish
}
add_counts() { # parses "N passed, N failed" from the last such line of a file
  local line
  line="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)"
  if [ -z "$line" ]; then FAILED=$((FAILED + 1)); return; fi
  PASSED=$((PASSED + $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")))
  FAILED=$((FAILED + $(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")))
}
stop_code_server() {
  if [ -n "$CS_PGID" ]; then
    kill -TERM -- "-$CS_PGID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$CS_PGID" 2>/dev/null || break; sleep 0.3; done
    kill -KILL -- "-$CS_PGID" 2>/dev/null
    CS_PGID=""
  fi
}
cleanup() {
  stop_code_server
  if [ -n "$RUN" ] && [ -z "${E2E_KEEP:-}" ]; then rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# ---- 1. install -----------------------------------------------------------------------------
log "setup"
"$HERE/test/setup.sh" </dev/null || fatal "installing the test dependencies failed"

# ---- 2. build ------------------------------------------------------------------------------
log "build"
cd "$HERE" || fatal "no $HERE"
LOCK_SUM="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ "$(cat node_modules/.planwire-lock.sha256 2>/dev/null)" != "$LOCK_SUM" ]; then
  npm ci --no-fund --no-audit </dev/null || fatal "npm ci failed"
  echo "$LOCK_SUM" > node_modules/.planwire-lock.sha256
else
  echo "node_modules up to date with package-lock.json"
fi
npm run build </dev/null || fatal "npm run build failed"

# ---- 3. unit tests --------------------------------------------------------------------------
log "unit tests"
UNIT_OUT="$(mktemp)"
node test/run-unit.mjs 2>&1 | tee "$UNIT_OUT"
add_counts "$UNIT_OUT"
rm -f "$UNIT_OUT"

if [ -n "${E2E_SKIP:-}" ]; then finish; fi

# ---- 4. the planwire binary -----------------------------------------------------------------
log "planwire binary"
BIN="${PLANWIRE_BIN:-$REPO/target/debug/planwire}"
if [ ! -x "$BIN" ] && [ -z "${PLANWIRE_BIN:-}" ]; then
  (cd "$REPO" && cargo build -p planwire) || fatal "cargo build -p planwire failed"
fi
[ -x "$BIN" ] || fatal "planwire binary not found: $BIN"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
"$BIN" --version || true

# ---- 5. the platform-specific .vsix, with the binary inside ----------------------------------
log "platform .vsix"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/planwire-vscode-e2e.XXXXXX")"
# The extension carries its own copy of the binary (stripped: the debug build is large), so a
# rebuild during the run cannot pull it away.
strip -o "$RUN/planwire" "$BIN" 2>/dev/null || cp "$BIN" "$RUN/planwire" || fatal "copying $BIN"
VSIX="$RUN/planwire-test.vsix"
node scripts/vsix.mjs --bin "$RUN/planwire" --out "$VSIX" --skip-build </dev/null || fatal "building the platform .vsix failed"
unzip -Z "$VSIX" extension/bin/planwire | grep -q '^-rwx' || fatal "the .vsix does not carry an executable extension/bin/planwire"

# ---- 6. end-to-end in code-server -----------------------------------------------------------
log "end-to-end (code-server + chromium)"
mkdir -p "$RUN"/{home,xdg/config,xdg/data,xdg/cache,xdg/state,xdg/runtime,user/User,ext,workspace/src} "$ART"
chmod 700 "$RUN/xdg/runtime"
rm -f "$ART"/*.png
export HOME="$RUN/home" XDG_CONFIG_HOME="$RUN/xdg/config" XDG_DATA_HOME="$RUN/xdg/data" \
  XDG_CACHE_HOME="$RUN/xdg/cache" XDG_STATE_HOME="$RUN/xdg/state" XDG_RUNTIME_DIR="$RUN/xdg/runtime"
CODE_SERVER="$CACHE/node_modules/.bin/code-server"
printf 'bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n' > "$RUN/config.yaml"

# No planwire on the extension host's PATH: the extension must find the bundled binary.
CLEAN_PATH=""
IFS=':' read -r -a PATH_DIRS <<<"$PATH"
for d in "${PATH_DIRS[@]}"; do
  [ -n "$d" ] && [ ! -e "$d/planwire" ] && CLEAN_PATH="${CLEAN_PATH:+$CLEAN_PATH:}$d"
done

# A long run for the large-transcript case: 20,000 events at full speed.
node -e 'import(process.argv[1]).then((m) => console.log(JSON.stringify(m.writeScript(process.argv[2], { events: 20000 }))))' \
  "$HERE/bench/stream.mjs" "$RUN/long.jsonl" > "$RUN/long.json" </dev/null || fatal "writing the long script failed"

# A small project to plan in.
cat > "$RUN/workspace/src/main.rs" <<'RS'
fn main() {
    println!("hello from demo-project");
}
RS
printf '# demo-project\n\nPrints a greeting.\n' > "$RUN/workspace/README.md"
# A git repository with a second branch: a ticket's branch must exist, and the work-tree
# check (readonlyViolation) only looks at git work trees.
git -C "$RUN/workspace" init -q -b main \
  && git -C "$RUN/workspace" -c user.name=e2e -c user.email=e2e@example.invalid add -A \
  && git -C "$RUN/workspace" -c user.name=e2e -c user.email=e2e@example.invalid commit -q -m 'demo project' \
  && git -C "$RUN/workspace" branch greeting || fatal "making the workspace a git repository failed"

# A stand-in implementation CLI for the hand-off: `codex` on the extension host's PATH. It says
# what it was started with (the terminal shows it) and waits for Enter.
mkdir -p "$RUN/bin"
cat > "$RUN/bin/codex" <<'SH'
#!/bin/sh
if [ "$1" = "--version" ]; then echo "codex-cli 0.171.0"; exit 0; fi
echo "stand-in codex in $(pwd) with $# arguments; the last: $(for a in "$@"; do last=$a; done; echo "$last")"
read -r _
SH
chmod +x "$RUN/bin/codex"
cat > "$RUN/user/User/settings.json" <<JSON
{
  "planwire.dbPath": "$RUN/planwire.db",
  "planwire.defaultTool": "script",
  "planwire.model": "demo",
  "planwire.logLevel": "debug",
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "workbench.welcomePage.walkthroughs.openOnInstall": false,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "chat.commandCenter.enabled": false,
  "chat.disableAIFeatures": true,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "git.enabled": false,
  "window.dialogStyle": "custom",
  "editor.minimap.enabled": false,
  "terminal.integrated.gpuAcceleration": "off",
  "remote.autoForwardPorts": false
}
JSON

"$CODE_SERVER" --config "$RUN/config.yaml" --user-data-dir "$RUN/user" --extensions-dir "$RUN/ext" \
  --install-extension "$VSIX" </dev/null || fatal "installing the .vsix into code-server failed"

PORT="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
TEST_LOG="$RUN/extension-events.jsonl"
: > "$TEST_LOG"
PATH="$RUN/bin:$CLEAN_PATH" VSCODE_CLI=1 PLANWIRE_VSCODE_TEST_LOG="$TEST_LOG" setsid "$CODE_SERVER" \
  --config "$RUN/config.yaml" --user-data-dir "$RUN/user" --extensions-dir "$RUN/ext" \
  --bind-addr "127.0.0.1:$PORT" --auth none --disable-telemetry --disable-update-check \
  --disable-workspace-trust --disable-getting-started-override "$RUN/workspace" \
  </dev/null >"$RUN/code-server.log" 2>&1 &
CS_PGID=$!

for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
  kill -0 "$CS_PGID" 2>/dev/null || { cat "$RUN/code-server.log"; fatal "code-server exited"; }
  sleep 0.2
done

E2E_OUT="$RUN/e2e.out"
E2E_PORT="$PORT" E2E_RUN="$RUN" E2E_WORKSPACE="$RUN/workspace" E2E_ARTIFACTS="$ART" \
E2E_CACHE="$CACHE" E2E_TEST_LOG="$TEST_LOG" E2E_CHROMIUM="${E2E_CHROMIUM:-/usr/bin/chromium}" \
E2E_LONG_SCRIPT="$RUN/long.jsonl" E2E_LONG_INFO="$RUN/long.json" \
  timeout 900 node "$HERE/test/e2e/e2e.mjs" </dev/null 2>&1 | tee "$E2E_OUT"
add_counts "$E2E_OUT"
if grep -q 'FAIL' "$E2E_OUT"; then
  echo "--- code-server log (tail)"; tail -n 30 "$RUN/code-server.log"
  echo "--- extension events (tail)"; tail -n 40 "$TEST_LOG"
fi
stop_code_server

# ---- 7. benchmark smoke run (checks rows and the plan; never gates on timing) ----------------
if [ -z "${BENCH_SKIP:-}" ]; then
  log "benchmark smoke run"
  bash "$HERE/bench/run.sh" --smoke --vsix "$VSIX" </dev/null 2>&1 | tee "$RUN/bench.out"
  add_counts "$RUN/bench.out"
fi
cleanup
finish
