import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyDelta, applyEvents, applyHeld, applyOpenBlocks, countBlocks, newRunTranscript, stripPlanBlock, takeChanges } from '../../src/pure/transcript';
import type { TranscriptEvent } from '../../src/pure/types';

let ts = 0;
const at = () => new Date(Date.UTC(2025, 0, 1, 0, 0, ts++)).toISOString();
const text = (seq: number, t: string, final = false, agentRunId?: number): TranscriptEvent => ({ seq, ts: at(), kind: 'text', text: t, final, agentRunId });

const texts = (t: ReturnType<typeof newRunTranscript>) => t.blocks.map((b) => (b.type === 'text' ? b.text : `<${b.type}>`)).join('|');

test('applies events in order; each text event is a block of its own', () => {
  const t = newRunTranscript(1);
  const r = applyEvents(t, [text(1, 'Hello.'), text(2, 'World.')]);
  assert.equal(r.applied, 2);
  assert.equal(t.lastSeq, 2);
  assert.deepEqual(t.blocks[0], { type: 'text', key: 'r1-s1', text: 'Hello.', final: false });
  assert.equal(texts(t), 'Hello.|World.');
});

test('drops events it already has (no doubles)', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [text(1, 'a'), text(2, 'b')]);
  const r = applyEvents(t, [text(2, 'b'), text(3, 'c')]);
  assert.equal(r.applied, 1);
  assert.equal(r.duplicates, 1);
  assert.equal(texts(t), 'a|b|c');
  assert.equal(t.applied, 3);
});

test('holds events back behind a gap until catch-up fills it (no holes)', () => {
  const t = newRunTranscript(7);
  applyEvents(t, [text(1, 'one ')]);
  const r = applyEvents(t, [text(3, 'three')]);
  assert.equal(r.applied, 0);
  assert.equal(r.needsCatchUp, true);
  assert.equal(t.lastSeq, 1);
  // getTranscript { afterSeq: 1 } returns 2 and 3; 3 is a duplicate of the held one
  const r2 = applyEvents(t, [text(2, 'two '), text(3, 'three')]);
  assert.equal(r2.applied, 2);
  assert.equal(r2.needsCatchUp, false);
  assert.equal(texts(t), 'one |two |three');
  assert.equal(t.applied, t.lastSeq);
});

test('a catch-up page and live notifications interleaved in any order give each event once', () => {
  const all: TranscriptEvent[] = Array.from({ length: 40 }, (_, i) => text(i + 1, `${i + 1} `));
  const t = newRunTranscript(2);
  applyEvents(t, all.slice(20, 25)); // live notifications that arrived first
  applyEvents(t, all.slice(0, 22)); // catch-up page
  applyEvents(t, all.slice(22, 30)); // overlapping live batch
  applyEvents(t, all.slice(25, 40)); // second page
  assert.equal(t.lastSeq, 40);
  assert.equal(t.applied, 40);
  assert.equal(texts(t), all.map((e) => (e as { text: string }).text).join('|'));
});

test('tool calls become rows with their result and status', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [
    { seq: 1, ts: at(), kind: 'toolCall', callId: 'c1', name: 'Read', input: 'src/main.rs' },
    { seq: 2, ts: at(), kind: 'toolCall', callId: 'c2', name: 'Bash', input: 'cargo test' },
    { seq: 3, ts: at(), kind: 'toolResult', callId: 'c1', status: 'completed', output: 'fn main() {}' },
    { seq: 4, ts: at(), kind: 'toolResult', callId: 'c2', status: 'error', output: 'permission denied' },
  ]);
  assert.equal(t.blocks.length, 2);
  assert.deepEqual(
    t.blocks.map((b) => b.type === 'tool' && [b.name, b.status, b.output]),
    [['Read', 'completed', 'fn main() {}'], ['Bash', 'error', 'permission denied']],
  );
});

