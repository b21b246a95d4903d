// Renders the transcript webview's HTML: the page's parts (the header, each run's head, end and
// footer, the open questions, the plan, a breakdown's tickets) and one row per block. Every part
// and row carries a stable id (`pw-<key>`), so the page model (page.ts) can send a single row or
// part when it changes. Rows go into chunks of CHUNK_ROWS (`content-visibility: auto`), which
// keeps the renderer's cost per row flat however long the transcript gets.
// Pure (no vscode import): markdown-it turns markdown into HTML with raw HTML disabled, and
// remote images are never loaded (the page's CSP forbids them anyway).

import MarkdownIt from 'markdown-it';
import { runContainer, stripPlanBlock, type Block, type RunTranscript } from './transcript';
import type { Plan, Question, Run, Ticket } from './types';
import { answerable, answeredItems } from './questions';
import { formatCost, formatDuration, formatTokens } from './format';
import { chunked, containerId, domId } from './layout';

export { formatCost, formatDuration, formatTokens } from './format';
export { CHUNK_ROWS, containerId, domId } from './layout';

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

/** The page's parts are rendered on every update: their larger markdown is kept, not redone. */
const partMarkdown = new Map<string, string>();
function cachedMarkdown(text: string): string {
  let html = partMarkdown.get(text);
  if (html === undefined) {
    html = markdown(text);
    if (partMarkdown.size >= 32) partMarkdown.delete(partMarkdown.keys().next().value as string);
    partMarkdown.set(text, html);
  }
  return html;
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

/** What rendering a run's rows needs (a ticket's page or a breakdown's). */
export type RunsView = Pick<TicketView, 'transcripts' | 'questions' | 'now'>;

/** What rendering one row needs: the questions (for question rows), and whether its run is live. */
export interface RowContext { questions: readonly Question[]; live: boolean }

export function isLive(run: Run): boolean {
  return run.status === 'running' || run.status === 'queued';
}

function renderRows(blocks: readonly Block[], ctx: RowContext): string {
  return chunked(blocks.map((b) => renderRow(b, ctx, true)));
}

function attrs(b: Block, cls: string, hidden = false): string {
  return `class="${cls}" id="${domId(b.key)}" data-key="${b.key}"${hidden ? ' hidden' : ''}`;
}

/** A subagent's summary line, which changes (running → completed) while its rows stay. */
export function subagentHead(b: Extract<Block, { type: 'subagent' }>, live: boolean): string {
  const ended = b.ended || !live;
  const state = b.ended ? statusWord(b.status ?? 'completed') : live ? 'running' : 'ended';
  return `<summary id="${domId(b.key)}-head">` +
    `<span class="agent-icon${ended ? '' : ' spin'}">${ended ? '⤷' : '◌'}</span>` +
    `<span class="agent-label">${esc(agentLabel(b.label))}</span><span class="agent-status">${esc(state)}</span>` +
    `</summary>`;
}

/**
 * One row. A subagent's row holds its own container: with `children` its rows are rendered in
 * it (a whole page), without it stays empty and its rows are appended one by one.
 */
export function renderRow(b: Block, ctx: RowContext, children: boolean): string {
  switch (b.type) {
    case 'text': {
      const text = stripPlanBlock(b.text);
      const live = b.streaming && ctx.live;
      return `<div ${attrs(b, `text${b.final ? ' final' : ''}${live ? ' streaming' : ''}`, !text)}>${text ? markdown(text) : ''}</div>`;
    }
    case 'reasoning': {
      const live = b.streaming && ctx.live;
      return `<details ${attrs(b, `reasoning${live ? ' streaming' : ''}`, !b.text.trim())}><summary>Thinking</summary><div class="md">${markdown(b.text)}</div></details>`;
    }
    case 'tool': {
      const out = b.output?.trim();
      const input = toolInputSummary(b.name, b.input);
      // A call still "running" when its run has ended never got a result.
      const status = b.status === 'running' && !ctx.live ? 'noresult' : b.status;
      return `<details ${attrs(b, `tool tool-${status}`)}><summary>` +
        `<span class="tool-icon${status === 'running' ? ' spin' : ''}" title="${status}">${TOOL_ICONS[status] ?? '•'}</span>` +
        `<span class="tool-name">${esc(b.name)}</span>` +
        (input ? `<code class="tool-input">${esc(input)}</code>` : '') +
        `<span class="tool-status">${esc(status === 'running' ? 'running…' : status === 'error' ? 'failed' : status === 'noresult' ? 'no result' : '')}</span>` +
        `</summary>` +
        (out ? `<pre class="tool-output">${esc(out)}</pre>` : `<div class="tool-output empty">${status === 'running' ? 'waiting for output…' : 'no output'}</div>`) +
        `</details>`;
    }
    case 'subagent':
      return `<details ${attrs(b, 'subagent')} open>${subagentHead(b, ctx.live)}` +
        `<div class="children" id="${containerId(b.key)}" data-chunked>${children ? renderRows(b.children, ctx) : ''}</div></details>`;
    case 'error':
      return `<div ${attrs(b, 'error')} role="alert"><span class="error-kind">${esc(errorTitle(b.errorKind))}</span> ${esc(b.message)}</div>`;
    case 'question':
      return questionRow(b, ctx.questions);
    case 'warning':
      return `<div ${attrs(b, 'warning')} role="alert"><span class="warning-kind">⚠ Warning</span> ${esc(b.message)}</div>`;
    case 'raw':
      return `<details ${attrs(b, 'raw')}><summary>${b.lines.length} unrecognised line${b.lines.length === 1 ? '' : 's'}</summary><pre>${esc(b.lines.join('\n'))}</pre></details>`;
  }
}

function questionRow(b: Extract<Block, { type: 'question' }>, questions: readonly Question[]): string {
  const q = questions.find((x) => x.id === b.questionId);
  const open = q ? q.status === 'open' || q.status === 'stale' : false;
  const answered = q ? answeredItems(q) : [];
  const text = q
    ? q.items.map((item, i) => {
      const a = answered[i]?.answer;
      return `<div class="q-text">${esc(item.question)}</div>` + (a ? `<div class="q-answer"><span class="q-answer-label">Answer:</span> ${esc(a)}</div>` : '');
    }).join('')
    : `<div class="q-text">Question ${b.questionId}</div>`;
  const state = !q ? '' : q.status === 'open' ? 'waiting for your answer' : answered.length ? '' : statusWord(q.status);
  return `<div ${attrs(b, `question-ref${answered.length ? ' answered' : ''}`)}><span class="q-icon">${answered.length ? '✓' : '?'}</span><div>${text}` +
    (state || open ? `<div class="q-state">${esc(state)}` +
      (open ? ` <button class="link" data-cmd="answer" data-question-id="${b.questionId}">Answer…</button>` : '') +
      `</div>` : '') +
    `</div></div>`;
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

/** A run's footer: tokens, cost, time (a live clock while it runs) and the events received. */
export function runFooter(run: Run, t: RunTranscript | undefined, now: number): string {
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
  const tm = run.timing;
  if (tm && !isLive(run)) {
    if (tm.firstOutputMs !== null && tm.firstOutputMs !== undefined) parts.push(`<span class="timing" title="from the start to the planner's first output">first output ${formatDuration(tm.firstOutputMs)}</span>`);
    if (tm.firstFinalMs !== null && tm.firstFinalMs !== undefined) parts.push(`<span class="timing" title="from the start to the planner's first final answer">first answer ${formatDuration(tm.firstFinalMs)}</span>`);
    parts.push(`<span class="timing" title="the whole run">total ${formatDuration(tm.totalMs)}</span>`);
  }
  const start = Date.parse(run.startedAt ?? run.createdAt);
  if (Number.isFinite(start) && !(tm && !isLive(run))) {
    // A live run's clock is kept by the webview (one element, once a second).
    parts.push(isLive(run)
      ? `<span class="clock" title="duration" data-since="${start}">running for ${formatDuration(now - start)}</span>`
      : `<span title="duration">${formatDuration(Date.parse(run.endedAt ?? '') - start)}</span>`);
  }
  parts.push(`<span class="seq" title="transcript events received">${t?.applied ?? 0} events</span>`);
  return `<footer class="run-foot" id="${domId(`run-${run.id}-foot`)}" data-run-id="${run.id}" data-last-seq="${t?.lastSeq ?? 0}" data-applied="${t?.applied ?? 0}" data-server-last-seq="${run.lastSeq}">${parts.join('<span class="sep">·</span>')}</footer>`;
}

const SANDBOX: Record<string, { icon: string; word: string; tip: string }> = {
  enforced: { icon: '', word: 'sandboxed', tip: 'The OS sandbox held the planner: it could not write outside its scratch and state directories.' },
  unavailable: { icon: '⚠', word: 'no sandbox', tip: 'There is no OS sandbox here: only the planner\'s own plan mode kept it from writing.' },
  off: { icon: '⚠', word: 'sandbox off', tip: 'The OS sandbox is turned off (planwire.sandbox): only the planner\'s own plan mode kept it from writing.' },
};

/** The run's sandbox state, a shield when enforced and a warning otherwise (nothing before it is known). */
export function sandboxBadge(run: Run): string {
  const s = run.sandbox ? SANDBOX[run.sandbox] : undefined;
  if (!s) return '';
  return `<span class="sandbox sandbox-${run.sandbox}" data-sandbox="${run.sandbox}" title="${esc(s.tip)}">${s.icon ? `${s.icon} ` : ''}${esc(s.word)}</span>`;
}

export function runHead(run: Run, index: number, label?: string): string {
  const planner = [run.tool, run.model].filter(Boolean).join(' / ');
  return `<summary class="run-head" id="${domId(`run-${run.id}-head`)}">` +
    `<span class="run-dot status-${run.status}${isLive(run) ? ' spin' : ''}"></span>` +
    `<span class="run-title">${esc(label ?? `Run ${index + 1}`)}</span>` +
    `<span class="run-status status-${run.status}">${esc(statusWord(run.status))}</span>` +
    sandboxBadge(run) +
    `<span class="dim">${esc(planner)}${run.startedAt ? ` · started ${esc(clockTime(run.startedAt))}` : ''}</span>` +
    `</summary>`;
}

/** Below a run's rows: why it failed, or that there is nothing yet. */
export function runEnd(run: Run, t: RunTranscript | undefined): string {
  const failure = run.failure
    ? `<div class="error" role="alert"><span class="error-kind">${esc(run.status === 'interrupted' ? 'Interrupted' : 'Run failed')}</span> ${esc(run.failure.message || run.failure.code)}</div>`
    : '';
  const paths = run.readonlyViolation?.paths ?? [];
  const violation = paths.length
    ? `<div class="error readonly-violation" role="alert"><span class="error-kind">Planning changed files in the work tree</span>, which it must never do. Review them before you build on the plan:` +
      `<ul>${paths.map((p) => `<li><code>${esc(p)}</code></li>`).join('')}</ul></div>`
    : '';
  const empty = !t?.blocks.length && !failure
    ? `<div class="dim">${isLive(run) ? 'Waiting for the planner…' : 'No transcript.'}</div>`
    : '';
  return `<div class="run-end" id="${domId(`run-${run.id}-end`)}">${violation}${failure}${empty}</div>`;
}

/** A whole run: its head, its rows (in chunks), its end and its footer. */
export function renderRun(run: Run, index: number, view: RunsView, open: boolean, label?: string): string {
  const t = view.transcripts.get(run.id);
  const ctx: RowContext = { questions: view.questions, live: isLive(run) };
  const key = runContainer(run.id);
  return `<details class="run" id="${domId(key)}" data-key="${key}"${open ? ' open' : ''}>` +
    runHead(run, index, label) +
    `<div class="blocks" id="${containerId(key)}" data-chunked>${t ? renderRows(t.blocks, ctx) : ''}</div>` +
    runEnd(run, t) + runFooter(run, t, view.now) + `</details>`;
}

export function renderPlan(plan: Plan): string {
  const list = (title: string, items: string[] | undefined, cls: string) =>
    items && items.length
      ? `<h3>${title}</h3><ul class="${cls}">${items.map((i) => `<li>${md.renderInline(i)}</li>`).join('')}</ul>`
      : '';
  return `<section class="plan" id="plan"><div class="plan-label">Plan</div>` +
    `<h1 class="plan-title">${esc(plan.title || 'Plan')}</h1>` +
    `<div class="md">${cachedMarkdown(plan.description || '')}</div>` +
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
  if (!busy && ticket.plan) {
    b.push(`<button data-cmd="requestChanges" class="secondary">Request Changes…</button>`);
    b.push(`<button data-cmd="handoff" class="secondary">Hand Off to Implementation…</button>`);
    b.push(`<button data-cmd="exportPlan" class="secondary">Export Plan…</button>`);
  }
  if (ticket.plan) b.push(`<button data-cmd="planVersions" class="secondary">Plan Versions…</button>`);
  if (!busy) b.push(`<button data-cmd="editTicket" class="secondary">Edit…</button>`);
  return b.join('');
}

/** The usage of every run of the ticket, summed (runs that reported none count nothing). */
export function ticketUsage(transcripts: Iterable<RunTranscript>): { tokensIn: number; tokensOut: number; costUsd: number; runs: number } | undefined {
  const sum = { tokensIn: 0, tokensOut: 0, costUsd: 0, runs: 0 };
  for (const t of transcripts) {
    if (!t.usage) continue;
    sum.tokensIn += t.usage.inputTokens;
    sum.tokensOut += t.usage.outputTokens;
    sum.costUsd += t.usage.costUsd;
    sum.runs++;
  }
  return sum.runs ? sum : undefined;
}

/** The header's second line: id, planner, branch, plan version, hand-off, usage, root. */
function ticketMeta(ticket: Ticket, transcripts: Iterable<RunTranscript>): string {
  const planner = [ticket.tool, ticket.model].filter(Boolean).join(' / ');
  const parts = [`#${ticket.id}`, esc(planner)];
  if (ticket.branch) parts.push(`<span class="branch" title="the git branch the work is for">⎇ ${esc(ticket.branch)}</span>`);
  if (ticket.planVersion) parts.push(`<span class="plan-version">plan v${ticket.planVersion}</span>`);
  if (ticket.handedOffAt) parts.push(`<span class="handed-off">handed off to ${esc(ticket.handedOffTool ?? 'a CLI')} ${esc(clockTime(ticket.handedOffAt))}</span>`);
  const u = ticketUsage(transcripts);
  if (u) parts.push(`<span class="ticket-usage" title="all runs of this ticket">${formatTokens(u.tokensIn)} in · ${formatTokens(u.tokensOut)} out · ${formatCost(u.costUsd)} in ${u.runs} run${u.runs === 1 ? '' : 's'}</span>`);
  parts.push(esc(ticket.root));
  return parts.join(' · ');
}

/** A part: a wrapper with an id, replaced whole when its content changes. */
function part(name: string, html: string): string {
  return `<div id="${domId(name)}">${html}</div>`;
}

/**
 * A page as the page model sees it: the parts above the runs, the runs, the parts below.
 * `foldOlder`: only the latest run is open unless the reader opened another.
 */
export interface PageSpec {
  status: string;
  above: string[];
  runs: Run[];
  label?: string;
  below: string[];
  rows: RunsView;
  foldOlder: boolean;
}

export function ticketPage(view: TicketView): PageSpec {
  const { ticket } = view;
  const busy = ticket.status === 'planning' || ticket.status === 'queued';
  const head = `<header class="ticket" id="${domId('head')}">` +
    `<div class="title-row"><h1>${esc(ticket.title)}</h1>` +
    `<span class="badge status-${ticket.status}${busy ? ' live' : ''}" id="ticket-status">${esc(statusWord(ticket.status))}</span></div>` +
    `<div class="meta dim">${ticketMeta(ticket, view.transcripts.values())}</div>` +
    `<div class="actions">${actions(ticket)}</div>` +
    (ticket.description.trim()
      ? `<details class="description" id="${domId('description')}" data-key="description"${view.runs.length ? '' : ' open'}><summary>Description</summary><div class="md">${cachedMarkdown(ticket.description)}</div></details>`
      : '') +
    `</header>`;
  const noRuns = part('empty', view.runs.length ? '' : `<div class="dim empty-state">Not planned yet. Run <b>Plan</b> to start.</div>`);
  return {
    status: ticket.status,
    above: [head],
    runs: view.runs,
    below: [noRuns, part('questions', renderOpenQuestions(view)), part('plan', ticket.plan ? renderPlan(ticket.plan) : '')],
    rows: view,
    foldOlder: true,
  };
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

export function breakdownPage(view: BreakdownView): PageSpec {
  const { run } = view;
  const planner = [run.tool, run.model].filter(Boolean).join(' / ');
  const active = isLive(run);
  const byId = new Map(view.tickets.map((t) => [t.id, t]));
  const head = `<header class="ticket" id="${domId('head')}">` +
    `<div class="title-row"><h1>${esc(view.title)}</h1>` +
    `<span class="badge status-${run.status}${active ? ' live' : ''}" id="ticket-status">${esc(active ? 'breaking down' : statusWord(run.status))}</span></div>` +
    `<div class="meta dim">Initiative · breakdown run #${run.id} · ${esc(planner)}${run.root ? ` · ${esc(run.root)}` : ''}</div>` +
    `<div class="actions">${active ? '<button data-cmd="stopRun" class="secondary">Stop</button>' : ''}</div>` +
    (view.description?.trim()
      ? `<details class="description" id="${domId('description')}" data-key="description" open><summary>Initiative</summary><div class="md">${cachedMarkdown(view.description)}</div></details>`
      : '') +
    `</header>`;
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
  const transcripts = new Map<number, RunTranscript>();
  if (view.transcript) transcripts.set(run.id, view.transcript);
  return {
    status: run.status,
    above: [head],
    runs: [run],
    label: 'Breakdown',
    below: [part('tickets', tickets)],
    rows: { transcripts, questions: [], now: view.now },
    foldOlder: false,
  };
}

/** The whole page body, in one string (a page opened after a long run renders in one pass). */
export function renderPage(page: PageSpec): string {
  const last = page.runs.length - 1;
  const runs = page.runs.map((r, i) => renderRun(r, i, page.rows, !page.foldOlder || i === last, page.label)).join('');
  return page.above.join('') + `<main class="runs" id="${containerId('runs')}">${runs}</main>` + page.below.join('');
}

/** The whole page body for one ticket. */
export function renderTicket(view: TicketView): string {
  return renderPage(ticketPage(view));
}

/** The whole page body for a breakdown run: the initiative, its transcript, the tickets it became. */
export function renderBreakdown(view: BreakdownView): string {
  return renderPage(breakdownPage(view));
}
