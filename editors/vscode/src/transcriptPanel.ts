// One webview panel per ticket, showing its runs' transcripts and its plan.
// Catch-up: every run's transcript is fetched with planwire/getTranscript { afterSeq } on open,
// on reload and after a reconnect; live planwire/transcript notifications are applied on top.
// The reducer drops seqs it already has and holds back seqs past a gap, so nothing is missed
// or doubled whatever order fetches and notifications arrive in.

import * as crypto from 'crypto';
import * as vscode from 'vscode';
import type { Planwire } from './client';
import { errorMessage } from './client';
import { applyEvents, newRunTranscript, type RunTranscript } from './pure/transcript';
import { renderTicket, statusWord } from './pure/render';
import type { GetTicketResult, GetTranscriptResult, Question, Run, Ticket, TranscriptEvent } from './pure/types';
import { testLog } from './testlog';

export const VIEW_TYPE = 'planwire.transcript';
const PAGE = 2000;

class TicketPanel implements vscode.Disposable {
  ticket: Ticket | undefined;
  /** Oldest first. */
  runs: Run[] = [];
  questions: Question[] = [];
  readonly transcripts = new Map<number, RunTranscript>();
  private readonly fetching = new Map<number, Promise<void>>();
  private readonly again = new Set<number>();
  private renderTimer: NodeJS.Timeout | undefined;
  private clock: NodeJS.Timeout | undefined;
  private disposed = false;
  private readonly subs: vscode.Disposable[] = [];

  constructor(
    readonly ticketId: number,
    readonly panel: vscode.WebviewPanel,
    private readonly planwire: Planwire,
    private readonly extensionUri: vscode.Uri,
    private readonly onDispose: () => void,
  ) {
    panel.webview.options = { enableScripts: true, localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'media')] };
    panel.iconPath = vscode.Uri.joinPath(extensionUri, 'media', 'planwire.svg');
    panel.webview.html = this.shell();
    this.subs.push(
      panel.onDidDispose(() => this.dispose()),
      panel.webview.onDidReceiveMessage((m: { type: string; cmd?: string; questionId?: number }) => {
        if (m.type === 'ready') this.render(true);
        if (m.type === 'command' && m.cmd) {
          const commands: Record<string, string> = {
            plan: 'planwire.plan',
            stop: 'planwire.stop',
            retry: 'planwire.retry',
            answer: 'planwire.answer',
          };
          const id = commands[m.cmd];
          if (id) void vscode.commands.executeCommand(id, { ticketId: this.ticketId, questionId: m.questionId });
        }
      }),
    );
  }

  private shell(): string {
    const nonce = crypto.randomBytes(16).toString('base64');
    const webview = this.panel.webview;
    const css = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'transcript.css'));
    const js = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'transcript.js'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${css}">
