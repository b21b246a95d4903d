// The transcript reducer: folds numbered transcript events of one run into display blocks.
// Pure (no vscode import) so it is unit-tested with node:test.
//
// Events are applied strictly in seq order. An event whose seq was already applied is dropped
// (no doubles); an event ahead of the next expected seq is held back until the gap is filled
// (no holes). `needsCatchUp` tells the caller to fetch `planwire/getTranscript { afterSeq: lastSeq }`.
//
// The reducer also records what changed since the renderer last looked (`takeChanges`): the
// blocks added, in order, with the container they go into, and the blocks changed in place (a
// tool call that got its result, reasoning that grew). The renderer sends only those rows to the
// webview, so the cost of an update is proportional to what changed, not to the transcript.
//
// Deltas (`applyDelta`, from `planwire/delta`) extend the open text or reasoning block of their
// agent in place; the stored event that closes the block replaces its text, in the same block,
// so the row neither doubles nor moves. A delta's `offset` (characters of the block sent before
// it) tells a piece already shown (ignored) from a gap (the caller catches up: getTranscript's
// `openBlocks` gives each open block as far as it was sent). Deltas that arrive while a catch-up
// is in flight are held and applied after its page and open blocks, as the spec asks.

import type { DeltaParams, OpenBlock, TranscriptEvent } from './types';

export type ToolState = 'running' | 'completed' | 'error';

export type Block =
  /** `streaming`: still growing from deltas (no stored event has closed it yet). */
  | { type: 'text'; key: string; text: string; final: boolean; streaming?: boolean }
  /** While streaming, `base` is the stored reasoning it continues and `live` the streamed part. */
  | { type: 'reasoning'; key: string; text: string; streaming?: boolean; base?: string; live?: string }
  | { type: 'tool'; key: string; callId: string; name: string; input: string; status: ToolState; output?: string }
  | { type: 'subagent'; key: string; agentRunId?: number; label: string; status?: string; ended: boolean; children: Block[] }
  | { type: 'error'; key: string; errorKind: string; message: string }
  | { type: 'question'; key: string; questionId: number }
  | { type: 'raw'; key: string; lines: string[] }
  /** Something the person should know that did not stop the run (e.g. no OS sandbox). */
  | { type: 'warning'; key: string; message: string };

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

export interface RunTranscript {
  runId: number;
  /** Highest seq applied; every seq in 1..lastSeq was applied exactly once. */
  lastSeq: number;
  /** Number of events applied (equals lastSeq when nothing was missed or doubled). */
  applied: number;
  /** Events received ahead of a gap, waiting for it to be filled. */
  pending: Map<number, TranscriptEvent>;
  blocks: Block[];
  usage?: Usage;
  providerSessionId?: string;
  firstTs?: string;
  lastTs?: string;
  /** Lookups into `blocks` (not serialised). */
  subagents: Map<number, Extract<Block, { type: 'subagent' }>>;
  tools: Map<string, Extract<Block, { type: 'tool' }>>;
  /** Tool calls still waiting for their result. */
  runningTools: Set<Extract<Block, { type: 'tool' }>>;
  /** Question rows, by question id. */
  questionRows: Map<number, Block[]>;
  /** Blocks growing from deltas, by `${agentRunId}:${kind}`. */
  open: Map<string, Block>;
  /** Characters streamed into each open block so far (what the next delta's offset should be). */
  sent: Map<string, number>;
  /** Deltas received while behind (a gap, or a catch-up in flight), applied once caught up. */
  held: DeltaParams[];
  /** Deltas seen (their blocks' keys). */
  deltas: number;
  /** True while a catch-up is in flight: deltas are ignored (their stored events follow). */
  syncing: boolean;
  /** Blocks added since the last `takeChanges`, in order, with their container's key. */
  added: Added[];
  /** Blocks changed in place since the last `takeChanges`. */
  changed: Set<Block>;
  /** Bumped on every change so renderers can skip untouched runs. */
  rev: number;
}

/** A block added to a container: the run's top level (`run-<id>`) or a subagent's (its key). */
export interface Added { block: Block; container: string }

