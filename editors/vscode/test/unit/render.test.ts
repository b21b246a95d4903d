import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEvents, newRunTranscript } from '../../src/pure/transcript';
import { formatCost, formatDuration, formatTokens, renderTicket, toolInputSummary } from '../../src/pure/render';
import type { Run, Ticket } from '../../src/pure/types';
import { ticketFromMarkdown } from '../../src/pure/ticketText';

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
