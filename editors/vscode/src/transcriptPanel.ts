// One webview panel per ticket, showing its runs' transcripts and its plan, and one per breakdown run.
// Catch-up: every run's transcript is fetched with planwire/getTranscript { afterSeq } on open,
// on reload and after a reconnect; live planwire/transcript notifications are applied on top.
// The reducer drops seqs it already has and holds back seqs past a gap, so nothing is missed
// or doubled whatever order fetches and notifications arrive in.
// Rendering is incremental (pure/page.ts): the webview gets the whole page once when it loads,
// then, at most every FLUSH_MS, only the rows and parts that changed.

import * as crypto from 'crypto';
import * as vscode from 'vscode';
import type { Planwire } from './client';
import { errorMessage } from './client';
import { applyDelta, applyEvents, applyHeld, applyOpenBlocks, newRunTranscript, questionChanged, type RunTranscript } from './pure/transcript';
import { breakdownPage, statusWord, ticketPage, type PageSpec } from './pure/render';
import { PageModel, type ToWebview } from './pure/page';
import { initiativeTitle } from './pure/initiative';
import type { DeltaParams, GetRunResult, GetTicketResult, GetTranscriptResult, Question, Run, Ticket, TranscriptEvent } from './pure/types';
import { testLog } from './testlog';

export const VIEW_TYPE = 'planwire.transcript';
const PAGE = 2000;
/** Updates are coalesced for this long: a burst of events becomes one patch. */
const FLUSH_MS = 100;
/**
 * Patches sent and not yet applied by the webview, at most: while the renderer is behind, changes
 * gather in the reducer and go as one larger patch, so no backlog of messages builds up. A
 * webview that does not answer (hidden, reloading) gets the next patch after ACK_WAIT_MS.
 */
const MAX_IN_FLIGHT = 2;
const ACK_WAIT_MS = 2000;

/** The folders a transcript webview may load from: its stylesheet and icon, and its script. */
function resourceRoots(extensionUri: vscode.Uri): vscode.Uri[] {
  return [vscode.Uri.joinPath(extensionUri, 'media'), vscode.Uri.joinPath(extensionUri, 'dist')];
}

/** What a panel shows: one ticket's runs, or one breakdown run. */
type PanelKey = { ticketId: number } | { runId: number };

/** A transcript webview: the shell page, catch-up of run transcripts, incremental rendering. */
abstract class RunsPanel implements vscode.Disposable {
  /** Oldest first. */
  runs: Run[] = [];
  readonly transcripts = new Map<number, RunTranscript>();
  private readonly fetching = new Map<number, Promise<void>>();
  private readonly again = new Set<number>();
  private renderTimer: NodeJS.Timeout | undefined;
  private readonly page = new PageModel();
  /** Numbers the pages drawn: the webview ignores patches of an older one. */
  private gen = 0;
  /** The webview's script has started (it says `ready`); until then nothing is posted. */
  private ready = false;
  /** Numbers the resets and patches sent; `applied` is the last the webview has applied. */
  private sent = 0;
  private applied = 0;
  private sentAt = 0;
  protected disposed = false;
  protected readonly subs: vscode.Disposable[] = [];

  constructor(
    readonly key: PanelKey,
    readonly panel: vscode.WebviewPanel,
    protected readonly planwire: Planwire,
    private readonly extensionUri: vscode.Uri,
    private readonly onDispose: () => void,
  ) {
    panel.webview.options = { enableScripts: true, localResourceRoots: resourceRoots(extensionUri) };
    panel.iconPath = vscode.Uri.joinPath(extensionUri, 'media', 'planwire.svg');
    panel.webview.html = this.shell();
    this.subs.push(
      panel.onDidDispose(() => this.dispose()),
      panel.webview.onDidReceiveMessage((m: { type: string; cmd?: string; questionId?: number; ticketId?: number; n?: number }) => {
        if (m.type === 'ready') {
          // A new page (first open, or reloaded after being hidden): draw it whole.
          this.ready = true;
          this.applied = this.sent;
          this.page.invalidate();
          this.render(true);
        }
        if (m.type === 'applied' && typeof m.n === 'number' && m.n > this.applied) {
          const waiting = this.sent - this.applied >= MAX_IN_FLIGHT;
          this.applied = m.n;
          if (waiting) this.render(true);
        }
        if (m.type === 'command' && m.cmd) this.command(m.cmd, m);
      }),
    );
  }