export function runContainer(runId: number): string {
  return `run-${runId}`;
}

export function newRunTranscript(runId: number): RunTranscript {
  return {
    runId,
    lastSeq: 0,
    applied: 0,
    pending: new Map(),
    blocks: [],
    subagents: new Map(),
    tools: new Map(),
    runningTools: new Set(),
    questionRows: new Map(),
    open: new Map(),
    sent: new Map(),
    held: [],
    deltas: 0,
    syncing: false,
    added: [],
    changed: new Set(),
    rev: 0,
  };
}

/** What changed since the last call: blocks added (in order) and blocks changed in place. */
export function takeChanges(t: RunTranscript): { added: Added[]; changed: Block[] } {
  const added = t.added;
  const fresh = new Set(added.map((a) => a.block));
  const changed = [...t.changed].filter((b) => !fresh.has(b));
  t.added = [];
  t.changed = new Set();
  return { added, changed };
}

/** Forgets pending changes (the renderer is about to draw everything). */
export function discardChanges(t: RunTranscript): void {
  t.added = [];
  t.changed = new Set();
}

/** Marks the question rows of this question as changed (it was answered, or went stale). */
export function questionChanged(t: RunTranscript, questionId: number): boolean {
  const rows = t.questionRows.get(questionId) ?? [];
  for (const b of rows) t.changed.add(b);
  return rows.length > 0;
}

/** Marks the rows that look different once the run has ended (calls with no result, subagents). */
export function runEnded(t: RunTranscript): void {
  for (const b of t.runningTools) t.changed.add(b);
  for (const b of t.subagents.values()) if (!b.ended) t.changed.add(b);
  for (const b of t.open.values()) t.changed.add(b);
}

export interface ApplyResult {
  /** Events newly applied. */
  applied: number;
  /** Events dropped because their seq was already applied. */
  duplicates: number;
  /** True when events are held back behind a gap: fetch afterSeq = lastSeq. */
  needsCatchUp: boolean;
}

export function applyEvents(t: RunTranscript, events: readonly TranscriptEvent[]): ApplyResult {
  let applied = 0;
  let duplicates = 0;
  for (const ev of events) {
    if (typeof ev.seq !== 'number' || ev.seq <= t.lastSeq || t.pending.has(ev.seq)) {
      duplicates++;
      continue;
    }
    t.pending.set(ev.seq, ev);
  }
  for (;;) {
    const next = t.pending.get(t.lastSeq + 1);
    if (!next) break;
    t.pending.delete(next.seq);
    applyOne(t, next);
    t.lastSeq = next.seq;
    t.applied++;
    applied++;
  }
  if (applied) t.rev++;
  return { applied, duplicates, needsCatchUp: t.pending.size > 0 };
}

interface Container { list: Block[]; key: string }

/** The block list an event of this agent goes into: a subagent's children, or the run's top level. */
function containerFor(t: RunTranscript, agentRunId: number | undefined): Container {
  if (agentRunId !== undefined) {
    const sub = t.subagents.get(agentRunId);
    if (sub) return { list: sub.children, key: sub.key };
  }
  return { list: t.blocks, key: runContainer(t.runId) };
}

function push(t: RunTranscript, into: Container, block: Block): void {
  into.list.push(block);
  t.added.push({ block, container: into.key });
}

function openKey(agentRunId: number | undefined, kind: 'text' | 'reasoning'): string {
  return `${agentRunId ?? ''}:${kind}`;
}

/** Deltas held while behind, at most (older ones are dropped; the catch-up's open blocks cover them). */
const MAX_HELD = 2000;

/** What a delta did: changed the page, or showed a gap (fetch getTranscript for `openBlocks`). */
export interface DeltaResult { changed: boolean; gap: boolean }

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** `s` without its first `n` characters (code points, as the server counts them). */
function dropChars(s: string, n: number): string {
  if (n <= 0) return s;
  let i = 0;
  for (const ch of s) {
    if (n-- <= 0) break;
    i += ch.length;
  }
  return s.slice(i);
}

/**
 * Applies a delta: a piece extending the open text or reasoning block of its agent (opening one
 * when there is none). While the transcript is behind (a gap, or a catch-up in flight) it is
 * held, and applied by `applyHeld` once caught up.
 */