test('subagent events nest under the subagent block, and the main agent continues at top level', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [
    text(1, 'Let me look around.', false, 10),
    { seq: 2, ts: at(), kind: 'toolCall', callId: 'task', name: 'Task', input: 'explore the parser', agentRunId: 10 },
    { seq: 3, ts: at(), kind: 'subagent', phase: 'start', label: 'explore the parser', agentRunId: 11 },
    { seq: 4, ts: at(), kind: 'toolCall', callId: 'g1', name: 'Grep', input: 'fn parse', agentRunId: 11 },
    { seq: 5, ts: at(), kind: 'toolResult', callId: 'g1', status: 'completed', output: '3 matches', agentRunId: 11 },
    text(6, 'The parser lives in parse.rs.', false, 11),
    { seq: 7, ts: at(), kind: 'subagent', phase: 'end', label: 'explore the parser', status: 'completed', agentRunId: 11 },
    { seq: 8, ts: at(), kind: 'toolResult', callId: 'task', status: 'completed', output: 'done', agentRunId: 10 },
    text(9, 'Now the plan.', true, 10),
  ]);
  const types = t.blocks.map((b) => b.type);
  assert.deepEqual(types, ['text', 'tool', 'subagent', 'text']);
  const sub = t.blocks[2];
  assert.ok(sub.type === 'subagent');
  assert.equal(sub.ended, true);
  assert.equal(sub.status, 'completed');
  assert.deepEqual(sub.children.map((b) => b.type), ['tool', 'text']);
  assert.equal(countBlocks(t.blocks), 6);
});

test('reasoning, errors, usage, session, questions and raw lines', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [
    { seq: 1, ts: at(), kind: 'reasoning', text: 'Thinking about the layout.' },
    { seq: 2, ts: at(), kind: 'reasoning', text: 'Then the tests.' },
    { seq: 3, ts: at(), kind: 'session', providerSessionId: 'abc' },
    { seq: 4, ts: at(), kind: 'raw', line: '{"type":"x"}' },
    { seq: 5, ts: at(), kind: 'raw', line: '{"type":"y"}' },
    { seq: 6, ts: at(), kind: 'error', errorKind: 'rate_limit', message: 'slow down' },
    { seq: 7, ts: at(), kind: 'question', questionId: 4 },
    { seq: 8, ts: at(), kind: 'usage', inputTokens: 1200, outputTokens: 300, cacheReadTokens: 50, cacheWriteTokens: 5, costUsd: 0.0123 },
  ]);
  assert.deepEqual(t.blocks.map((b) => b.type), ['reasoning', 'raw', 'error', 'question']);
  assert.equal((t.blocks[0] as { text: string }).text, 'Thinking about the layout.\n\nThen the tests.');
  assert.deepEqual((t.blocks[1] as { lines: string[] }).lines, ['{"type":"x"}', '{"type":"y"}']);
  assert.equal(t.providerSessionId, 'abc');
  assert.equal(t.usage?.costUsd, 0.0123);
});

test('an unknown event kind is kept visible as a raw line', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'future', x: 1 } as unknown as TranscriptEvent]);
  assert.equal(t.blocks[0].type, 'raw');
});

test('final text starts a new block after non-final text', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [text(1, 'Looking.'), text(2, 'Here is the plan.', true)]);
  assert.deepEqual(t.blocks.map((b) => b.type === 'text' && b.final), [false, true]);
});

test('stripPlanBlock removes the plan JSON, closed, still streaming, or a partial tag', () => {
  assert.equal(stripPlanBlock('Done.\n<planwire-plan>{"title":"x"}</planwire-plan>\nBye'), 'Done.\n\nBye');
  assert.equal(stripPlanBlock('Summary first.\n<planwire-plan>{"title": "x", "descr'), 'Summary first.');
  assert.equal(stripPlanBlock('Summary.\n<planwire-pl'), 'Summary.');
  assert.equal(stripPlanBlock('Summary.\n```json\n<planwire-plan>{}</planwire-plan>\n```'), 'Summary.');
  assert.equal(stripPlanBlock('a < b and <planwire is fine'), 'a < b and <planwire is fine');
  assert.equal(stripPlanBlock('<planwire-plan>{}</planwire-plan>'), '');
});

test('stripPlanBlock hides every <planwire-…> block by one rule, research selection included', () => {
  const selection = 'I will research the backend.\n<planwire-research-selection>{"links":["api"]}</planwire-research-selection>';
  assert.equal(stripPlanBlock(selection), 'I will research the backend.');
  assert.equal(stripPlanBlock('Found it.\n<planwire-research>{"facts":[]}</planwire-research>'), 'Found it.');
  // A tag no client knows yet is hidden too.
  assert.equal(stripPlanBlock('a <planwire-future-thing>{"x":1}</planwire-future-thing> b'), 'a  b');
  // Still streaming: an unclosed block, or a partial opening tag of any name.
  assert.equal(stripPlanBlock('Picking.\n<planwire-research-selection>{"links": ["a'), 'Picking.');
  assert.equal(stripPlanBlock('Picking.\n<planwire-research-sel'), 'Picking.');
  assert.equal(stripPlanBlock('Picking.\n<planw'), 'Picking.');
  // Other tags stay.
  assert.equal(stripPlanBlock('use <details> here'), 'use <details> here');
  assert.equal(stripPlanBlock('<planwire-outline>{}</planwire-outline>Three tickets.'), 'Three tickets.');
});

