// The transcript webview's script (bundled to dist/webview.js). The extension sends a `reset`
// (the whole page in one string) when the page is opened or reloaded, then `patch`es: rows to
// append, rows or parts to replace (pure/page.ts). Patches are applied in the next frame, a
// few milliseconds of work per frame at most, so the workbench's thread is never held long. Rows go into chunks of CHUNK_ROWS whose
// layout the browser skips while they are off screen (`content-visibility: auto` in
// transcript.css), so appending stays cheap however long the transcript is.
// The reader's place is kept: rows they opened or closed stay so across updates and reloads, the
// page follows new rows only while scrolled to the bottom, and a live run's clock ticks here,
// once a second, in its own element. No remote resources; actions go back as messages.

import type { Op, ToWebview } from '../pure/page';
import { formatDuration } from '../pure/format';
import { CHUNK_ROWS } from '../pure/layout';

interface State { ticketId?: number; runId?: number; toggled: Record<string, boolean>; scrollY?: number; atBottom?: boolean }
declare function acquireVsCodeApi(): { getState(): Partial<State> | undefined; setState(s: State): void; postMessage(m: unknown): void };

const vscode = acquireVsCodeApi();
const root = document.getElementById('root')!;
const saved = vscode.getState() ?? {};
// A ticket's page carries data-ticket-id; a breakdown's page data-run-id.
const ticketId = document.body.dataset.ticketId ? Number(document.body.dataset.ticketId) : undefined;
const runId = document.body.dataset.runId ? Number(document.body.dataset.runId) : undefined;
/** data-key → open, for rows the reader toggled. */
const toggled: Record<string, boolean> = saved.toggled ?? {};
let scrollY = saved.scrollY;
let stuck = saved.atBottom ?? true;
/** The page generation drawn; patches of another one are ignored. */
let gen = -1;

const save = () => vscode.setState({ ticketId, runId, toggled, scrollY, atBottom: stuck });
save();

function atBottom(): boolean {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
}

/** Applies the reader's open/closed choice to a `<details>` with this key, if they made one. */
function applyToggle(key: string): void {
  if (!Object.prototype.hasOwnProperty.call(toggled, key)) return;
  const el = document.getElementById(`pw-${key}`);
  if (el instanceof HTMLDetailsElement && el.open !== toggled[key]) el.open = toggled[key];
}

function keyOf(id: string): string {
  return id.startsWith('pw-') ? id.slice(3) : id;
}

/** Appends rows to a container, filling its last chunk, then new ones. */
function appendRows(parent: HTMLElement, ops: Extract<Op, { op: 'append' }>[]): void {
  if (!parent.hasAttribute('data-chunked')) {
    parent.insertAdjacentHTML('beforeend', ops.map((o) => o.html).join(''));
    return;
  }
  let chunk = parent.lastElementChild as HTMLElement | null;
  let room = chunk ? CHUNK_ROWS - chunk.childElementCount : 0;
  let i = 0;
  while (i < ops.length) {
    if (!chunk || room <= 0) {
      chunk = document.createElement('div');
      chunk.className = 'chunk';
      parent.appendChild(chunk);
      room = CHUNK_ROWS;
    }
    const take = ops.slice(i, i + room);
    chunk.insertAdjacentHTML('beforeend', take.map((o) => o.html).join(''));
    i += take.length;
    room -= take.length;
  }
}

function replace(id: string, html: string): void {
  const el = document.getElementById(id);
  if (!el) return;
  el.outerHTML = html;
  applyToggle(keyOf(id));
}

/** Appends to one container inserted in one go: at most a chunk's worth, to keep tasks short. */
const MAX_GROUP = CHUNK_ROWS;

/** Applies the op at `i` (a run of appends to one container together); returns the next index. */
function applyStep(ops: Op[], i: number): number {
  const op = ops[i];
  if (op.op === 'append') {
    const run: Extract<Op, { op: 'append' }>[] = [];
    while (i < ops.length && run.length < MAX_GROUP) {
      const o = ops[i];
      if (o.op !== 'append' || o.parent !== op.parent) break;
      // A row already shown is replaced, never doubled.
      if (document.getElementById(o.id)) {
        if (run.length) break;
        replace(o.id, o.html);
      } else run.push(o);
      i++;
    }
    const parent = document.getElementById(op.parent);
    if (parent && run.length) {
      appendRows(parent, run);
      for (const o of run) applyToggle(keyOf(o.id));
    }
    return i;
  }
  if (op.op === 'replace') replace(op.id, op.html);
  else if (op.op === 'fold' && !Object.prototype.hasOwnProperty.call(toggled, op.key)) {
    const el = document.getElementById(op.id);
    if (el instanceof HTMLDetailsElement) el.open = op.open;
  }
  return i + 1;
}