export function applyDelta(t: RunTranscript, d: Pick<DeltaParams, 'agentRunId' | 'kind' | 'text' | 'offset'>): DeltaResult {
  const none = { changed: false, gap: false };
  if (!d.text || (d.kind !== 'text' && d.kind !== 'reasoning')) return none;
  if (t.syncing || t.pending.size > 0) {
    t.held.push(d as DeltaParams);
    if (t.held.length > MAX_HELD) t.held.shift();
    return none;
  }
  const agent = d.agentRunId ?? undefined;
  const k = openKey(agent, d.kind);
  const open = t.open.get(k);
  const offset = typeof d.offset === 'number' ? d.offset : undefined;
  // With a block open, offset 0 is a piece of it already shown: the stored event that closes a
  // block always comes before the next block's first piece.
  if (open) {
    const sent = t.sent.get(k) ?? 0;
    let piece = d.text;
    if (offset !== undefined) {
      if (offset > sent) return { changed: false, gap: true };
      piece = dropChars(d.text, sent - offset);
      if (!piece) return none;
    }
    extend(t, k, open, piece);
    return { changed: true, gap: false };
  }
  // A piece from the middle of a block this page never saw the start of.
  if (offset !== undefined && offset > 0) return { changed: false, gap: true };
  openBlock(t, agent, d.kind, d.text);
  return { changed: true, gap: false };
}

/** Appends a piece to an open block. */
function extend(t: RunTranscript, k: string, open: Block, piece: string): void {
  if (open.type === 'reasoning') {
    open.live = (open.live ?? '') + piece;
    open.text = joinDelta(open.base ?? '', open.live);
  } else if (open.type === 'text') {
    open.text += piece;
  }
  t.sent.set(k, (t.sent.get(k) ?? 0) + codePoints(piece));
  t.changed.add(open);
  t.rev++;
}

/** Opens a block streaming `text`; reasoning continues the stored reasoning right before it. */
function openBlock(t: RunTranscript, agent: number | undefined, kind: 'text' | 'reasoning', text: string): void {
  const k = openKey(agent, kind);
  const into = containerFor(t, agent);
  const last = into.list[into.list.length - 1];
  t.sent.set(k, codePoints(text));
  t.rev++;
  if (kind === 'reasoning' && last && last.type === 'reasoning' && !last.streaming) {
    // Stored reasoning events next to each other are one block: the delta continues it.
    last.streaming = true;
    last.base = last.text;
    last.live = text;
    last.text = joinDelta(last.base, text);
    t.open.set(k, last);
    t.changed.add(last);
    return;
  }
  const key = `r${t.runId}-d${++t.deltas}`;
  const block: Block = kind === 'text'
    ? { type: 'text', key, text, final: false, streaming: true }
    : { type: 'reasoning', key, text, streaming: true, base: '', live: text };
  t.open.set(k, block);
  push(t, into, block);
}

/**
 * Takes getTranscript's `openBlocks` (on a page that reached the run's last seq, `pageLastSeq`):
 * each open block shows exactly the text sent so far, in the row already streaming when there is
 * one. Only when the transcript stands exactly at the page's last seq: a notification that came
 * while the page was answered (the event that closed a block) makes them stale, and a later
 * delta past what is shown asks for a fresh page.
 */
export function applyOpenBlocks(t: RunTranscript, blocks: readonly OpenBlock[], pageLastSeq: number): boolean {
  if (t.lastSeq !== pageLastSeq) return false;
  let changed = false;
  for (const b of blocks) {
    if (!b.text || (b.kind !== 'text' && b.kind !== 'reasoning')) continue;
    const agent = b.agentRunId ?? undefined;
    const k = openKey(agent, b.kind);
    const open = t.open.get(k);
    if (!open) {
      openBlock(t, agent, b.kind, b.text);
    } else {
      if (open.type === 'reasoning') {
        open.live = b.text;
        open.text = joinDelta(open.base ?? '', b.text);
      } else if (open.type === 'text') {
        open.text = b.text;
      }
      t.sent.set(k, codePoints(b.text));
      t.changed.add(open);
      t.rev++;
    }
    changed = true;
  }
  return changed;
}

