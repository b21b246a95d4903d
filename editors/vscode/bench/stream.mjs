// A long planning run for the `script` planner: a Claude Code stream-json stream of cycles of
// assistant text, a Read or Bash call and its result, then the final plan. The benchmark and
// the large-transcript end-to-end test replay it with `planwire replay FILE`.
//
// Every text says "step K" and every call has the id toolu_bench_K, so a client can check that
// each event's row is shown exactly once. With `linesPerSecond`, each line carries `atMs`
// (paced without drift); the final text carries `pwlast:@@PWNS@@`, which the replayer replaces
// with CLOCK_MONOTONIC ns as it writes the line (the planner's last line).

import { writeFileSync } from 'node:fs';

const SESSION = '6f1d1c3e-bench-4d69-9034-4a6c24ecca65';
export const STAMP_TOKEN = '@@PWNS@@';
export const LAST_MARK = 'pwlast:';

const usage = { input_tokens: 100, output_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };

function assistant(msgId, block) {
  return { type: 'assistant', message: { id: msgId, type: 'message', role: 'assistant', model: 'claude-bench', content: [block], stop_reason: null, stop_sequence: null, usage }, parent_tool_use_id: null, session_id: SESSION };
}

function toolResult(callId, content) {
  return { type: 'user', message: { role: 'user', content: [{ tool_use_id: callId, type: 'tool_result', content, is_error: false }] }, parent_tool_use_id: null, session_id: SESSION };
}

function readOutput(k) {
  const lines = [];
  for (let i = 1; i <= 24; i++) lines.push(`${i}\t    let value_${i} = config.get("key_${k}_${i}").unwrap_or_default(); // line ${i}`);
  return lines.join('\n');
}

/** The three lines of cycle `k`: text, a tool call (Read or Bash by turns) and its result. */
export function cycle(k) {
  const msgId = `msg_bench_${String(k).padStart(9, '0')}`;
  const callId = `toolu_bench_${k}`;
  const file = `src/module_${k % 97}/part_${k}.rs`;
  const text = `step ${k}: I read \`${file}\` next, to see how **the greeting** reaches the output. ` +
    'The configuration is loaded once at start-up and passed down; nothing caches it.';
  const read = k % 2 === 0;
  const call = read
    ? { type: 'tool_use', id: callId, name: 'Read', input: { file_path: `/home/dev/project/${file}` } }
    : { type: 'tool_use', id: callId, name: 'Bash', input: { command: `rg -n "greeting" src/module_${k % 97}`, description: 'Find the greeting' } };
  const output = read ? readOutput(k) : `src/module_${k % 97}/part_${k}.rs:12:    greeting(&config)\nsrc/module_${k % 97}/mod.rs:3:pub mod greeting;`;
  return [assistant(msgId, { type: 'text', text }), assistant(msgId, call), toolResult(callId, output)];
}

const PLAN = {
  title: 'Make the greeting configurable',
  description: '## Context\nThe greeting is a literal.\n\n## Steps\n1. Read it from the configuration.\n2. Test it.',
  acceptanceCriteria: ['`cargo run` prints the configured greeting', '`cargo test` passes'],
  openQuestions: [],
  dependencies: [],
};

/** The final lines: the plan (its text stamped with the time it is written) and the result. */
function ending(stamp) {
  const said = `I read every part; the greeting is a literal in one place.${stamp ? ` ${LAST_MARK}${STAMP_TOKEN}` : ''}`;
  const body = `${said}\n\n<planwire-plan>${JSON.stringify(PLAN)}</planwire-plan>`;
  return [
    assistant('msg_bench_final', { type: 'text', text: body }),
    { type: 'result', subtype: 'success', is_error: false, duration_ms: 1000, num_turns: 2, result: body, stop_reason: 'end_turn', session_id: SESSION, total_cost_usd: 0.5, usage: { ...usage, output_tokens: 4000 } },
  ];
}

/**
 * Writes the script of a run of about `events` transcript events (one per line; the init line
 * is the session event, the result line the usage) and returns what a client should show.
 */
export function writeScript(path, { events, linesPerSecond = 0 }) {
  const cycles = Math.max(1, Math.ceil((events - 3) / 3));
  const init = { type: 'system', subtype: 'init', cwd: '/home/dev/project', session_id: SESSION, tools: ['Bash', 'Read'], model: 'claude-bench', permissionMode: 'plan' };
  const lines = [init];
  for (let k = 0; k < cycles; k++) lines.push(...cycle(k));
  const stamp = linesPerSecond > 0;
  lines.push(...ending(stamp));
  const out = [JSON.stringify({ format: 'claude' })];
  lines.forEach((l, i) => {
    const d = { out: JSON.stringify(l) };
    if (stamp) d.atMs = Math.round((i * 1000) / linesPerSecond);
    if (stamp && i === lines.length - 2) d.stamp = STAMP_TOKEN;
    out.push(JSON.stringify(d));
  });
  out.push(JSON.stringify({ exit: 0 }));
  writeFileSync(path, out.join('\n') + '\n');
  return { cycles, lines: lines.length, planTitle: PLAN.title, streamMs: stamp ? Math.round((lines.length * 1000) / linesPerSecond) : 0 };
}

/**
 * Runs in the transcript webview (pass it to playwright's `frame.evaluate`): how often each
 * "step K" text and each call's row appear, calls with their result, and element ids.
 */
export function shownRows() {
  const count = (sel, re, of) => {
    const n = {};
    for (const el of document.querySelectorAll(sel)) {
      const m = re.exec(of(el));
      if (m) n[m[1]] = (n[m[1]] || 0) + 1;
    }
    return n;
  };
  const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
  return {
    steps: count('.text', /^step (\d+):/, (el) => el.textContent.trim()),
    calls: count('details.tool', /toolu_bench_(\d+)$/, (el) => el.dataset.key || ''),
    completed: document.querySelectorAll('details.tool.tool-completed').length,
    ids: ids.length,
    uniqueIds: new Set(ids).size,
    chunks: document.querySelectorAll('.chunk').length,
  };
}

/** Where the rows differ from each of `cycles` texts and calls shown once, with its result. */
export function rowProblems(seen, cycles) {
  const wrong = [];
  for (let k = 0; k < cycles && wrong.length < 5; k++) {
    if (seen.steps[k] !== 1) wrong.push(`step ${k} shown ${seen.steps[k] ?? 0} times`);
    if (seen.calls[k] !== 1) wrong.push(`call ${k} shown ${seen.calls[k] ?? 0} times`);
  }
  if (Object.keys(seen.steps).length !== cycles || Object.keys(seen.calls).length !== cycles) wrong.push(`${Object.keys(seen.steps).length} steps and ${Object.keys(seen.calls).length} calls, expected ${cycles}`);
  if (seen.completed !== cycles) wrong.push(`${seen.completed} calls show their result, expected ${cycles}`);
  if (seen.ids !== seen.uniqueIds) wrong.push(`${seen.ids - seen.uniqueIds} repeated element ids`);
  return wrong;
}