/**
 * Ops received and not applied yet, in order. They are applied once per frame, within a time
 * budget, so that the workbench (which shares this thread) never waits long for it; the rest
 * waits for the next frame. The extension is told once all of a patch is applied.
 */
const FRAME_BUDGET_MS = 8;
const pending: Op[] = [];
let next = 0;
let frame = false;
/** The last reset or patch received; acknowledged once applied (the extension paces itself). */
let appliedN = 0;

function schedule(): void {
  if (frame) return;
  frame = true;
  const run = () => {
    if (!frame) return;
    frame = false;
    const follow = atBottom();
    const deadline = performance.now() + FRAME_BUDGET_MS;
    while (next < pending.length && performance.now() < deadline) next = applyStep(pending, next);
    if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
    if (next < pending.length) {
      schedule();
      return;
    }
    pending.length = 0;
    next = 0;
    vscode.postMessage({ type: 'applied', n: appliedN });
  };
  requestAnimationFrame(run);
  // A page that is not painted gets no frames.
  setTimeout(run, 100);
}

/** The page's status on <body>, written only when it changes (a write restyles the page). */
function setStatus(status: string): void {
  if (document.body.dataset.status !== status) document.body.dataset.status = status;
}

function reset(html: string): void {
  pending.length = 0;
  next = 0;
  root.innerHTML = html;
  for (const key of Object.keys(toggled)) applyToggle(key);
  if (stuck || scrollY === undefined) window.scrollTo(0, document.documentElement.scrollHeight);
  else window.scrollTo(0, scrollY);
}

window.addEventListener('message', (e: MessageEvent<ToWebview>) => {
  const m = e.data;
  if (!m || typeof m !== 'object') return;
  if (m.type === 'reset') {
    gen = m.gen;
    reset(m.html);
    setStatus(m.status || '');
    appliedN = m.n;
    vscode.postMessage({ type: 'applied', n: m.n });
  } else if (m.type === 'patch') {
    if (m.gen !== gen) return;
    for (const op of m.ops) pending.push(op);
    setStatus(m.status || '');
    appliedN = m.n;
    schedule();
  } else if (m.type === 'error') {
    const div = document.createElement('div');
    div.className = 'error';
    div.textContent = m.message;
    root.prepend(div);
  }
});

// The reader's place, for the next reload of this page.
let scrollTimer: number | undefined;
window.addEventListener('scroll', () => {
  if (scrollTimer !== undefined) return;
  scrollTimer = window.setTimeout(() => {
    scrollTimer = undefined;
    scrollY = window.scrollY;
    stuck = atBottom();
    save();
  }, 200);
}, { passive: true });

// Remember rows the reader opens or closes (a click or Enter/Space on the summary).
root.addEventListener('click', (e) => {
  const target = e.target as HTMLElement;
  const summary = target.closest('summary');
  const d = summary?.parentElement;
  if (d instanceof HTMLDetailsElement && d.dataset.key) {
    toggled[d.dataset.key] = !d.open;
    save();
  }
  const button = target.closest<HTMLElement>('[data-cmd]');
  if (button) {
    e.preventDefault();
    const qid = button.dataset.questionId ? Number(button.dataset.questionId) : undefined;
    const tid = button.dataset.ticketId ? Number(button.dataset.ticketId) : undefined;
    vscode.postMessage({ type: 'command', cmd: button.dataset.cmd, questionId: qid, ticketId: tid });
  }
});

// A live run's clock: one element per live run, updated here once a second.
const clocks = document.getElementsByClassName('clock');
window.setInterval(() => {
  for (const el of Array.from(clocks)) {
    const since = Number((el as HTMLElement).dataset.since);
    if (Number.isFinite(since)) el.textContent = `running for ${formatDuration(Date.now() - since)}`;
  }
}, 1000);

vscode.postMessage({ type: 'ready' });
