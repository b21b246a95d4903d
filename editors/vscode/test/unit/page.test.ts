import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PageModel, type Op } from '../../src/pure/page';
import { CHUNK_ROWS, ticketPage, type TicketView } from '../../src/pure/render';
import { applyDelta, applyEvents, newRunTranscript, questionChanged, type RunTranscript } from '../../src/pure/transcript';
import type { Question, Run, Ticket, TranscriptEvent } from '../../src/pure/types';

const ticket: Ticket = { id: 1, root: '/repo', title: 'Greeting', description: 'Make it configurable.', status: 'planning', tool: 'script', model: 'demo', createdAt: '2025-01-01T00:00:00Z', updatedAt: '2025-01-01T00:00:00Z' };
const running = (id: number, lastSeq = 0): Run => ({ id, ticketId: 1, status: 'running', tool: 'script', createdAt: '2025-01-01T00:00:00Z', startedAt: '2025-01-01T00:00:01Z', lastSeq });

let ts = 0;
const at = () => new Date(Date.UTC(2025, 0, 1, 0, 0, ts++)).toISOString();
const text = (seq: number, t: string): TranscriptEvent => ({ seq, ts: at(), kind: 'text', text: t, final: false });
const call = (seq: number, id: string): TranscriptEvent => ({ seq, ts: at(), kind: 'toolCall', callId: id, name: 'Read', input: `src/${id}.rs` });
const result = (seq: number, id: string): TranscriptEvent => ({ seq, ts: at(), kind: 'toolResult', callId: id, status: 'completed', output: `contents of ${id}` });

function page(runs: Run[], transcripts: Map<number, RunTranscript>, over: Partial<TicketView> = {}) {
  return ticketPage({ ticket, runs, transcripts, questions: [], now: Date.parse('2025-01-01T00:00:05Z'), ...over });
}

const appends = (ops: Op[]) => ops.filter((o) => o.op === 'append');
const replaces = (ops: Op[]) => ops.filter((o) => o.op === 'replace');

test('after a reset, a patch carries only the new rows, and nothing when nothing changed', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  applyEvents(t, [text(1, 'Looking around.')]);
  const model = new PageModel();
  const html = model.reset(page([running(4, 1)], transcripts));
  assert.match(html, /id="pw-r4-s1"/);
  assert.match(html, /<div class="chunk">/);
  assert.deepEqual(model.patch(page([running(4, 1)], transcripts)), []);

  applyEvents(t, [text(2, 'Then **more**.'), call(3, 'a')]);
  const ops = model.patch(page([running(4, 3)], transcripts))!;
  const rows = appends(ops);
  assert.deepEqual(rows.map((o) => o.op === 'append' && [o.parent, o.id]), [['pw-c-run-4', 'pw-r4-s2'], ['pw-c-run-4', 'pw-r4-tool-a']]);
  assert.match(rows[0].html, /<strong>more<\/strong>/);
  // The footer (events received) changed, the header did not.
  assert.ok(replaces(ops).some((o) => o.id === 'pw-run-4-foot'));
  assert.ok(!replaces(ops).some((o) => o.id === 'pw-head'));
});

test('a tool call that gets its result replaces its one row', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  applyEvents(t, [call(1, 'a'), call(2, 'b')]);
  const model = new PageModel();
  model.reset(page([running(4, 2)], transcripts));
  applyEvents(t, [result(3, 'b')]);
  const ops = model.patch(page([running(4, 3)], transcripts))!;
  assert.equal(appends(ops).length, 0);
  const rows = replaces(ops).filter((o) => o.id.startsWith('pw-r4-'));
  assert.deepEqual(rows.map((o) => o.id), ['pw-r4-tool-b']);
  assert.match(rows[0].html, /tool-completed/);
  assert.match(rows[0].html, /contents of b/);
});

test('a row added and changed in the same flush is sent once, as it is now', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  const model = new PageModel();
  model.reset(page([running(4)], transcripts));
  applyEvents(t, [call(1, 'a'), result(2, 'a')]);
  const ops = model.patch(page([running(4, 2)], transcripts))!;
  const rows = ops.filter((o) => 'id' in o && o.id.startsWith('pw-r4-'));
  assert.equal(rows.length, 1);
  assert.equal(rows[0].op, 'append');
  assert.match((rows[0] as { html: string }).html, /tool-completed/);
});