/** Applies the deltas held while behind (their offsets skip what the catch-up already showed). */
export function applyHeld(t: RunTranscript): DeltaResult {
  const held = t.held;
  t.held = [];
  const out = { changed: false, gap: false };
  for (const d of held) {
    const r = applyDelta(t, d);
    out.changed ||= r.changed;
    out.gap ||= r.gap;
  }
  return out;
}

/** Reasoning streamed after stored reasoning: a new paragraph, as `joinText` does. */
function joinDelta(base: string, piece: string): string {
  if (!base) return piece;
  return `${base.replace(/\s+$/, '')}\n\n${piece}`;
}

/** Closes the open block of this kind with its stored event; false when none is open. */
function closeOpen(t: RunTranscript, agentRunId: number | undefined, kind: 'text' | 'reasoning', text: string, final: boolean): boolean {
  const k = openKey(agentRunId, kind);
  const open = t.open.get(k);
  if (!open) return false;
  t.open.delete(k);
  t.sent.delete(k);
  if (open.type === 'text') {
    open.text = text;
    open.final = final;
    delete open.streaming;
  } else if (open.type === 'reasoning') {
    open.text = joinText(open.base ?? '', text);
    delete open.streaming;
    delete open.base;
    delete open.live;
  }
  t.changed.add(open);
  return true;
}

/** Joins two consecutive whole blocks (of reasoning) as paragraphs. */
export function joinText(before: string, block: string): string {
  if (!before) return block;
  if (!block) return before;
  return `${before.replace(/\s+$/, '')}\n\n${block.replace(/^\s+/, '')}`;
}

