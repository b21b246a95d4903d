// Renders a ticket, its runs' transcripts and its plan to the HTML body of the transcript
// webview. Pure (no vscode import): markdown-it turns markdown into HTML with raw HTML disabled,
// and remote images are never loaded (the page's CSP forbids them anyway).

import MarkdownIt from 'markdown-it';
import { stripPlanBlock, type Block, type RunTranscript } from './transcript';
import type { Plan, Question, Run, Ticket } from './types';
import { answerable, answeredItems } from './questions';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });
// Images become links: a transcript never fetches anything.
md.renderer.rules.image = (tokens, idx) => {
  const t = tokens[idx];
  const src = t.attrGet('src') ?? '';
  return `<a href="${esc(src)}">${esc(t.content || src)}</a>`;
};

export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function markdown(text: string): string {
  return md.render(text);
}

export const STATUS_WORDS: Record<string, string> = {
  draft: 'draft',
  queued: 'queued',
  planning: 'planning',
  needs_input: 'needs input',
  planned: 'planned',
  failed: 'failed',
  stopped: 'stopped',
  running: 'running',
  completed: 'completed',
  cancelled: 'stopped',
  interrupted: 'interrupted',
};

export function statusWord(status: string): string {
  return STATUS_WORDS[status] ?? status.replace(/_/g, ' ');
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  const r = Math.round(s - m * 60);
  if (m < 60) return `${m} min ${r} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function formatTokens(n: number): string {
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(1)}M`;
  if (n >= 10_000) return `${Math.round(n / 1000)}k`;
  if (n >= 1000) return `${(n / 1000).toFixed(1)}k`;
  return String(n);
}