test('subagent rows go into the subagent; its end replaces only its summary', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  const model = new PageModel();
  model.reset(page([running(4)], transcripts));
  applyEvents(t, [
    { seq: 1, ts: at(), kind: 'subagent', phase: 'start', label: 'explore', agentRunId: 7 },
    { ...call(2, 'g'), agentRunId: 7 },
  ]);
  const first = model.patch(page([running(4, 2)], transcripts))!;
  assert.deepEqual(appends(first).map((o) => o.op === 'append' && [o.parent, o.id]), [['pw-c-run-4', 'pw-r4-agent-7'], ['pw-c-r4-agent-7', 'pw-r4-tool-g']]);
  // The subagent's row is sent empty: its rows follow as their own appends.
  assert.doesNotMatch(appends(first)[0].html, /pw-r4-tool-g/);
  applyEvents(t, [{ seq: 3, ts: at(), kind: 'subagent', phase: 'end', label: 'explore', status: 'completed', agentRunId: 7 }]);
  const ops = model.patch(page([running(4, 3)], transcripts))!;
  assert.deepEqual(replaces(ops).filter((o) => o.id.startsWith('pw-r4')).map((o) => o.id), ['pw-r4-agent-7-head']);
});

test('when the run ends, calls without a result and the run parts are redrawn, nothing else', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  applyEvents(t, [text(1, 'x'), call(2, 'a'), call(3, 'b'), result(4, 'a')]);
  const model = new PageModel();
  model.reset(page([running(4, 4)], transcripts));
  const ended: Run = { ...running(4, 4), status: 'cancelled', endedAt: '2025-01-01T00:00:09Z' };
  const ops = model.patch(page([ended], transcripts, { ticket: { ...ticket, status: 'stopped' } }))!;
  const ids = replaces(ops).map((o) => o.id).sort();
  assert.deepEqual(ids, ['pw-head', 'pw-r4-tool-b', 'pw-run-4-foot', 'pw-run-4-head'].sort());
  assert.match(replaces(ops).find((o) => o.id === 'pw-r4-tool-b')!.html, /no result/);
});

test('a new run is appended whole and the previous one folds; the plan part appears once', () => {
  const t4 = newRunTranscript(4);
  const t5 = newRunTranscript(5);
  const transcripts = new Map([[4, t4], [5, t5]]);
  applyEvents(t4, [text(1, 'first run')]);
  const model = new PageModel();
  const done4: Run = { ...running(4, 1), status: 'cancelled', endedAt: '2025-01-01T00:00:03Z' };
  model.reset(page([done4], transcripts));
  applyEvents(t5, [text(1, 'second run'), text(2, 'more')]);
  const ops = model.patch(page([done4, running(5, 2)], transcripts))!;
  assert.deepEqual(ops.filter((o) => o.op === 'fold'), [{ op: 'fold', id: 'pw-run-4', key: 'run-4', open: false }]);
  const run = appends(ops).find((o) => o.op === 'append' && o.parent === 'pw-c-runs')!;
  assert.match(run.html, /second run[\s\S]*more/);
  // Its rows came with it, not again as appends.
  assert.equal(appends(ops).length, 1);
  assert.deepEqual(model.patch(page([done4, running(5, 2)], transcripts)), []);
  const planned = { ...ticket, status: 'planned' as const, plan: { title: 'The plan', description: 'Steps.' } };
  const withPlan = model.patch(page([done4, { ...running(5, 2), status: 'completed', endedAt: '2025-01-01T00:00:09Z' }], transcripts, { ticket: planned }))!;
  assert.ok(replaces(withPlan).some((o) => o.id === 'pw-plan' && /The plan/.test(o.html)));
  // A run that went away, or came before the drawn ones, means a redraw.
  assert.equal(model.patch(page([running(5, 2)], transcripts)), undefined);
});

