// The page model: what the transcript webview shows, and the smallest set of DOM operations that
// brings it up to date. A reset draws the whole page in one string (a page opened after a long
// run renders in one pass); after that, each update sends only the rows added or changed (the
// reducer records them) and the parts whose HTML changed (header, run heads and footers,
// questions, plan). The cost of an update is proportional to what changed.
// Pure (no vscode import) so it is unit-tested with node:test.

import { containerId, domId, isLive, renderPage, renderRow, renderRun, runEnd, runFooter, runHead, subagentHead, type PageSpec, type RowContext } from './render';
import { discardChanges, runContainer, runEnded, takeChanges, type RunTranscript } from './transcript';

/** One DOM operation, applied by the webview (src/webview/main.ts). */
export type Op =
  /** Appends a row (or a run) to a container; rows go into the container's last chunk. */
  | { op: 'append'; parent: string; id: string; html: string }
  /** Replaces the element with this id (a row that changed, or a part). */
  | { op: 'replace'; id: string; html: string }
  /** Opens or closes a `<details>` unless the reader toggled it. */
  | { op: 'fold'; id: string; key: string; open: boolean };

/**
 * Messages to the webview. `gen` numbers resets; a patch of an older page is ignored. `n`
 * numbers the resets and patches of the panel; the webview answers `{ type: 'applied', n }`.
 */
export type ToWebview =
  | { type: 'reset'; gen: number; n: number; html: string; status: string }
  | { type: 'patch'; gen: number; n: number; ops: Op[]; status: string }
  | { type: 'error'; message: string };

/** The id of a part: the first id attribute of its root element. */
function partId(html: string): string {
  const m = /^<[a-z]+[^>]*?\sid="([^"]+)"/.exec(html);
  if (!m) throw new Error(`a part without an id: ${html.slice(0, 60)}`);
  return m[1];
}

export class PageModel {
  /** Part id → the HTML the webview has. */
  private readonly sent = new Map<string, string>();
  /** Runs drawn, in page order. */
  private runs: number[] = [];
  /** Whether each run was live when last drawn. */
  private readonly live = new Map<number, boolean>();
  private drawn = false;

  get isDrawn(): boolean {
    return this.drawn;
  }

  /** The whole page, in one string. Pending row changes are dropped: this draws them. */
  reset(page: PageSpec): string {
    this.sent.clear();
    this.live.clear();
    for (const t of page.rows.transcripts.values()) discardChanges(t);
    for (const html of [...page.above, ...page.below]) this.sent.set(partId(html), html);
    page.runs.forEach((run, i) => this.drewRun(page, i));
    this.runs = page.runs.map((r) => r.id);
    this.drawn = true;
    return renderPage(page);
  }

  /** Forgets the page (the webview is gone or reloading): the next update must be a reset. */
  invalidate(): void {
    this.drawn = false;
  }

  /** The operations that bring the drawn page up to date, or undefined when it must be redrawn. */
  patch(page: PageSpec): Op[] | undefined {
    if (!this.drawn) return undefined;
    const ids = page.runs.map((r) => r.id);
    // Runs are only ever added, after the others; anything else is redrawn.
    if (ids.length < this.runs.length || this.runs.some((id, i) => ids[i] !== id)) return undefined;
    const ops: Op[] = [];
    for (const html of [...page.above, ...page.below]) this.part(html, ops);
    page.runs.forEach((run, i) => {
      if (i >= this.runs.length) this.addRun(page, i, ops);
      else this.updateRun(page, i, ops);
    });
    return ops;
  }

  private addRun(page: PageSpec, i: number, ops: Op[]): void {
    const run = page.runs[i];
    const prev = page.runs[i - 1];
    if (page.foldOlder && prev) {
      const key = runContainer(prev.id);
      ops.push({ op: 'fold', id: domId(key), key, open: false });
    }
    const t = page.rows.transcripts.get(run.id);
    if (t) discardChanges(t);
    const key = runContainer(run.id);
    ops.push({ op: 'append', parent: containerId('runs'), id: domId(key), html: renderRun(run, i, page.rows, true, page.label) });
    this.drewRun(page, i);
    this.runs.push(run.id);
  }

  private updateRun(page: PageSpec, i: number, ops: Op[]): void {
    const run = page.runs[i];
    const t = page.rows.transcripts.get(run.id);
    const live = isLive(run);
    // Calls with no result and running subagents look different once the run has ended.
    if (t && this.live.get(run.id) && !live) runEnded(t);
    this.live.set(run.id, live);
    if (t) this.rows(t, { questions: page.rows.questions, live }, ops);
    for (const html of this.runParts(page, i, t)) this.part(html, ops);
  }

  /** The rows added and changed since the last look. */
  private rows(t: RunTranscript, ctx: RowContext, ops: Op[]): void {
    const { added, changed } = takeChanges(t);
    for (const a of added) ops.push({ op: 'append', parent: containerId(a.container), id: domId(a.block.key), html: renderRow(a.block, ctx, false) });
    for (const b of changed) {
      // A subagent's rows stay; only its summary line changes.
      if (b.type === 'subagent') ops.push({ op: 'replace', id: `${domId(b.key)}-head`, html: subagentHead(b, ctx.live) });
      else ops.push({ op: 'replace', id: domId(b.key), html: renderRow(b, ctx, false) });
    }
  }

  private runParts(page: PageSpec, i: number, t: RunTranscript | undefined): string[] {
    const run = page.runs[i];
    return [runHead(run, i, page.label), runEnd(run, t), runFooter(run, t, page.rows.now)];
  }

  private drewRun(page: PageSpec, i: number): void {
    const run = page.runs[i];
    for (const html of this.runParts(page, i, page.rows.transcripts.get(run.id))) this.sent.set(partId(html), html);
    this.live.set(run.id, isLive(run));
  }

  private part(html: string, ops: Op[]): void {
    const id = partId(html);
    if (this.sent.get(id) === html) return;
    this.sent.set(id, html);
    ops.push({ op: 'replace', id, html });
  }
}