function applyOne(t: RunTranscript, ev: TranscriptEvent): void {
  t.firstTs ??= ev.ts;
  t.lastTs = ev.ts;
  const key = `r${t.runId}-s${ev.seq}`;
  switch (ev.kind) {
    case 'text':
      // A stored text event is a whole text block (one per assistant content block).
      if (closeOpen(t, ev.agentRunId, 'text', ev.text ?? '', !!ev.final)) return;
      push(t, containerFor(t, ev.agentRunId), { type: 'text', key, text: ev.text ?? '', final: !!ev.final });
      return;
    case 'reasoning': {
      if (closeOpen(t, ev.agentRunId, 'reasoning', ev.text ?? '', false)) return;
      const into = containerFor(t, ev.agentRunId);
      const last = into.list[into.list.length - 1];
      if (last && last.type === 'reasoning') {
        last.text = joinText(last.text, ev.text ?? '');
        t.changed.add(last);
      } else push(t, into, { type: 'reasoning', key, text: ev.text ?? '' });
      return;
    }
    case 'toolCall': {
      const existing = t.tools.get(ev.callId);
      if (existing) {
        // A repeated call id updates the row (some CLIs announce a call, then its full input).
        existing.name = ev.name || existing.name;
        existing.input = ev.input || existing.input;
        t.changed.add(existing);
        return;
      }
      const block: Extract<Block, { type: 'tool' }> = {
        type: 'tool', key: `r${t.runId}-tool-${ev.callId}`, callId: ev.callId, name: ev.name, input: ev.input ?? '', status: 'running',
      };
      t.tools.set(ev.callId, block);
      t.runningTools.add(block);
      push(t, containerFor(t, ev.agentRunId), block);
      return;
    }
    case 'toolResult': {
      let block = t.tools.get(ev.callId);
      if (!block) {
        block = { type: 'tool', key: `r${t.runId}-tool-${ev.callId}`, callId: ev.callId, name: 'tool', input: '', status: 'running' };
        t.tools.set(ev.callId, block);
        push(t, containerFor(t, ev.agentRunId), block);
      }
      block.status = ev.status === 'error' ? 'error' : ev.status === 'running' ? 'running' : 'completed';
      block.output = ev.output;
      if (block.status === 'running') t.runningTools.add(block);
      else t.runningTools.delete(block);
      t.changed.add(block);
      return;
    }
    case 'subagent': {
      const id = ev.agentRunId;
      let sub = id !== undefined ? t.subagents.get(id) : undefined;
      if (ev.phase === 'start' || !sub) {
        if (!sub) {
          sub = { type: 'subagent', key: `r${t.runId}-agent-${id ?? ev.seq}`, agentRunId: id, label: ev.label, ended: false, children: [] };
          if (id !== undefined) t.subagents.set(id, sub);
          push(t, { list: t.blocks, key: runContainer(t.runId) }, sub);
        }
        if (ev.label) sub.label = ev.label;
      }
      t.changed.add(sub);
      if (ev.phase === 'end') {
        sub.ended = true;
        sub.status = ev.status ?? 'completed';
      } else if (ev.status) {
        sub.status = ev.status;
      }
      return;
    }
    case 'usage':
      t.usage = {
        inputTokens: ev.inputTokens ?? 0,
        outputTokens: ev.outputTokens ?? 0,
        cacheReadTokens: ev.cacheReadTokens ?? 0,
        cacheWriteTokens: ev.cacheWriteTokens ?? 0,
        costUsd: ev.costUsd ?? 0,
      };
      return;
    case 'session':
      t.providerSessionId = ev.providerSessionId;
      return;
    case 'error':
      push(t, containerFor(t, ev.agentRunId), { type: 'error', key, errorKind: ev.errorKind, message: ev.message });
      return;
    case 'question': {
      const block: Block = { type: 'question', key, questionId: ev.questionId };
      const rows = t.questionRows.get(ev.questionId) ?? [];
      rows.push(block);
      t.questionRows.set(ev.questionId, rows);
      push(t, containerFor(t, ev.agentRunId), block);
      return;
    }
    case 'warning':
      push(t, containerFor(t, ev.agentRunId), { type: 'warning', key, message: ev.message ?? '' });
      return;
    case 'raw': {
      const into = containerFor(t, ev.agentRunId);
      const last = into.list[into.list.length - 1];
      if (last && last.type === 'raw') {
        last.lines.push(ev.line);
        t.changed.add(last);
      } else push(t, into, { type: 'raw', key, lines: [ev.line] });
      return;
    }
    default: {
      // A kind this client does not know yet: keep it visible as a raw line.
      const unknown = ev as { kind?: string };
      push(t, containerFor(t, (ev as { agentRunId?: number }).agentRunId), { type: 'raw', key, lines: [JSON.stringify(unknown)] });
    }
  }
}

/**
 * Removes every `<planwire-…>` block (the plan, a breakdown's outline and expansion, linked
 * research and its selection, and any later one) from assistant text: it is JSON for the server,
 * and the plan is rendered from `ticket.plan` instead. One rule for every tag, as in Neovim. Also
 * hides a block still streaming (no closing tag yet) and a trailing partial opening tag, so the
 * raw JSON never flashes by while it streams.
 */
export function stripPlanBlock(text: string): string {
  let out = '';
  let i = 0;
  const opening = /<(planwire-[a-z0-9][a-z0-9-]*)>/g;
  for (;;) {
    opening.lastIndex = i;
    const m = opening.exec(text);
    if (!m) { out += text.slice(i); break; }
    out += text.slice(i, m.index);
    const close = text.indexOf(`</${m[1]}>`, m.index + m[0].length);
    if (close < 0) { i = text.length; break; }
    i = close + m[1].length + 3;
  }
  // A partial "<planw" or "<planwire-outl" at the very end while streaming.
  const partial = /<[a-z0-9-]*$/.exec(out);
  if (partial && (TAG_START.startsWith(partial[0]) || partial[0].startsWith(TAG_START))) out = out.slice(0, partial.index);
  // A code fence left empty by the removal.
  out = out.replace(/```[A-Za-z]*\s*```/g, '');
  return out.trim();
}

const TAG_START = '<planwire-';

/** Total number of blocks, nested ones included (for tests and summaries). */
export function countBlocks(blocks: readonly Block[]): number {
  let n = 0;
  for (const b of blocks) {
    n++;
    if (b.type === 'subagent') n += countBlocks(b.children);
  }
  return n;
}
