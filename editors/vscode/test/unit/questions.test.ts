import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OTHER_LABEL, answerText, answerable, answeredItems, pickSpec, questionSummary, toAnswer, needsInput, statusSummary } from '../../src/pure/questions';
import type { Question } from '../../src/pure/types';

const q: Question = {
  id: 3,
  ticketId: 1,
  runId: 2,
  status: 'open',
  source: 'plan',
  items: [
    { header: 'Storage', question: 'Where should sessions be stored?', options: [{ label: 'SQLite', description: 'one file' }, { label: 'Redis' }], multiSelect: false, allowOther: true },
    { header: 'Targets', question: 'Which platforms?', options: [{ label: 'Linux' }, { label: 'macOS' }, { label: 'Windows' }], multiSelect: true, allowOther: false },
    { header: 'Name', question: 'What should the flag be called?', options: [], multiSelect: false, allowOther: false },
  ],
};

test('single-select item with Other maps to a QuickPick with an "Other…" entry', () => {
  const s = pickSpec(q, 0, 'Add sessions');
  assert.equal(s.title, 'Add sessions: Storage (1/3)');
  assert.equal(s.placeholder, 'Where should sessions be stored?');
  assert.equal(s.canPickMany, false);
  assert.equal(s.textOnly, false);
  assert.deepEqual(s.items.map((i) => i.label), ['SQLite', 'Redis', OTHER_LABEL]);
  assert.equal(s.items[0].description, 'one file');
  assert.equal(s.items[2].isOther, true);
});

test('multi-select item without Other maps to a many-pick QuickPick', () => {
  const s = pickSpec(q, 1);
  assert.equal(s.canPickMany, true);
  assert.deepEqual(s.items.map((i) => i.label), ['Linux', 'macOS', 'Windows']);
  assert.equal(s.title, 'Targets (2/3)');
});

test('an item with no options asks for text only', () => {
  const s = pickSpec(q, 2);
  assert.equal(s.textOnly, true);
  assert.deepEqual(s.items, []);
});

test('picked entries become an Answer', () => {
  const s0 = pickSpec(q, 0);
  assert.deepEqual(toAnswer(q.items[0], [s0.items[0]]), { selected: ['SQLite'] });
  assert.deepEqual(toAnswer(q.items[0], [s0.items[2]], '  Postgres '), { selected: [], other: 'Postgres' });
  assert.equal(toAnswer(q.items[0], [s0.items[2]], '   '), undefined, 'Other… needs text');
  assert.equal(toAnswer(q.items[0], []), undefined, 'nothing picked');
  assert.equal(toAnswer(q.items[0], [s0.items[0], s0.items[1]]), undefined, 'two picks on a single-select item');
  const s1 = pickSpec(q, 1);
  assert.deepEqual(toAnswer(q.items[1], [s1.items[0], s1.items[2]]), { selected: ['Linux', 'Windows'] });
  assert.deepEqual(toAnswer(q.items[2], [], 'fast-mode'), { selected: [], other: 'fast-mode' });
});

test('a single question has no step counter and a header fallback', () => {
  const one: Question = { ...q, items: [{ header: '', question: 'Proceed?', options: [{ label: 'Yes' }, { label: 'No' }] }] };
  const s = pickSpec(one, 0);
  assert.equal(s.title, 'Question');
  assert.equal(s.canPickMany, false);
  assert.deepEqual(s.items.map((i) => i.label), ['Yes', 'No']);
});

test('summary and answerable questions', () => {
  assert.equal(questionSummary(q), 'Where should sessions be stored? (+2 more)');
  const list: Question[] = [
    { ...q, id: 9, status: 'answered' },
    { ...q, id: 5, status: 'stale' },
    { ...q, id: 4, status: 'open' },
  ];
  assert.deepEqual(answerable(list).map((x) => x.id), [4, 5]);
  assert.deepEqual(answerable(undefined), []);
});

test('answered questions: each item with the chosen labels and the free text', () => {
  assert.deepEqual(answeredItems(q), []);
  const answered: Question = { ...q, status: 'answered', answers: [{ selected: [], other: 'Postgres' }, { selected: ['Linux', 'macOS'] }, { selected: [], other: '--keep' }] };
  assert.deepEqual(answeredItems(answered).map((a) => a.answer), ['“Postgres”', 'Linux, macOS', '“--keep”']);
  assert.equal(answerText({ selected: ['Hi there'], other: null }), 'Hi there');
  assert.equal(answerText(undefined), '');
});

test('the status bar counts planning runs and tickets needing input', () => {
  assert.equal(statusSummary(0, 0).text, '$(checklist) planwire');
  assert.equal(statusSummary(2, 0).text, 'planwire: $(sync~spin) 2 planning');
  assert.equal(statusSummary(1, 1).text, 'planwire: $(sync~spin) 1 planning · $(bell-dot) 1 needs input');
  assert.equal(statusSummary(0, 3).text, 'planwire: $(bell-dot) 3 need input');
  assert.match(statusSummary(0, 3).tooltip, /3 tickets waiting for your answer\. Click to answer/);
  const q = { id: 1, ticketId: 1, runId: 1, status: 'open' as const, source: 'plan' as const, items: [] };
  assert.equal(needsInput({ status: 'planned', openQuestions: [q] }), true);
  assert.equal(needsInput({ status: 'needs_input' }), true);
  assert.equal(needsInput({ status: 'planned', openQuestions: [{ ...q, status: 'answered' }] }), false);
});
