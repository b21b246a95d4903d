import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEvents, newRunTranscript } from '../../src/pure/transcript';
import { formatCost, formatDuration, formatTokens, renderTicket, toolInputSummary } from '../../src/pure/render';
import type { Run, Ticket } from '../../src/pure/types';
import { branchProblem, ticketFromMarkdown } from '../../src/pure/ticketText';

const ticket: Ticket = {
  id: 1, root: '/repo', title: 'Add <b>sessions</b>', description: 'Some *context*.', status: 'planned', tool: 'script', model: 'demo',
  createdAt: '2025-01-01T00:00:00Z', updatedAt: '2025-01-01T00:00:09Z',
  plan: { title: 'Sessions', description: '## Steps\n\n1. Add a table\n2. Wire it', acceptanceCriteria: ['Logins persist'], openQuestions: ['Which TTL?'], dependencies: ['rusqlite'] },
  openQuestions: [],
};
const run: Run = { id: 4, ticketId: 1, status: 'completed', tool: 'script', model: 'demo', createdAt: '2025-01-01T00:00:00Z', startedAt: '2025-01-01T00:00:01Z', endedAt: '2025-01-01T00:00:13.5Z', lastSeq: 4 };

test('renders markdown text, the plan from ticket.plan, never the raw plan JSON, and escapes HTML', () => {
  const t = newRunTranscript(4);
  applyEvents(t, [
    { seq: 1, ts: 'x', kind: 'text', text: 'I read **the code**.', final: false },
    { seq: 2, ts: 'x', kind: 'toolCall', callId: 'a', name: 'Read', input: 'src/<lib>.rs' },
    { seq: 3, ts: 'x', kind: 'text', text: 'Plan ready.\n<planwire-plan>{"title":"Sessions","description":"RAW"}</planwire-plan>', final: true },
    { seq: 4, ts: 'x', kind: 'usage', inputTokens: 12345, outputTokens: 678, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.042 },
  ]);
  const html = renderTicket({ ticket, runs: [run], transcripts: new Map([[4, t]]), questions: [], now: Date.now() });
  assert.match(html, /<strong>the code<\/strong>/);
  assert.match(html, /src\/&lt;lib&gt;\.rs/);
  assert.match(html, /Add &lt;b&gt;sessions&lt;\/b&gt;/);
  assert.doesNotMatch(html, /planwire-plan|RAW/);
  assert.match(html, /<h2>Steps<\/h2>/);
  assert.match(html, /Acceptance criteria/);
  assert.match(html, /Which TTL\?/);
  assert.match(html, /12k in/);
  assert.match(html, /\$0\.04/);
  assert.match(html, /13 s/);
  assert.match(html, /data-last-seq="4" data-applied="4"/);
});

test('raw HTML in markdown is not rendered and remote images are never loaded', () => {
  const t = newRunTranscript(4);
  applyEvents(t, [{ seq: 1, ts: 'x', kind: 'text', text: '<script>alert(1)</script> ![x](https://example.com/x.png)', final: false }]);
  const html = renderTicket({ ticket, runs: [run], transcripts: new Map([[4, t]]), questions: [], now: Date.now() });
  assert.doesNotMatch(html, /<script>/);
  assert.doesNotMatch(html, /<img/);
});

test('formatting helpers', () => {
  assert.equal(formatDuration(12_500), '13 s');
  assert.equal(formatDuration(4200), '4.2 s');
  assert.equal(formatDuration(125_000), '2 min 5 s');
  assert.equal(formatTokens(999), '999');
  assert.equal(formatTokens(1500), '1.5k');
  assert.equal(formatCost(0.005), '$0.0050');
});

test('a markdown document becomes a ticket title and description', () => {
  assert.deepEqual(ticketFromMarkdown('\n# Add sessions\n\nUsers stay logged in.\n\n- TTL 1 day\n'), { title: 'Add sessions', description: 'Users stay logged in.\n\n- TTL 1 day' });
  assert.deepEqual(ticketFromMarkdown('Plain first line\nmore'), { title: 'Plain first line', description: 'more' });
  assert.deepEqual(ticketFromMarkdown('---\ntags: x\n---\nTitle\n=====\nBody'), { title: 'Title', description: 'Body' });
  assert.equal(ticketFromMarkdown('  \n\n'), undefined);
});

test('AskUserQuestion input shows its questions, other tool input as is', () => {
  assert.equal(toolInputSummary('AskUserQuestion', '{"questions":[{"question":"Which greeting?","options":[]},{"question":"Add a test?"}]}'), 'Which greeting? · Add a test?');
  assert.equal(toolInputSummary('AskUserQuestion', '{broken'), '{broken');
  assert.equal(toolInputSummary('Read', 'src/main.rs'), 'src/main.rs');
});