  protected abstract command(cmd: string, m: { questionId?: number; ticketId?: number }): void;
  /** Reloads what the page shows and catches every run up. */
  protected abstract load(): Promise<void>;
  /** What the page shows, or undefined before anything is loaded. */
  protected abstract view(): PageSpec | undefined;

  private shell(): string {
    const nonce = crypto.randomBytes(16).toString('base64');
    const webview = this.panel.webview;
    const css = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'transcript.css'));
    const js = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'dist', 'webview.js'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
    ].join('; ');
    const data = 'ticketId' in this.key ? `data-ticket-id="${this.key.ticketId}"` : `data-run-id="${this.key.runId}"`;
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${css}">
<title>planwire transcript</title>
</head>
<body ${data}>
<div id="root"><div class="dim">Loading…</div></div>
<script nonce="${nonce}" src="${js}"></script>
</body>
</html>`;
  }

  private syncing: Promise<void> | undefined;
  private syncAgain = false;

  /** Reloads the subject and its runs, then catches every run up (coalesced). */
  resync(): Promise<void> {
    if (this.syncing) {
      this.syncAgain = true;
      return this.syncing;
    }
    this.syncing = (async () => {
      do {
        this.syncAgain = false;
        await this.load();
      } while (this.syncAgain && !this.disposed);
    })().finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  protected transcript(runId: number): RunTranscript {
    let t = this.transcripts.get(runId);
    if (!t) {
      t = newRunTranscript(runId);
      this.transcripts.set(runId, t);
    }
    return t;
  }

  private logKey(): Record<string, number> {
    return 'ticketId' in this.key ? { ticketId: this.key.ticketId } : { breakdownRunId: this.key.runId };
  }

  /** Fetches the run's events after the last one applied, page by page; one fetch per run at a time. */
  catchUp(runId: number): Promise<void> {
    const running = this.fetching.get(runId);
    if (running) {
      this.again.add(runId);
      return running;
    }
    const p = (async () => {
      do {
        this.again.delete(runId);
        const t = this.transcript(runId);
        for (let guard = 0; guard < 10_000 && !this.disposed; guard++) {
          const before = t.lastSeq;
          t.syncing = true;
          const res = await this.planwire.request<GetTranscriptResult>('planwire/getTranscript', { runId, afterSeq: t.lastSeq, limit: PAGE });
          const r = applyEvents(t, res.events ?? []);
          // The blocks streaming now, as far as they were sent (on a page that reached the last seq).
          const opened = res.openBlocks?.length ? applyOpenBlocks(t, res.openBlocks, res.lastSeq) : false;
          if (r.applied || opened) this.render();
          testLog({ event: 'catchUp', ...this.logKey(), runId, afterSeq: before, got: res.events?.length ?? 0, lastSeq: t.lastSeq, serverLastSeq: res.lastSeq, done: res.done });
          if (!res.events?.length || t.lastSeq >= res.lastSeq || t.lastSeq === before) break;
        }
      } while (this.again.has(runId) && !this.disposed);
    })()
      .catch((e) => {
        testLog({ event: 'catchUpFailed', runId, message: errorMessage(e) });
      })
      .finally(() => {
        this.fetching.delete(runId);
        const t = this.transcript(runId);
        t.syncing = false;
        // Deltas that arrived meanwhile, after the page and its open blocks.
        if (applyHeld(t).gap && !this.disposed) void this.catchUp(runId);
        this.render();
      });
    this.fetching.set(runId, p);
    return p;
  }

  onEvents(runId: number, events: TranscriptEvent[]): void {
    if (!this.runs.some((r) => r.id === runId)) {
      // A run we have not heard of yet: learn about it, and fetch what came before.
      void this.resync();
      return;
    }
    const t = this.transcript(runId);
    const r = applyEvents(t, events);
    testLog({ event: 'transcript', ...this.logKey(), runId, seqs: events.map((e) => e.seq), applied: r.applied, duplicates: r.duplicates, lastSeq: t.lastSeq });
    if (r.needsCatchUp) void this.catchUp(runId);
    if (r.applied) this.render();
  }

  /** A piece of text or reasoning still being written (planwire/delta). */
  onDelta(d: DeltaParams): void {
    if (!this.runs.some((r) => r.id === d.runId)) return;
    const r = applyDelta(this.transcript(d.runId), d);
    // A piece past what this page has: getTranscript's open blocks fill the gap.
    if (r.gap) void this.catchUp(d.runId);
    if (r.changed) this.render();
  }

  /** A question changed (answered, stale): its rows in the transcript change with it. */
  protected questionRowsChanged(questionId: number): void {
    for (const t of this.transcripts.values()) questionChanged(t, questionId);
  }

  onRun(run: Run): void {
    const i = this.runs.findIndex((r) => r.id === run.id);
    if (i >= 0) this.runs[i] = run;
    else {
      this.runs.push(run);
      this.runs.sort((a, b) => a.id - b.id);
    }
    const t = this.transcript(run.id);
    // The run ended or we are behind its last seq: make sure nothing was missed.
    if (run.lastSeq > t.lastSeq && !(run.status === 'running' || run.status === 'queued')) void this.catchUp(run.id);
    this.render();
  }

  /** Updates the page soon (coalescing bursts of events), or now. */
  render(now = false): void {
    if (this.disposed) return;
    if (now) {
      if (this.renderTimer) clearTimeout(this.renderTimer);
      this.renderTimer = undefined;
      this.flush();
      return;
    }
    this.renderTimer ??= setTimeout(() => {
      this.renderTimer = undefined;
      this.flush();
    }, FLUSH_MS);
  }

  /**
   * Sends what changed since the last flush; the whole page when the webview has none yet. A
   * page opened after a long run is drawn once its catch-up is done, in one pass.
   */
  private flush(): void {
    if (this.disposed || !this.ready) return;
    if (this.sent - this.applied >= MAX_IN_FLIGHT) {
      // The renderer is behind: try again when it says it applied one (or after a while).
      const wait = this.sentAt + ACK_WAIT_MS - Date.now();
      if (wait > 0) {
        this.renderTimer ??= setTimeout(() => {
          this.renderTimer = undefined;
          this.flush();
        }, wait);
        return;
      }
    }
    const view = this.view();
    if (!view) return;
    const ops = this.page.patch(view);
    if (!ops) {
      if (this.fetching.size) return;
      this.gen++;
      this.post({ type: 'reset', gen: this.gen, n: ++this.sent, html: this.page.reset(view), status: view.status });
      testLog({ event: 'draw', ...this.logKey(), kind: 'reset', gen: this.gen });
      return;
    }
    if (ops.length) this.post({ type: 'patch', gen: this.gen, n: ++this.sent, ops, status: view.status });
  }

  protected post(m: ToWebview): void {
    if (m.type !== 'error') this.sentAt = Date.now();
    void this.panel.webview.postMessage(m);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.renderTimer) clearTimeout(this.renderTimer);
    for (const s of this.subs) s.dispose();
    this.panel.dispose();
    this.onDispose();
  }
}

class TicketPanel extends RunsPanel {
  ticket: Ticket | undefined;
  questions: Question[] = [];

  constructor(readonly ticketId: number, panel: vscode.WebviewPanel, planwire: Planwire, extensionUri: vscode.Uri, onDispose: () => void) {
    super({ ticketId }, panel, planwire, extensionUri, onDispose);
  }

  protected command(cmd: string, m: { questionId?: number }): void {
    const commands: Record<string, string> = {
      plan: 'planwire.plan',
      stop: 'planwire.stop',
      retry: 'planwire.retry',
      answer: 'planwire.answer',
      editTicket: 'planwire.editTicket',
      requestChanges: 'planwire.requestChanges',
      exportPlan: 'planwire.exportPlan',
      handoff: 'planwire.handoff',
      planVersions: 'planwire.planVersions',
    };
    const id = commands[cmd];
    if (id) void vscode.commands.executeCommand(id, { ticketId: this.ticketId, questionId: m.questionId });
  }

  protected async load(): Promise<void> {
    try {
      const res = await this.planwire.request<GetTicketResult>('planwire/getTicket', { ticketId: this.ticketId });
      if (this.disposed) return;
      this.ticket = res.ticket;
      this.setQuestions(res.questions ?? []);
      this.runs = [...(res.runs ?? [])].sort((a, b) => a.id - b.id);
      this.panel.title = this.title();
      this.render();
      await Promise.all(this.runs.map((r) => this.catchUp(r.id)));
    } catch (e) {
      this.post({ type: 'error', message: `Could not load the ticket: ${errorMessage(e)}` });
    }
  }

  private title(): string {
    const t = this.ticket;
    return t ? `${t.title} · ${statusWord(t.status)}` : `Ticket ${this.ticketId}`;
  }

  protected view(): PageSpec | undefined {
    if (!this.ticket) return undefined;
    return ticketPage({ ticket: this.ticket, runs: this.runs, transcripts: this.transcripts, questions: this.questions, now: Date.now() });
  }

  onTicket(ticket: Ticket): void {
    const statusChanged = this.ticket?.status !== ticket.status;
    this.ticket = ticket;
    this.panel.title = this.title();
    if (statusChanged) void this.resync();
    else this.render();
  }

  onQuestion(q: Question): void {
    const i = this.questions.findIndex((x) => x.id === q.id);
    if (i >= 0) this.questions[i] = q;
    else this.questions.push(q);
    this.questionRowsChanged(q.id);
    this.render();
  }

  /** Takes the questions as the server has them; the rows of those that changed are redrawn. */
  private setQuestions(questions: Question[]): void {
    const before = new Map(this.questions.map((q) => [q.id, JSON.stringify(q)]));
    for (const q of questions) if (before.get(q.id) !== JSON.stringify(q)) this.questionRowsChanged(q.id);
    this.questions = questions;
  }
}

/** What the breakdown page needs from the rest of the extension. */
export interface InitiativeSource {
  /** The initiative's text, when this window started it. */
  description(runId: number): string | undefined;
  /** Its tickets, in dependency order. */
  tickets(runId: number): Ticket[];
}

class BreakdownPanel extends RunsPanel {
  run: Run | undefined;

  constructor(readonly runId: number, panel: vscode.WebviewPanel, planwire: Planwire, extensionUri: vscode.Uri, private readonly source: InitiativeSource, onDispose: () => void) {
    super({ runId }, panel, planwire, extensionUri, onDispose);
  }

  protected command(cmd: string, m: { ticketId?: number }): void {
    if (cmd === 'stopRun') void vscode.commands.executeCommand('planwire.stopBreakdown', { runId: this.runId });
    if (cmd === 'openTicket' && m.ticketId !== undefined) void vscode.commands.executeCommand('planwire.openTranscript', { ticketId: m.ticketId });
  }

  private title(): string {
    const t = initiativeTitle(this.source.description(this.runId), this.runId, 40);
    const s = this.run ? (this.run.status === 'running' || this.run.status === 'queued' ? 'breaking down' : statusWord(this.run.status)) : '';
    return s ? `${t} · ${s}` : t;
  }

  protected async load(): Promise<void> {
    try {
      const res = await this.planwire.request<GetRunResult>('planwire/getRun', { runId: this.runId });
      if (this.disposed) return;
      this.run = res.run;
      this.runs = [res.run];
      this.panel.title = this.title();
      this.render();
      await this.catchUp(this.runId);
    } catch (e) {
      this.post({ type: 'error', message: `Could not load the breakdown: ${errorMessage(e)}` });
    }
  }

  override onRun(run: Run): void {
    this.run = run;
    this.panel.title = this.title();
    super.onRun(run);
  }

  protected view(): PageSpec | undefined {
    if (!this.run) return undefined;
    const description = this.source.description(this.runId);
    return breakdownPage({
      run: this.run,
      description,
      title: initiativeTitle(description, this.runId, 120),
      transcript: this.transcripts.get(this.runId),
      tickets: this.source.tickets(this.runId),
      now: Date.now(),
    });
  }
}

export class TranscriptPanels implements vscode.Disposable {
  private readonly panels = new Map<number, TicketPanel>();
  /** Breakdown pages, by run id. */
  private readonly runPanels = new Map<number, BreakdownPanel>();
  private readonly subs: vscode.Disposable[] = [];

  constructor(private readonly planwire: Planwire, private readonly extensionUri: vscode.Uri, private readonly initiatives: InitiativeSource) {
    this.subs.push(
      planwire.onTranscript.event((p) => {
        // A breakdown's transcript has no ticket.
        if (p.ticketId === null || p.ticketId === undefined) this.runPanels.get(p.runId)?.onEvents(p.runId, p.events ?? []);
        else this.panels.get(p.ticketId)?.onEvents(p.runId, p.events ?? []);
      }),
      planwire.onTicketChanged.event((t) => {
        this.panels.get(t.id)?.onTicket(t);
        if (t.initiativeRunId !== null && t.initiativeRunId !== undefined) this.runPanels.get(t.initiativeRunId)?.render();
      }),
      planwire.onRunChanged.event((r) => {
        if (r.ticketId === null || r.ticketId === undefined) this.runPanels.get(r.id)?.onRun(r);
        else this.panels.get(r.ticketId)?.onRun(r);
      }),
      planwire.onQuestion.event((p) => this.panels.get(p.ticketId)?.onQuestion(p.question)),
      planwire.onDelta.event((d) => {
        if (d.ticketId === null || d.ticketId === undefined) this.runPanels.get(d.runId)?.onDelta(d);
        else this.panels.get(d.ticketId)?.onDelta(d);
      }),
      planwire.onReady.event(() => {
        for (const p of this.panels.values()) void p.resync();
        for (const p of this.runPanels.values()) void p.resync();
      }),
      vscode.window.registerWebviewPanelSerializer(VIEW_TYPE, {
        deserializeWebviewPanel: async (panel, state: { ticketId?: number; runId?: number } | undefined) => {
          const runId = Number(state?.runId);
          if (state?.runId !== undefined && state?.runId !== null && Number.isInteger(runId) && !this.runPanels.has(runId)) {
            this.adoptRun(runId, panel);
            return;
          }
          const id = Number(state?.ticketId);
          if (!Number.isInteger(id) || this.panels.has(id)) {
            panel.dispose();
            return;
          }
          this.adopt(id, panel);
        },
      }),
    );
  }

  /** The ticket of the focused transcript panel, if any. */
  activeTicketId(): number | undefined {
    for (const [id, p] of this.panels) if (p.panel.active) return id;
    return undefined;
  }

  open(ticketId: number, preserveFocus = false): void {
    const existing = this.panels.get(ticketId);
    if (existing) {
      existing.panel.reveal(undefined, preserveFocus);
      return;
    }
    this.adopt(ticketId, this.createPanel(`Ticket ${ticketId}`, preserveFocus));
  }

  /** Opens the page of a breakdown run: the initiative, its transcript and its tickets. */
  openRun(runId: number, preserveFocus = false): void {
    const existing = this.runPanels.get(runId);
    if (existing) {
      existing.panel.reveal(undefined, preserveFocus);
      return;
    }
    this.adoptRun(runId, this.createPanel(`Initiative #${runId}`, preserveFocus));
  }

  /** Re-renders a breakdown page (its tickets or description changed). */
  refreshRun(runId: number): void {
    this.runPanels.get(runId)?.render();
  }

  private createPanel(title: string, preserveFocus: boolean): vscode.WebviewPanel {
    return vscode.window.createWebviewPanel(VIEW_TYPE, title, { viewColumn: vscode.ViewColumn.Active, preserveFocus }, {
      enableScripts: true,
      enableFindWidget: true,
      localResourceRoots: resourceRoots(this.extensionUri),
    });
  }

  private adopt(ticketId: number, panel: vscode.WebviewPanel): void {
    const p = new TicketPanel(ticketId, panel, this.planwire, this.extensionUri, () => this.panels.delete(ticketId));
    this.panels.set(ticketId, p);
    void p.resync();
  }

  private adoptRun(runId: number, panel: vscode.WebviewPanel): void {
    const p = new BreakdownPanel(runId, panel, this.planwire, this.extensionUri, this.initiatives, () => this.runPanels.delete(runId));
    this.runPanels.set(runId, p);
    void p.resync();
  }

  close(ticketId: number): void {
    this.panels.get(ticketId)?.dispose();
  }

  dispose(): void {
    for (const p of [...this.panels.values()]) p.dispose();
    for (const p of [...this.runPanels.values()]) p.dispose();
    for (const s of this.subs) s.dispose();
  }
}
