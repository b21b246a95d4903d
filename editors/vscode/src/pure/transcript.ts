// The transcript reducer: folds numbered transcript events of one run into display blocks.
// Pure (no vscode import) so it is unit-tested with node:test.
//
// Events are applied strictly in seq order. An event whose seq was already applied is dropped
// (no doubles); an event ahead of the next expected seq is held back until the gap is filled
// (no holes). `needsCatchUp` tells the caller to fetch `planwire/getTranscript { afterSeq: lastSeq }`.

import type { TranscriptEvent } from './types';

export type ToolState = 'running' | 'completed' | 'error';

export type Block =
  | { type: 'text'; key: string; text: string; final: boolean }
  | { type: 'reasoning'; key: string; text: string }
  | { type: 'tool'; key: string; callId: string; name: string; input: string; status: ToolState; output?: string }
  | { type: 'subagent'; key: string; agentRunId?: number; label: string; status?: string; ended: boolean; children: Block[] }
  | { type: 'error'; key: string; errorKind: string; message: string }
  | { type: 'question'; key: string; questionId: number }
  | { type: 'raw'; key: string; lines: string[] };

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
  /** Bumped on every change so renderers can skip untouched runs. */
  rev: number;
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
    rev: 0,
  };
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

/** The block list an event of this agent goes into: a subagent's children, or the run's top level. */
function containerFor(t: RunTranscript, agentRunId: number | undefined): Block[] {
  if (agentRunId !== undefined) {
    const sub = t.subagents.get(agentRunId);
    if (sub) return sub.children;
  }
  return t.blocks;
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
      // The server sends whole text blocks (one per assistant content block), not deltas.
      containerFor(t, ev.agentRunId).push({ type: 'text', key, text: ev.text ?? '', final: !!ev.final });
      return;
    case 'reasoning': {
      const into = containerFor(t, ev.agentRunId);
      const last = into[into.length - 1];
      if (last && last.type === 'reasoning') last.text = joinText(last.text, ev.text ?? '');
      else into.push({ type: 'reasoning', key, text: ev.text ?? '' });
      return;
    }
    case 'toolCall': {
      const existing = t.tools.get(ev.callId);
      if (existing) {
        // A repeated call id updates the row (some CLIs announce a call, then its full input).
        existing.name = ev.name || existing.name;
        existing.input = ev.input || existing.input;
        return;
      }
      const block: Extract<Block, { type: 'tool' }> = {
        type: 'tool', key: `r${t.runId}-tool-${ev.callId}`, callId: ev.callId, name: ev.name, input: ev.input ?? '', status: 'running',
      };
      t.tools.set(ev.callId, block);
      containerFor(t, ev.agentRunId).push(block);
      return;
    }
    case 'toolResult': {
      let block = t.tools.get(ev.callId);
      if (!block) {
        block = { type: 'tool', key: `r${t.runId}-tool-${ev.callId}`, callId: ev.callId, name: 'tool', input: '', status: 'running' };
        t.tools.set(ev.callId, block);
        containerFor(t, ev.agentRunId).push(block);
      }
      block.status = ev.status === 'error' ? 'error' : ev.status === 'running' ? 'running' : 'completed';
      block.output = ev.output;
      return;
    }
    case 'subagent': {
      const id = ev.agentRunId;
      let sub = id !== undefined ? t.subagents.get(id) : undefined;
      if (ev.phase === 'start' || !sub) {
        if (!sub) {
          sub = { type: 'subagent', key: `r${t.runId}-agent-${id ?? ev.seq}`, agentRunId: id, label: ev.label, ended: false, children: [] };
          if (id !== undefined) t.subagents.set(id, sub);
          t.blocks.push(sub);
        }
        if (ev.label) sub.label = ev.label;
      }
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
      containerFor(t, ev.agentRunId).push({ type: 'error', key, errorKind: ev.errorKind, message: ev.message });
      return;
    case 'question':
      containerFor(t, ev.agentRunId).push({ type: 'question', key, questionId: ev.questionId });
      return;
    case 'raw': {
      const into = containerFor(t, ev.agentRunId);
      const last = into[into.length - 1];
      if (last && last.type === 'raw') last.lines.push(ev.line);
      else into.push({ type: 'raw', key, lines: [ev.line] });
      return;
    }
    default: {
      // A kind this client does not know yet: keep it visible as a raw line.
      const unknown = ev as { kind?: string };
      const into = containerFor(t, (ev as { agentRunId?: number }).agentRunId);
      into.push({ type: 'raw', key, lines: [JSON.stringify(unknown)] });
    }
  }
}

/** Tags whose content is machine-readable JSON for the server, never shown as text. */
export const HIDDEN_TAGS = ['planwire-plan', 'planwire-outline', 'planwire-expansion', 'planwire-research'];

/**
 * Removes `<planwire-plan>…</planwire-plan>` blocks (and a breakdown's `<planwire-outline>`,
 * `<planwire-expansion>` and linked research's `<planwire-research>`) from assistant text: the
 * plan is rendered from `ticket.plan` instead. Also hides a block still streaming (no closing tag
 * yet) and a trailing partial opening tag, so the raw JSON never flashes by while it streams.
 */
export function stripPlanBlock(text: string): string {
  let out = '';
  let i = 0;
  for (;;) {
    let open = -1;
    let tag = '';
    for (const name of HIDDEN_TAGS) {
      const at = text.indexOf(`<${name}>`, i);
      if (at >= 0 && (open < 0 || at < open)) {
        open = at;
        tag = name;
      }
    }
    if (open < 0) { out += text.slice(i); break; }
    out += text.slice(i, open);
    const close = text.indexOf(`</${tag}>`, open + tag.length + 2);
    if (close < 0) { i = text.length; break; }
    i = close + tag.length + 3;
  }
  // A partial "<planwire-pl" at the very end while streaming.
  const partial = /<(p(l(a(n(w(i(r(e(-[a-z]*)?)?)?)?)?)?)?)?)?$/.exec(out);
  if (partial && HIDDEN_TAGS.some((t) => `<${t}>`.startsWith(partial[0]))) out = out.slice(0, partial.index);
  // A code fence left empty by the removal.
  out = out.replace(/```[A-Za-z]*\s*```/g, '');
  return out.trim();
}

/** Total number of blocks, nested ones included (for tests and summaries). */
export function countBlocks(blocks: readonly Block[]): number {
  let n = 0;
  for (const b of blocks) {
    n++;
    if (b.type === 'subagent') n += countBlocks(b.children);
  }
  return n;
}