test('takeChanges: blocks added in order with their container, and blocks changed in place', () => {
  const t = newRunTranscript(3);
  applyEvents(t, [
    text(1, 'a'),
    { seq: 2, ts: at(), kind: 'toolCall', callId: 'c', name: 'Read', input: 'x' },
    { seq: 3, ts: at(), kind: 'subagent', phase: 'start', label: 'explore', agentRunId: 5 },
    text(4, 'inside', false, 5),
  ]);
  const first = takeChanges(t);
  assert.deepEqual(first.added.map((a) => [a.block.key, a.container]), [['r3-s1', 'run-3'], ['r3-tool-c', 'run-3'], ['r3-agent-5', 'run-3'], ['r3-s4', 'r3-agent-5']]);
  assert.deepEqual(first.changed, []);
  applyEvents(t, [
    { seq: 5, ts: at(), kind: 'toolResult', callId: 'c', status: 'completed', output: 'ok' },
    { seq: 6, ts: at(), kind: 'reasoning', text: 'hmm', agentRunId: 5 },
    { seq: 7, ts: at(), kind: 'reasoning', text: 'more', agentRunId: 5 },
  ]);
  const second = takeChanges(t);
  assert.deepEqual(second.added.map((a) => a.block.key), ['r3-s6']);
  assert.deepEqual(second.changed.map((b) => b.key), ['r3-tool-c']);
  assert.deepEqual(takeChanges(t), { added: [], changed: [] });
});

test('text deltas extend one block; the stored text event closes it in place, without a second block', () => {
  const t = newRunTranscript(1);
  assert.equal(applyDelta(t, { kind: 'text', text: 'Hel' }).changed, true);
  applyDelta(t, { kind: 'text', text: 'lo.' });
  assert.equal(t.blocks.length, 1);
  const b = t.blocks[0];
  assert.ok(b.type === 'text' && b.streaming && b.text === 'Hello.');
  applyEvents(t, [text(1, 'Hello.', true)]);
  assert.equal(t.blocks.length, 1);
  assert.ok(b.type === 'text' && !b.streaming && b.final && b.text === 'Hello.');
  // The next delta opens a new block after it.
  applyDelta(t, { kind: 'text', text: 'Next' });
  assert.equal(t.blocks.length, 2);
  assert.equal(t.blocks[0].key, b.key);
});

test('reasoning deltas continue stored reasoning in one block; the stored event replaces the streamed part', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'reasoning', text: 'First thought.' }]);
  applyDelta(t, { kind: 'reasoning', text: 'Second' });
  applyDelta(t, { kind: 'reasoning', text: ' thought' });
  assert.equal(t.blocks.length, 1);
  assert.equal((t.blocks[0] as { text: string }).text, 'First thought.\n\nSecond thought');
  applyEvents(t, [{ seq: 2, ts: at(), kind: 'reasoning', text: 'Second thought.' }]);
  assert.equal(t.blocks.length, 1);
  assert.equal((t.blocks[0] as { text: string }).text, 'First thought.\n\nSecond thought.');
  assert.equal((t.blocks[0] as { streaming?: boolean }).streaming, undefined);
});

test('deltas of a subagent grow its own block; text and reasoning are open at once; a behind transcript ignores them', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'subagent', phase: 'start', label: 'explore', agentRunId: 4 }]);
  applyDelta(t, { kind: 'reasoning', text: 'thinking', agentRunId: 4 });
  applyDelta(t, { kind: 'text', text: 'main agent' });
  applyDelta(t, { kind: 'text', text: 'sub agent', agentRunId: 4 });
  const sub = t.blocks[0];
  assert.ok(sub.type === 'subagent');
  assert.deepEqual(sub.children.map((b) => b.type), ['reasoning', 'text']);
  assert.equal(t.blocks.length, 2);
  applyEvents(t, [text(2, 'sub agent, stored', false, 4)]);
  assert.equal((sub.children[1] as { text: string }).text, 'sub agent, stored');
  assert.equal(sub.children.length, 2);
  // Behind: a catch-up in flight, or events held back behind a gap.
  t.syncing = true;
  assert.equal(applyDelta(t, { kind: 'text', text: 'x' }).changed, false);
  t.syncing = false;
  applyEvents(t, [text(9, 'ahead of a gap')]);
  assert.equal(applyDelta(t, { kind: 'text', text: 'x' }).changed, false);
  assert.equal(t.held.length, 2, 'held, for after the catch-up');
});