export function formatCost(usd: number): string {
  if (!usd) return '$0';
  if (usd < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

function clockTime(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export interface TicketView {
  ticket: Ticket;
  /** Oldest first. */
  runs: Run[];
  transcripts: Map<number, RunTranscript>;
  questions: Question[];
  now: number;
}

const TOOL_ICONS: Record<string, string> = { running: '◌', completed: '✓', error: '✗', noresult: '–' };

/** What rendering a run needs (a ticket's page or a breakdown's). */
export type RunsView = Pick<TicketView, 'transcripts' | 'questions' | 'now'>;

function renderBlocks(blocks: readonly Block[], view: RunsView, live: boolean): string {
  return blocks.map((b) => renderBlock(b, view, live)).join('');
}

function renderBlock(b: Block, view: RunsView, live: boolean): string {
  switch (b.type) {
    case 'text': {
      const text = stripPlanBlock(b.text);
      if (!text) return '';
      return `<div class="text${b.final ? ' final' : ''}" data-key="${b.key}">${markdown(text)}</div>`;
    }
    case 'reasoning':
      if (!b.text.trim()) return '';
      return `<details class="reasoning" data-key="${b.key}"><summary>Thinking</summary><div class="md">${markdown(b.text)}</div></details>`;
    case 'tool': {
      const out = b.output?.trim();
      const input = toolInputSummary(b.name, b.input);
      // A call still "running" when its run has ended never got a result.
      const status = b.status === 'running' && !live ? 'noresult' : b.status;
      return `<details class="tool tool-${status}" data-key="${b.key}"><summary>` +
        `<span class="tool-icon${status === 'running' ? ' spin' : ''}" title="${status}">${TOOL_ICONS[status] ?? '•'}</span>` +
        `<span class="tool-name">${esc(b.name)}</span>` +
        (input ? `<code class="tool-input">${esc(input)}</code>` : '') +
        `<span class="tool-status">${esc(status === 'running' ? 'running…' : status === 'error' ? 'failed' : status === 'noresult' ? 'no result' : '')}</span>` +
        `</summary>` +
        (out ? `<pre class="tool-output">${esc(out)}</pre>` : `<div class="tool-output empty">${status === 'running' ? 'waiting for output…' : 'no output'}</div>`) +
        `</details>`;
    }
    case 'subagent': {
      const ended = b.ended || !live;
      const state = b.ended ? statusWord(b.status ?? 'completed') : live ? 'running' : 'ended';
      return `<details class="subagent${ended ? '' : ' live'}" data-key="${b.key}" data-default-open><summary>` +
        `<span class="agent-icon${ended ? '' : ' spin'}">${ended ? '⤷' : '◌'}</span>` +
        `<span class="agent-label">${esc(agentLabel(b.label))}</span><span class="agent-status">${esc(state)}</span>` +
        `</summary><div class="children">${renderBlocks(b.children, view, live) || '<div class="dim">no output yet</div>'}</div></details>`;
    }
    case 'error':
      return `<div class="error" data-key="${b.key}" role="alert"><span class="error-kind">${esc(errorTitle(b.errorKind))}</span> ${esc(b.message)}</div>`;
    case 'question': {
      const q = view.questions.find((x) => x.id === b.questionId);
      const open = q ? q.status === 'open' || q.status === 'stale' : false;
      const answered = q ? answeredItems(q) : [];
      const text = q
        ? q.items.map((item, i) => {
          const a = answered[i]?.answer;
          return `<div class="q-text">${esc(item.question)}</div>` + (a ? `<div class="q-answer"><span class="q-answer-label">Answer:</span> ${esc(a)}</div>` : '');
        }).join('')
        : `<div class="q-text">Question ${b.questionId}</div>`;
      const state = !q ? '' : q.status === 'open' ? 'waiting for your answer' : answered.length ? '' : statusWord(q.status);
      return `<div class="question-ref${answered.length ? ' answered' : ''}" data-key="${b.key}"><span class="q-icon">${answered.length ? '✓' : '?'}</span><div>${text}` +
        (state || open ? `<div class="q-state">${esc(state)}` +
          (open ? ` <button class="link" data-cmd="answer" data-question-id="${b.questionId}">Answer…</button>` : '') +
          `</div>` : '') +
        `</div></div>`;
    }
    case 'raw':
      return `<details class="raw" data-key="${b.key}"><summary>${b.lines.length} unrecognised line${b.lines.length === 1 ? '' : 's'}</summary><pre>${esc(b.lines.join('\n'))}</pre></details>`;
  }
}

/** The planner's own passes and research runs keep their name; anything else is a subagent. */
export function agentLabel(label: string): string {
  if (/^(Outline|Outline repair|Expansion|Linked research: .+)$/.test(label.trim())) return label.trim();
  return `Subagent: ${label || 'task'}`;
}

/** A tool's input as one short line; AskUserQuestion's JSON becomes its question texts. */
export function toolInputSummary(name: string, input: string): string {
  if (name === 'AskUserQuestion' && input.trim().startsWith('{')) {
    try {
      const qs = (JSON.parse(input) as { questions?: { question?: string }[] }).questions ?? [];
      const texts = qs.map((q) => q.question).filter(Boolean);
      if (texts.length) return texts.join(' · ');
    } catch {
      // show it as it came
    }
  }
  return input;
}

function errorTitle(kind: string): string {
  const words: Record<string, string> = {
    auth: 'Authentication error',
    rate_limit: 'Rate limited',
    overloaded: 'Provider overloaded',
    context_overflow: 'Context too long',
    network: 'Network error',
  };
  return words[kind] ?? 'Error';
}

function runFooter(run: Run, t: RunTranscript | undefined, now: number): string {
  const parts: string[] = [];
  const u = t?.usage;
  if (u) {
    parts.push(`<span title="input tokens">${formatTokens(u.inputTokens)} in</span>`);
    parts.push(`<span title="output tokens">${formatTokens(u.outputTokens)} out</span>`);
    if (u.cacheReadTokens || u.cacheWriteTokens) {
      parts.push(`<span title="cache read / written tokens">cache ${formatTokens(u.cacheReadTokens)} read · ${formatTokens(u.cacheWriteTokens)} written</span>`);
    }
    parts.push(`<span title="cost">${formatCost(u.costUsd)}</span>`);
  }
  const start = Date.parse(run.startedAt ?? run.createdAt);
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  const active = run.status === 'running' || run.status === 'queued';
  if (Number.isFinite(start)) parts.push(`<span title="duration">${active ? 'running for ' : ''}${formatDuration(end - start)}</span>`);
  parts.push(`<span class="seq" title="transcript events received">${t?.applied ?? 0} events</span>`);
  return `<footer class="run-foot" data-run-id="${run.id}" data-last-seq="${t?.lastSeq ?? 0}" data-applied="${t?.applied ?? 0}" data-server-last-seq="${run.lastSeq}">${parts.join('<span class="sep">·</span>')}</footer>`;
}

function runHead(run: Run, index: number, label?: string): string {
  const planner = [run.tool, run.model].filter(Boolean).join(' / ');
  const active = run.status === 'running' || run.status === 'queued';
  return `<span class="run-dot status-${run.status}${active ? ' spin' : ''}"></span>` +
    `<span class="run-title">${esc(label ?? `Run ${index + 1}`)}</span>` +
    `<span class="run-status status-${run.status}">${esc(statusWord(run.status))}</span>` +
    `<span class="dim">${esc(planner)}${run.startedAt ? ` · started ${esc(clockTime(run.startedAt))}` : ''}</span>`;
}

function renderRun(run: Run, index: number, view: RunsView, latest: boolean, label?: string): string {
  const t = view.transcripts.get(run.id);
  const live = run.status === 'running' || run.status === 'queued';
  const body = t ? renderBlocks(t.blocks, view, live) : '';
  const failure = run.failure
    ? `<div class="error" role="alert"><span class="error-kind">${esc(run.status === 'interrupted' ? 'Interrupted' : 'Run failed')}</span> ${esc(run.failure.message || run.failure.code)}</div>`
    : '';
  const empty = !body && !failure
    ? `<div class="dim">${run.status === 'queued' || run.status === 'running' ? 'Waiting for the planner…' : 'No transcript.'}</div>`
    : '';
  return `<details class="run" id="run-${run.id}" data-key="run-${run.id}"${latest ? ' data-default-open' : ''}>` +
    `<summary class="run-head">${runHead(run, index, label)}</summary>` +
    `<div class="blocks">${body}${failure}${empty}</div>${runFooter(run, t, view.now)}</details>`;
}

export function renderPlan(plan: Plan): string {
  const list = (title: string, items: string[] | undefined, cls: string) =>
    items && items.length
      ? `<h3>${title}</h3><ul class="${cls}">${items.map((i) => `<li>${md.renderInline(i)}</li>`).join('')}</ul>`
      : '';
  return `<section class="plan" id="plan"><div class="plan-label">Plan</div>` +
    `<h1 class="plan-title">${esc(plan.title || 'Plan')}</h1>` +
    `<div class="md">${markdown(plan.description || '')}</div>` +
    list('Acceptance criteria', plan.acceptanceCriteria, 'criteria') +
    list('Open questions', plan.openQuestions, 'open-questions') +
    list('Dependencies', plan.dependencies, 'dependencies') +
    `</section>`;
}

function renderOpenQuestions(view: TicketView): string {
  const qs = answerable(view.questions.length ? view.questions : view.ticket.openQuestions);
  if (!qs.length) return '';
  return `<section class="questions"><h2>Waiting for your answer</h2>` +
    qs.map((q) => `<div class="question-card">` +
      q.items.map((i) => `<div class="q-header">${esc(i.header)}</div><div class="q-text">${esc(i.question)}</div>` +
        ((i.options ?? []).length ? `<ul class="q-options">${(i.options ?? []).map((o) => `<li><b>${esc(o.label)}</b>${o.description ? ` — ${esc(o.description)}` : ''}</li>`).join('')}</ul>` : '')).join('') +
      `<button data-cmd="answer" data-question-id="${q.id}">Answer…</button></div>`).join('') +
    `</section>`;
}

function actions(ticket: Ticket): string {
  const s = ticket.status;
  const b: string[] = [];
  const busy = s === 'planning' || s === 'queued';
  if (busy) b.push(`<button data-cmd="stop" class="secondary">Stop</button>`);
  if (!busy && (s === 'draft' || s === 'stopped' || s === 'failed' || s === 'planned' || s === 'needs_input')) {
    b.push(`<button data-cmd="plan">${s === 'draft' ? 'Plan' : 'Plan again'}</button>`);
  }
  if (!busy && (s === 'failed' || s === 'stopped')) b.push(`<button data-cmd="retry" class="secondary">Retry</button>`);
  if (s === 'needs_input') b.push(`<button data-cmd="answer">Answer…</button>`);
  return b.join('');
}

/** The whole page body for one ticket. */
export function renderTicket(view: TicketView): string {
  const { ticket } = view;
  const planner = [ticket.tool, ticket.model].filter(Boolean).join(' / ');
  const busy = ticket.status === 'planning' || ticket.status === 'queued';
  const head = `<header class="ticket">` +
    `<div class="title-row"><h1>${esc(ticket.title)}</h1>` +
    `<span class="badge status-${ticket.status}${busy ? ' live' : ''}" id="ticket-status">${esc(statusWord(ticket.status))}</span></div>` +
    `<div class="meta dim">#${ticket.id} · ${esc(planner)} · ${esc(ticket.root)}</div>` +
    `<div class="actions">${actions(ticket)}</div>` +
    (ticket.description.trim()
      ? `<details class="description" data-key="description"${view.runs.length ? '' : ' data-default-open'}><summary>Description</summary><div class="md">${markdown(ticket.description)}</div></details>`
      : '') +
    `</header>`;
  const runs = view.runs.map((r, i) => renderRun(r, i, view, i === view.runs.length - 1)).join('');
  const noRuns = view.runs.length ? '' : `<div class="dim empty-state">Not planned yet. Run <b>Plan</b> to start.</div>`;
  const plan = ticket.plan ? renderPlan(ticket.plan) : '';
  return head + `<main class="runs">${runs}${noRuns}</main>` + renderOpenQuestions(view) + plan;
}

export interface BreakdownView {
  run: Run;
  /** The initiative as the person wrote it, when this window knows it. */
  description?: string;
  title: string;
  transcript?: RunTranscript;
  /** The tickets it became, in dependency order. */
  tickets: Ticket[];
  now: number;
}

/** The whole page body for a breakdown run: the initiative, its transcript, the tickets it became. */
export function renderBreakdown(view: BreakdownView): string {
  const { run } = view;
  const planner = [run.tool, run.model].filter(Boolean).join(' / ');
  const active = run.status === 'running' || run.status === 'queued';
  const byId = new Map(view.tickets.map((t) => [t.id, t]));
  const head = `<header class="ticket">` +
    `<div class="title-row"><h1>${esc(view.title)}</h1>` +
    `<span class="badge status-${run.status}${active ? ' live' : ''}" id="ticket-status">${esc(active ? 'breaking down' : statusWord(run.status))}</span></div>` +
    `<div class="meta dim">Initiative · breakdown run #${run.id} · ${esc(planner)}${run.root ? ` · ${esc(run.root)}` : ''}</div>` +
    `<div class="actions">${active ? '<button data-cmd="stopRun" class="secondary">Stop</button>' : ''}</div>` +
    (view.description?.trim()
      ? `<details class="description" data-key="description" data-default-open><summary>Initiative</summary><div class="md">${markdown(view.description)}</div></details>`
      : '') +
    `</header>`;
  const transcripts = new Map<number, RunTranscript>();
  if (view.transcript) transcripts.set(run.id, view.transcript);
  const body = renderRun(run, 0, { transcripts, questions: [], now: view.now }, true, 'Breakdown');
  const tickets = view.tickets.length
    ? `<section class="initiative-tickets"><h2>${view.tickets.length} ticket${view.tickets.length === 1 ? '' : 's'}, in dependency order</h2><ol>` +
      view.tickets.map((t) => {
        const deps = (t.dependsOn ?? []).map((d) => byId.get(d)?.title ?? `#${d}`);
        return `<li data-ticket-id="${t.id}"><button class="link" data-cmd="openTicket" data-ticket-id="${t.id}">${esc(t.title)}</button>` +
          ` <span class="status-${t.status}">${esc(statusWord(t.status))}</span>` +
          (deps.length ? ` <span class="after">after: ${deps.map(esc).join(', ')}</span>` : '') + `</li>`;
      }).join('') +
      `</ol></section>`
    : '';
  return head + `<main class="runs">${body}</main>` + tickets;
}
