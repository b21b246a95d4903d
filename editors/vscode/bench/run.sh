#!/usr/bin/env bash
# The VS Code benchmark (bench/bench.mjs): a long planning run streamed at 1,000 lines/s into a
# real VS Code (code-server in Chromium), at 2,000 and 20,000 events, three runs each. The
# figures are recorded in docs/PERFORMANCE.md ("VS Code").
#
# Usage: bench/run.sh [--smoke] [--vsix FILE] [bench.mjs options: --sizes, --runs, --rate,
#                     --bin, --label, --out, --keep]
#   Without --vsix it builds the platform .vsix with the release binary inside (npm run vsix).
#   --smoke: 300 events, one run. It checks that every event's row is shown once and the plan
#   appears; timing never fails it. The test suite (test/run.sh) runs it.
# Ends with "N passed, N failed".
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VSIX=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) ARGS+=(--sizes 300 --runs 1); shift ;;
    --vsix) VSIX="$2"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
"$HERE/test/setup.sh" </dev/null >/dev/null
if [ -z "$VSIX" ]; then
  (cd "$HERE" && [ -d node_modules ] || npm ci --no-fund --no-audit </dev/null)
  (cd "$HERE" && npm run vsix -- --out "$HERE/planwire-bench.vsix" </dev/null)
  VSIX="$HERE/planwire-bench.vsix"
fi
export BENCH_CACHE="${BENCH_CACHE:-$REPO/.cache/vscode-e2e}"
exec node "$HERE/bench/bench.mjs" --vsix "$VSIX" "${ARGS[@]}"
