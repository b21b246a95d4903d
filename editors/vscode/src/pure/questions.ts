// Maps a planwire question item to what a QuickPick shows, and the picked items back to an
// Answer. Pure (no vscode import) so it is unit-tested with node:test.

import type { Answer, Question, QuestionItem } from './types';

export const OTHER_LABEL = 'Other…';

export interface PickItem {
  label: string;
  description?: string;
  /** True for the "Other…" entry that asks for free text. */
  isOther?: boolean;
}

export interface PickSpec {
  title: string;
  placeholder: string;
  canPickMany: boolean;
  items: PickItem[];
  /** No options at all: ask with an InputBox straight away. */
  textOnly: boolean;
}

/** The QuickPick for item `index` of `question` (title carries "n/m" when there are several). */
export function pickSpec(question: Question, index: number, ticketTitle?: string): PickSpec {
  const item = question.items[index];
  const options = item.options ?? [];
  const allowOther = !!item.allowOther || options.length === 0;
  const items: PickItem[] = options.map((o) => ({ label: o.label, description: o.description || undefined }));
  if (allowOther && options.length > 0) items.push({ label: OTHER_LABEL, description: 'type your own answer', isOther: true });
  const step = question.items.length > 1 ? ` (${index + 1}/${question.items.length})` : '';
  const header = item.header?.trim() || 'Question';
  return {
    title: `${ticketTitle ? `${ticketTitle}: ` : ''}${header}${step}`,
    placeholder: item.question,
    canPickMany: !!item.multiSelect,
    items,
    textOnly: options.length === 0,
  };
}

/**
 * The answer to one item from the picked entries and the text typed after "Other…".
 * Returns undefined when the pick is not a valid answer (nothing picked, or "Other…" with no text).
 */
export function toAnswer(item: QuestionItem, picked: readonly PickItem[], otherText?: string): Answer | undefined {
  const selected = picked.filter((p) => !p.isOther).map((p) => p.label);
  const wantsOther = picked.some((p) => p.isOther) || (item.options ?? []).length === 0;
  const other = wantsOther ? (otherText ?? '').trim() : '';
  if (wantsOther && !other) return undefined;
  if (!selected.length && !other) return undefined;
  if (!item.multiSelect && selected.length > 1) return undefined;
  return other ? { selected, other } : { selected };
}

/** One line summing a question up (notification text, tree tooltip). */
export function questionSummary(question: Question): string {
  const first = question.items[0];
  if (!first) return 'A question';
  const more = question.items.length > 1 ? ` (+${question.items.length - 1} more)` : '';
  return `${first.question}${more}`;
}

/** Questions a person can still answer: open or stale, oldest first. */
export function answerable(questions: readonly Question[] | undefined): Question[] {
  return (questions ?? []).filter((q) => q.status === 'open' || q.status === 'stale').sort((a, b) => a.id - b.id);
}

/** True when the ticket waits for the person: a question to answer, or status needs input. */
export function needsInput(t: { status: string; openQuestions?: Question[] }): boolean {
  return t.status === 'needs_input' || answerable(t.openQuestions).length > 0;
}

/** The status bar's text and tooltip: planning runs and tickets waiting for an answer. */
export function statusSummary(planning: number, waiting: number): { text: string; tooltip: string } {
  const parts: string[] = [];
  if (planning) parts.push(`$(sync~spin) ${planning} planning`);
  if (waiting) parts.push(`$(bell-dot) ${waiting} need${waiting === 1 ? 's' : ''} input`);
  const text = parts.length ? `planwire: ${parts.join(' · ')}` : '$(checklist) planwire';
  const said: string[] = [];
  if (planning) said.push(`${planning} planning run${planning === 1 ? '' : 's'}`);
  if (waiting) said.push(`${waiting} ticket${waiting === 1 ? '' : 's'} waiting for your answer`);
  const tooltip = said.length
    ? `planwire: ${said.join(', ')}. Click to ${waiting ? 'answer' : 'show the tickets'}.`
    : 'planwire: no planning runs. Click to show the tickets.';
  return { text, tooltip };
}

/** The chosen answer of one item: its picked labels, then the free text. '' when none. */
export function answerText(answer: { selected?: string[]; other?: string | null } | undefined): string {
  if (!answer) return '';
  const parts = [...(answer.selected ?? [])];
  const other = answer.other?.trim();
  if (other) parts.push(`“${other}”`);
  return parts.join(', ');
}

/**
 * Each item of an answered question with what was chosen (question records carry `answers`
 * once answered). Empty when the question has no answers.
 */
export function answeredItems(question: Question): { header: string; question: string; answer: string }[] {
  const answers = question.answers ?? [];
  if (!answers.length) return [];
  return question.items.map((item, i) => ({ header: item.header, question: item.question, answer: answerText(answers[i]) }));
}
