import { test } from 'node:test';
import assert from 'node:assert/strict';
import { afterLabel, groupTickets, initiativeTitle, orderByDependencies, passMessage, suggestLinkName } from '../../src/pure/initiative';
import { renderBreakdown } from '../../src/pure/render';
import { applyEvents, newRunTranscript, stripPlanBlock } from '../../src/pure/transcript';
import type { Run, Ticket } from '../../src/pure/types';

function ticket(id: number, title: string, dependsOn: number[] = [], initiativeRunId: number | null = null): Ticket {
  return { id, root: '/repo', title, description: '', status: 'planned', tool: 'script', model: 'breakdown', createdAt: 'x', updatedAt: 'x', dependsOn, initiativeRunId };
}

test('orderByDependencies puts every ticket after its dependencies, else oldest first', () => {
  // Ids out of dependency order: 5 depends on 7, 6 on 5 and 7.
  const ts = [ticket(6, 'docs', [5, 7]), ticket(5, 'ui', [7]), ticket(7, 'api')];
  assert.deepEqual(orderByDependencies(ts).map((t) => t.title), ['api', 'ui', 'docs']);
  // Independent tickets keep id order.
  assert.deepEqual(orderByDependencies([ticket(3, 'c'), ticket(1, 'a'), ticket(2, 'b')]).map((t) => t.id), [1, 2, 3]);
});

test('orderByDependencies ignores unknown dependencies and survives a cycle', () => {
  assert.deepEqual(orderByDependencies([ticket(2, 'b', [99]), ticket(1, 'a', [2])]).map((t) => t.id), [2, 1]);
  const cyclic = orderByDependencies([ticket(1, 'a', [2]), ticket(2, 'b', [1]), ticket(3, 'c')]);
  assert.equal(cyclic.length, 3);
  assert.deepEqual(cyclic.map((t) => t.id).sort(), [1, 2, 3]);
  assert.equal(cyclic[0].id, 3);
});

test('afterLabel names the dependencies by title, or by id when unknown', () => {
  const all = new Map([[1, ticket(1, 'Serve the greeting')], [2, ticket(2, 'Show it', [1])]]);
  assert.equal(afterLabel(ticket(3, 'Docs', [1, 2]), (id) => all.get(id)), 'after: Serve the greeting, Show it');
  assert.equal(afterLabel(ticket(4, 'x', [9]), (id) => all.get(id)), 'after: #9');
  assert.equal(afterLabel(ticket(5, 'free'), (id) => all.get(id)), '');
});

test('groupTickets nests a breakdown\'s tickets under one initiative, in dependency order, newest first', () => {
  const ts = [ticket(1, 'old'), ticket(2, 'api', [], 10), ticket(3, 'ui', [2], 10), ticket(4, 'docs', [2, 3], 10), ticket(5, 'new')];
  const top = groupTickets(ts);
  assert.deepEqual(top.map((e) => (e.kind === 'ticket' ? e.ticket.title : `initiative ${e.runId}`)), ['new', 'initiative 10', 'old']);
  const init = top[1];
  assert.equal(init.kind, 'initiative');
  if (init.kind === 'initiative') assert.deepEqual(init.tickets.map((t) => t.title), ['api', 'ui', 'docs']);
});

test('groupTickets shows a running breakdown before it has tickets, at the top', () => {
  const top = groupTickets([ticket(1, 'a')], [{ id: 12, root: '/repo' }]);
  assert.equal(top[0].kind, 'initiative');
  if (top[0].kind === 'initiative') assert.deepEqual([top[0].runId, top[0].tickets.length], [12, 0]);
  // Once its tickets exist it is not listed twice.
  assert.equal(groupTickets([ticket(2, 'b', [], 12)], [{ id: 12, root: '/repo' }]).length, 1);
});

test('initiativeTitle takes the first line (without a heading mark), shortened', () => {
  assert.equal(initiativeTitle('# Greeting service\n\nMore text', 3), 'Greeting service');
  assert.equal(initiativeTitle(undefined, 3), 'Initiative #3');
  assert.equal(initiativeTitle('  \n', 3), 'Initiative #3');
  const long = initiativeTitle('x'.repeat(100), 3, 20);
  assert.equal(long.length, 20);
  assert.ok(long.endsWith('…'));
});