test('an answered question replaces its row in the transcript', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'question', questionId: 9 }]);
  const q: Question = { id: 9, ticketId: 1, runId: 4, status: 'open', source: 'live', items: [{ header: 'Greeting', question: 'Which?', options: [{ label: 'Hi' }] }] };
  const model = new PageModel();
  model.reset(page([running(4, 1)], transcripts, { questions: [q] }));
  questionChanged(t, 9);
  const ops = model.patch(page([running(4, 1)], transcripts, { questions: [{ ...q, status: 'answered', answers: [{ selected: ['Hi'] }] }] }))!;
  const row = replaces(ops).find((o) => o.id === 'pw-r4-s1');
  assert.ok(row);
  assert.match(row.html, /Answer:<\/span> Hi/);
});

test('deltas grow one row in place; the stored event that closes it replaces that row', () => {
  const t = newRunTranscript(4);
  const transcripts = new Map([[4, t]]);
  const model = new PageModel();
  model.reset(page([running(4)], transcripts));
  applyDelta(t, { kind: 'text', text: 'The greet' });
  const a = model.patch(page([running(4)], transcripts))!;
  assert.equal(appends(a).length, 1);
  const id = (appends(a)[0] as { id: string }).id;
  assert.match(appends(a)[0].html, /streaming/);
  applyDelta(t, { kind: 'text', text: 'ing is a literal.' });
  const b = model.patch(page([running(4)], transcripts))!;
  assert.deepEqual(replaces(b).filter((o) => o.id.startsWith('pw-r4')).map((o) => o.id), [id]);
  assert.match(replaces(b).find((o) => o.id === id)!.html, /The greeting is a literal\./);
  applyEvents(t, [text(1, 'The greeting is a literal.')]);
  const c = model.patch(page([running(4, 1)], transcripts))!;
  assert.equal(appends(c).length, 0);
  const row = replaces(c).find((o) => o.id === id)!;
  assert.doesNotMatch(row.html, /streaming/);
  assert.equal(t.blocks.length, 1);
});

test('a 20,000-event run costs the same per event as a 2,000-event one (rows sent once each)', () => {
  const sent = (n: number) => {
    const t = newRunTranscript(4);
    const transcripts = new Map([[4, t]]);
    const model = new PageModel();
    model.reset(page([running(4)], transcripts));
    let bytes = 0;
    let rowOps = 0;
    let seq = 0;
    for (let k = 0; seq < n; k++) {
      // Batches of about 20 events, as the server flushes them at 1,000 lines/s.
      const batch: TranscriptEvent[] = [];
      for (let j = 0; j < 7 && seq < n; j++) {
        batch.push(text(++seq, `step ${k}.${j}`));
        if (seq < n) batch.push(call(++seq, `c${seq}`));
        if (seq < n) batch.push(result(++seq, `c${seq - 1}`));
      }
      applyEvents(t, batch);
      const ops = model.patch(page([running(4, seq)], transcripts))!;
      for (const o of ops) {
        if ('html' in o) bytes += o.html.length;
        if ('id' in o && o.id.startsWith('pw-r4-')) rowOps++;
      }
    }
    return { perEvent: bytes / n, rowOps, rows: t.blocks.length };
  };
  const small = sent(2000);
  const large = sent(20000);
  assert.ok(large.perEvent < small.perEvent * 1.2, `bytes per event: ${small.perEvent.toFixed(0)} at 2k, ${large.perEvent.toFixed(0)} at 20k`);
  // Each row is sent once (appended), plus once more for calls that got their result later.
  assert.ok(large.rowOps <= large.rows * 2, `${large.rowOps} row ops for ${large.rows} rows`);
});

test('a reset draws every row in chunks of CHUNK_ROWS', () => {
  const t = newRunTranscript(4);
  applyEvents(t, Array.from({ length: CHUNK_ROWS * 2 + 3 }, (_, i) => text(i + 1, `row ${i}`)));
  const html = new PageModel().reset(page([running(4, CHUNK_ROWS * 2 + 3)], new Map([[4, t]])));
  assert.equal(html.match(/<div class="chunk">/g)?.length, 3);
  assert.equal(html.match(/class="text"/g)?.length, CHUNK_ROWS * 2 + 3);
});