test('a question in the transcript shows its chosen answer once answered', () => {
  const t = newRunTranscript(4);
  applyEvents(t, [{ seq: 1, ts: 'x', kind: 'question', questionId: 9 }]);
  const q = {
    id: 9, ticketId: 1, runId: 4, status: 'open' as const, source: 'live' as const,
    items: [{ header: 'Greeting', question: 'Which <greeting>?', options: [{ label: 'Hello' }, { label: 'Hi there' }] }],
  };
  const open = renderTicket({ ticket, runs: [run], transcripts: new Map([[4, t]]), questions: [q], now: Date.now() });
  assert.match(open, /Which &lt;greeting&gt;\?/);
  assert.match(open, /waiting for your answer/);
  assert.doesNotMatch(open, /q-answer/);
  const answered = renderTicket({ ticket, runs: [run], transcripts: new Map([[4, t]]), questions: [{ ...q, status: 'answered', answers: [{ selected: ['Hi there'] }] }], now: Date.now() });
  assert.match(answered, /question-ref answered/);
  assert.match(answered, /<span class="q-answer-label">Answer:<\/span> Hi there/);
  assert.doesNotMatch(answered, /waiting for your answer|Answer…/);
});

test('a run header shows its sandbox state; a warning is a row; changed files are an error; timing in the footer; the ticket sums usage', () => {
  const t = newRunTranscript(4);
  applyEvents(t, [
    { seq: 1, ts: 'x', kind: 'warning', message: 'Planning runs without the OS sandbox.' },
    { seq: 2, ts: 'x', kind: 'usage', inputTokens: 1000, outputTokens: 200, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.5 },
  ]);
  const t2 = newRunTranscript(5);
  applyEvents(t2, [{ seq: 1, ts: 'x', kind: 'usage', inputTokens: 500, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.25 }]);
  const off: Run = { ...run, sandbox: 'off', readonlyViolation: { paths: ['/repo/planted.txt'] }, timing: { firstOutputMs: 140, firstFinalMs: 2300, totalMs: 2500 } };
  const enforced: Run = { ...run, id: 5, sandbox: 'enforced', timing: { firstOutputMs: null, firstFinalMs: null, totalMs: 900 } };
  const html = renderTicket({
    ticket: { ...ticket, branch: 'feature/greet', planVersion: 2, handedOffAt: '2025-01-01T00:01:00Z', handedOffTool: 'codex' },
    runs: [off, enforced], transcripts: new Map([[4, t], [5, t2]]), questions: [], now: Date.now(),
  });
  assert.match(html, /data-sandbox="off"[^>]*>⚠ sandbox off</);
  assert.match(html, /data-sandbox="enforced"[^>]*>sandboxed</);
  assert.match(html, /class="warning"[^>]*role="alert"><span class="warning-kind">⚠ Warning<\/span> Planning runs without the OS sandbox\./);
  assert.match(html, /class="error readonly-violation"[\s\S]*<code>\/repo\/planted\.txt<\/code>/);
  assert.match(html, /first output 0\.1 s/);
  assert.match(html, /first answer 2\.3 s/);
  assert.match(html, /total 2\.5 s/);
  assert.match(html, /total 0\.9 s/);
  assert.doesNotMatch(html, /first output 0\.0|first answer 0\.0/, 'no first output: none shown');
  assert.match(html, /⎇ feature\/greet/);
  assert.match(html, /plan v2/);
  assert.match(html, /handed off to codex/);
  assert.match(html, /1\.5k in · 300 out · \$0\.75 in 2 runs/);
  for (const cmd of ['requestChanges', 'handoff', 'exportPlan', 'planVersions', 'editTicket']) assert.match(html, new RegExp(`data-cmd="${cmd}"`));
});

test('a run whose sandbox state is not known yet shows no badge; a busy ticket offers no edit', () => {
  const html = renderTicket({ ticket: { ...ticket, status: 'planning' }, runs: [{ ...run, status: 'running', endedAt: null }], transcripts: new Map(), questions: [], now: Date.now() });
  assert.doesNotMatch(html, /class="sandbox/);
  assert.doesNotMatch(html, /data-cmd="editTicket"|data-cmd="requestChanges"|data-cmd="handoff"/);
  assert.match(html, /running for/);
});

test('branch names the server would refuse are caught while typing; empty means none', () => {
  assert.equal(branchProblem(''), undefined);
  assert.equal(branchProblem(' feature/greet '), undefined);
  assert.match(branchProblem('-rf') ?? '', /may not start with -/);
  assert.match(branchProblem('my branch') ?? '', /spaces/);
});