<title>planwire transcript</title>
</head>
<body data-ticket-id="${this.ticketId}">
<div id="root"><div class="dim">Loading…</div></div>
<script nonce="${nonce}" src="${js}"></script>
</body>
</html>`;
  }

  private syncing: Promise<void> | undefined;
  private syncAgain = false;

  /** Reloads the ticket, its runs and questions, then catches every run up (coalesced). */
  resync(): Promise<void> {
    if (this.syncing) {
      this.syncAgain = true;
      return this.syncing;
    }
    this.syncing = (async () => {
      do {
        this.syncAgain = false;
        await this.doResync();
      } while (this.syncAgain && !this.disposed);
    })().finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async doResync(): Promise<void> {
    try {
      const res = await this.planwire.request<GetTicketResult>('planwire/getTicket', { ticketId: this.ticketId });
      if (this.disposed) return;
      this.ticket = res.ticket;
      this.questions = res.questions ?? [];
      this.runs = [...(res.runs ?? [])].sort((a, b) => a.id - b.id);
      this.panel.title = this.title();
      this.render();
      await Promise.all(this.runs.map((r) => this.catchUp(r.id)));
    } catch (e) {
      this.panel.webview.postMessage({ type: 'error', message: `Could not load the ticket: ${errorMessage(e)}` });
    }
  }

  private title(): string {
    const t = this.ticket;
    return t ? `${t.title} · ${statusWord(t.status)}` : `Ticket ${this.ticketId}`;
  }

  private transcript(runId: number): RunTranscript {
    let t = this.transcripts.get(runId);
    if (!t) {
      t = newRunTranscript(runId);
      this.transcripts.set(runId, t);
    }
    return t;
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
          const res = await this.planwire.request<GetTranscriptResult>('planwire/getTranscript', { runId, afterSeq: t.lastSeq, limit: PAGE });
          const r = applyEvents(t, res.events ?? []);
          if (r.applied) this.render();
          testLog({ event: 'catchUp', ticketId: this.ticketId, runId, afterSeq: before, got: res.events?.length ?? 0, lastSeq: t.lastSeq, serverLastSeq: res.lastSeq, done: res.done });
          if (!res.events?.length || t.lastSeq >= res.lastSeq || t.lastSeq === before) break;
        }
      } while (this.again.has(runId) && !this.disposed);
    })()
      .catch((e) => {
        testLog({ event: 'catchUpFailed', runId, message: errorMessage(e) });
      })
      .finally(() => this.fetching.delete(runId));
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
    testLog({ event: 'transcript', ticketId: this.ticketId, runId, seqs: events.map((e) => e.seq), applied: r.applied, duplicates: r.duplicates, lastSeq: t.lastSeq });
    if (r.needsCatchUp) void this.catchUp(runId);
    if (r.applied) this.render();
  }

  onTicket(ticket: Ticket): void {
    const statusChanged = this.ticket?.status !== ticket.status;
    this.ticket = ticket;
    this.panel.title = this.title();
    if (statusChanged) void this.resync();
    else this.render();
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

  onQuestion(q: Question): void {
    const i = this.questions.findIndex((x) => x.id === q.id);
    if (i >= 0) this.questions[i] = q;
    else this.questions.push(q);
    this.render();
  }

  /** Re-renders soon (coalescing bursts of events), or now. */
  render(now = false): void {
    if (this.disposed) return;
    if (now) {
      if (this.renderTimer) clearTimeout(this.renderTimer);
      this.renderTimer = undefined;
      this.post();
      return;
    }
    this.renderTimer ??= setTimeout(() => {
      this.renderTimer = undefined;
      this.post();
    }, 60);
  }

  private post(): void {
    if (!this.ticket || this.disposed) return;
    const html = renderTicket({ ticket: this.ticket, runs: this.runs, transcripts: this.transcripts, questions: this.questions, now: Date.now() });
    void this.panel.webview.postMessage({ type: 'render', html, ticketId: this.ticketId, status: this.ticket.status });
    const live = this.runs.some((r) => r.status === 'running' || r.status === 'queued');
    if (live && !this.clock) this.clock = setInterval(() => this.render(), 1000);
    if (!live && this.clock) {
      clearInterval(this.clock);
      this.clock = undefined;
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.renderTimer) clearTimeout(this.renderTimer);
    if (this.clock) clearInterval(this.clock);
    for (const s of this.subs) s.dispose();
    this.panel.dispose();
    this.onDispose();
  }
}

export class TranscriptPanels implements vscode.Disposable {
  private readonly panels = new Map<number, TicketPanel>();
  private readonly subs: vscode.Disposable[] = [];

  constructor(private readonly planwire: Planwire, private readonly extensionUri: vscode.Uri) {
    this.subs.push(
      planwire.onTranscript.event((p) => this.panels.get(p.ticketId)?.onEvents(p.runId, p.events ?? [])),
      planwire.onTicketChanged.event((t) => this.panels.get(t.id)?.onTicket(t)),
      planwire.onRunChanged.event((r) => this.panels.get(r.ticketId)?.onRun(r)),
      planwire.onQuestion.event((p) => this.panels.get(p.ticketId)?.onQuestion(p.question)),
      planwire.onReady.event(() => {
        for (const p of this.panels.values()) void p.resync();
      }),
      vscode.window.registerWebviewPanelSerializer(VIEW_TYPE, {
        deserializeWebviewPanel: async (panel, state: { ticketId?: number } | undefined) => {
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
    const panel = vscode.window.createWebviewPanel(VIEW_TYPE, `Ticket ${ticketId}`, { viewColumn: vscode.ViewColumn.Active, preserveFocus }, {
      enableScripts: true,
      enableFindWidget: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, 'media')],
    });
    this.adopt(ticketId, panel);
  }

  private adopt(ticketId: number, panel: vscode.WebviewPanel): void {
    const p = new TicketPanel(ticketId, panel, this.planwire, this.extensionUri, () => this.panels.delete(ticketId));
    this.panels.set(ticketId, p);
    void p.resync();
  }

  close(ticketId: number): void {
    this.panels.get(ticketId)?.dispose();
  }

  dispose(): void {
    for (const p of [...this.panels.values()]) p.dispose();
    for (const s of this.subs) s.dispose();
  }
}