test('offsets: a piece already shown is skipped, an overlapping one adds only its new part, a gap asks for a catch-up', () => {
  const t = newRunTranscript(1);
  assert.deepEqual(applyDelta(t, { kind: 'text', text: 'Réad', offset: 0 }), { changed: true, gap: false });
  assert.equal(applyDelta(t, { kind: 'text', text: 'Réad', offset: 0 }).changed, false, 'offset 0 again: already shown');
  assert.equal(t.blocks.length, 1);
  const b = t.blocks[0] as { text: string };
  assert.equal(applyDelta(t, { kind: 'text', text: 'ad', offset: 2 }).changed, false, 'already shown');
  assert.equal(applyDelta(t, { kind: 'text', text: 'ading', offset: 2 }).changed, true, 'overlapping');
  assert.equal(b.text, 'Réading');
  assert.deepEqual(applyDelta(t, { kind: 'text', text: 'x', offset: 99 }), { changed: false, gap: true });
  assert.equal(b.text, 'Réading');
  // A page that never saw a block's start cannot show its middle.
  const u = newRunTranscript(2);
  assert.deepEqual(applyDelta(u, { kind: 'text', text: 'middle', offset: 5 }), { changed: false, gap: true });
  assert.equal(u.blocks.length, 0);
});

test('attached mid-block: openBlocks give the text so far, held deltas continue it at their offset, the stored event replaces it once', () => {
  const t = newRunTranscript(1);
  t.syncing = true;
  // Deltas that arrive while getTranscript is answered: one the page already covers, one after.
  applyDelta(t, { kind: 'text', text: 'Reading ', offset: 0 });
  applyDelta(t, { kind: 'text', text: 'the ', offset: 8 });
  applyDelta(t, { kind: 'text', text: 'code.', offset: 12 });
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'session', providerSessionId: 's' }]);
  assert.equal(applyOpenBlocks(t, [{ kind: 'text', text: 'Reading the ' }], 1), true);
  t.syncing = false;
  assert.deepEqual(applyHeld(t), { changed: true, gap: false });
  assert.equal(t.blocks.length, 1);
  assert.equal((t.blocks[0] as { text: string }).text, 'Reading the code.');
  applyEvents(t, [text(2, 'Reading the code. Done.', true)]);
  assert.equal(t.blocks.length, 1);
  assert.ok(t.blocks[0].type === 'text' && !t.blocks[0].streaming && t.blocks[0].text === 'Reading the code. Done.');
  // openBlocks for a block already streaming here set it to exactly what was sent.
  applyDelta(t, { kind: 'reasoning', text: 'Hmm', offset: 0 });
  applyOpenBlocks(t, [{ kind: 'reasoning', text: 'Hmm, so' }], 2);
  assert.equal(t.blocks.length, 2);
  assert.equal((t.blocks[1] as { text: string }).text, 'Hmm, so');
  applyDelta(t, { kind: 'reasoning', text: ' then', offset: 7 });
  assert.equal((t.blocks[1] as { text: string }).text, 'Hmm, so then');
});

test('a warning event is a row of its own', () => {
  const t = newRunTranscript(1);
  applyEvents(t, [{ seq: 1, ts: at(), kind: 'warning', message: 'Planning runs without the OS sandbox.' }]);
  assert.deepEqual(t.blocks.map((b) => b.type), ['warning']);
  assert.equal((t.blocks[0] as { message: string }).message, 'Planning runs without the OS sandbox.');
});

test('openBlocks of a page that a notification overtook are stale: the closed block is not opened again', () => {
  const t = newRunTranscript(1);
  applyDelta(t, { kind: 'text', text: 'Reading the code.', offset: 0 });
  // The page was read (last seq 0, the block open); the stored event closing it was notified first.
  applyEvents(t, [text(1, 'Reading the code. Done.', true)]);
  assert.equal(applyOpenBlocks(t, [{ kind: 'text', text: 'Reading the code. Done.' }], 0), false);
  assert.equal(t.blocks.length, 1);
  assert.equal(t.open.size, 0);
});