test('passMessage words the breakdown passes', () => {
  assert.equal(passMessage('Outline'), 'outlining the tickets…');
  assert.equal(passMessage('Expansion'), 'expanding each ticket…');
  assert.equal(passMessage('Outline repair'), 'repairing the dependency graph…');
  assert.equal(passMessage('Linked research: backend'), 'researching backend…');
});

test('suggestLinkName uses the folder name, unique among the links', () => {
  assert.equal(suggestLinkName('/src/My Backend/', new Set()), 'my-backend');
  assert.equal(suggestLinkName('/src/api', new Set(['api'])), 'api-2');
  assert.equal(suggestLinkName('/', new Set()), 'linked');
});

test('stripPlanBlock hides a breakdown\'s outline and expansion JSON', () => {
  assert.equal(stripPlanBlock('Three tickets cover it.\n\n<planwire-outline>{"tickets": []}</planwire-outline>\n\n<planwire-expansion>{"tickets": []}</planwire-expansion>'), 'Three tickets cover it.');
  assert.equal(stripPlanBlock('Found it.\n<planwire-research>{"contract": "x"}</planwire-research> done'), 'Found it.\n done');
  assert.equal(stripPlanBlock('Outline:\n<planwire-outline>{"tick'), 'Outline:');
  assert.equal(stripPlanBlock('Outline:\n<planwire-ou'), 'Outline:');
  assert.equal(stripPlanBlock('a <p> tag and <planwire is fine'), 'a <p> tag and <planwire is fine');
});

test('renderBreakdown shows the initiative, its transcript without JSON, and the tickets in order with "after:"', () => {
  const run: Run = { id: 10, ticketId: null, kind: 'breakdown', root: '/repo', status: 'completed', tool: 'script', model: 'breakdown', createdAt: '2025-01-01T00:00:00Z', startedAt: '2025-01-01T00:00:00Z', endedAt: '2025-01-01T00:00:02Z', lastSeq: 3 };
  const t = newRunTranscript(10);
  applyEvents(t, [
    { seq: 1, ts: 'x', agentRunId: 1, kind: 'subagent', phase: 'start', label: 'Outline' },
    { seq: 2, ts: 'x', agentRunId: 1, kind: 'text', text: 'Three tickets.\n<planwire-outline>{"tickets": [{"key": "RAW"}]}</planwire-outline>', final: true },
    { seq: 3, ts: 'x', agentRunId: 1, kind: 'subagent', phase: 'end', label: 'Outline', status: 'completed' },
  ]);
  const tickets = orderByDependencies([ticket(3, 'ui', [2], 10), ticket(2, 'api <v1>', [], 10)]);
  const html = renderBreakdown({ run, description: 'Greeting <service>', title: 'Greeting <service>', transcript: t, tickets, now: Date.now() });
  assert.match(html, /Greeting &lt;service&gt;/);
  assert.match(html, /agent-label">Outline</);
  assert.doesNotMatch(html, /Subagent: Outline/);
  assert.match(html, /Three tickets\./);
  assert.doesNotMatch(html, /RAW|planwire-outline/);
  assert.match(html, /2 tickets, in dependency order/);
  assert.ok(html.indexOf('api &lt;v1&gt;') < html.indexOf('>ui<'));
  assert.match(html, /after: api &lt;v1&gt;/);
  assert.doesNotMatch(html, /data-cmd="stopRun"/);
});

test('renderBreakdown of a failed or running breakdown: failure message, Stop button', () => {
  const base: Run = { id: 11, ticketId: null, kind: 'breakdown', status: 'failed', tool: 'script', model: 'fail', createdAt: 'x', lastSeq: 0, failure: { code: 'planner_error', message: 'Invalid API key' } };
  const failed = renderBreakdown({ run: base, title: 'Initiative #11', tickets: [], now: Date.now() });
  assert.match(failed, /Run failed<\/span> Invalid API key/);
  const running = renderBreakdown({ run: { ...base, status: 'running', failure: null }, title: 'x', tickets: [], now: Date.now() });
  assert.match(running, /data-cmd="stopRun"/);
  assert.match(running, /breaking down/);
});
