// The plan as a living document: editing a ticket (title, description, branch), requesting
// changes to its plan, its versions (shown as read-only virtual documents, compared in VS Code's
// diff editor), exporting one into the repository, and handing one off to an implementation CLI
// in an integrated terminal. The server does the work; this module asks the person and shows it.

import * as vscode from 'vscode';
import { ErrorCodes, errorCode, errorMessage, type Planwire } from './client';
import type { ExportPlanResult, HandoffResult, ListPlansResult, PlanVersion, Ticket } from './pure/types';
import { branchProblem } from './pure/ticketText';
import { testLog } from './testlog';

/** The scheme of a plan version's document: `planwire-plan:/<ticketId>/v<version>.md`. */
export const PLAN_SCHEME = 'planwire-plan';

export function planUri(ticketId: number, version: number, title: string): vscode.Uri {
  const name = title.replace(/[^A-Za-z0-9 _-]+/g, '').trim().slice(0, 40) || 'plan';
  return vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${ticketId}/v${version} ${name}.md` });
}

function parsePlanUri(uri: vscode.Uri): { ticketId: number; version: number } | undefined {
  const m = /^\/(\d+)\/v(\d+)\b/.exec(uri.path);
  return m ? { ticketId: Number(m[1]), version: Number(m[2]) } : undefined;
}

/** Serves plan versions as documents (a version never changes, so each is fetched once). */
class PlanDocuments implements vscode.TextDocumentContentProvider {
  private readonly cache = new Map<string, string>();
  constructor(private readonly planwire: Planwire) {}

  remember(ticketId: number, v: PlanVersion): void {
    this.cache.set(`${ticketId}/${v.version}`, v.markdown);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const id = parsePlanUri(uri);
    if (!id) return `Not a plan version: ${uri.toString()}`;
    const key = `${id.ticketId}/${id.version}`;
    const known = this.cache.get(key);
    if (known !== undefined) return known;
    try {
      const v = await this.planwire.request<PlanVersion>('planwire/getPlan', { ticketId: id.ticketId, version: id.version });
      this.remember(id.ticketId, v);
      return v.markdown;
    } catch (e) {
      return `Plan version ${id.version} of ticket ${id.ticketId} could not be loaded: ${errorMessage(e)}`;
    }
  }
}

/** What the commands need from the rest of the extension. */
export interface LivingDeps {
  planwire: Planwire;
  register: (id: string, fn: (...args: any[]) => unknown) => void;
  /** The ticket a command acts on (an argument, the tree's selection, the focused panel, or a pick). */
  resolveTicket: (arg: unknown, what: string, applies?: (t: Ticket) => boolean) => Promise<Ticket | undefined>;
  plan: (t: Ticket, extra: Record<string, unknown>) => Promise<void>;
  upsert: (t: Ticket) => void;
  reportError: (action: string, e: unknown) => void;
  openTranscript: (ticketId: number) => void;
}

const BUSY = new Set(['planning', 'queued']);

type TicketField = 'tool' | 'model' | 'variant' | 'branch';
const FIELD_WORDS: Record<TicketField, string> = { tool: 'Planner', model: 'Model', variant: 'Variant', branch: 'Branch' };
const IMPLEMENTERS = ['claude', 'opencode', 'codex'];

/** The message for an edit the server refused because the ticket is being planned. */
export function busyEditMessage(title: string): string {
  return `planwire: “${title}” is being planned, so it cannot be edited now. Stop planning it first, or edit it when the run ends.`;
}

export function registerLivingPlan(context: vscode.ExtensionContext, deps: LivingDeps): void {
  const { planwire, register, resolveTicket, reportError } = deps;
  const docs = new PlanDocuments(planwire);
  context.subscriptions.push(vscode.workspace.registerTextDocumentContentProvider(PLAN_SCHEME, docs));
  const planned = (t: Ticket) => !!t.plan;

  async function update(t: Ticket, fields: Record<string, string>): Promise<Ticket | undefined> {
    try {
      const res = await planwire.request<{ ticket: Ticket }>('planwire/updateTicket', { ticketId: t.id, ...fields });
      deps.upsert(res.ticket);
      testLog({ event: 'ticketUpdated', ticketId: t.id, fields: Object.keys(fields) });
      return res.ticket;
    } catch (e) {
      if (errorCode(e) === ErrorCodes.ticketBusy) {
        testLog({ event: 'editBusy', ticketId: t.id });
        void vscode.window.showWarningMessage(busyEditMessage(t.title), 'Stop Planning', 'Open Transcript').then((c) => {
          if (c === 'Stop Planning') void vscode.commands.executeCommand('planwire.stop', { ticketId: t.id });
          if (c === 'Open Transcript') deps.openTranscript(t.id);
        });
        return undefined;
      }
      reportError('edit the ticket', e);
      return undefined;
    }
  }

  register('planwire.editTicket', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'edit', (x) => !BUSY.has(x.status));
    if (!t) return;
    const title = await vscode.window.showInputBox({
      title: 'planwire: Edit Ticket (1/3)', prompt: 'Title', value: t.title, ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'The title may not be empty'),
    });
    if (title === undefined) return;
    const description = await vscode.window.showInputBox({
      title: 'planwire: Edit Ticket (2/3)', prompt: 'Description (may be empty)', value: t.description, ignoreFocusOut: true,
    });
    if (description === undefined) return;
    const branch = await vscode.window.showInputBox({
      title: 'planwire: Edit Ticket (3/3)', prompt: 'Git branch the work is for (empty for none); it decides where the ticket is planned', value: t.branch ?? '', ignoreFocusOut: true,
      validateInput: branchProblem,
    });
    if (branch === undefined) return;
    const fields: Record<string, string> = {};
    if (title.trim() !== t.title) fields.title = title.trim();
    if (description.trim() !== t.description) fields.description = description.trim();
    if (branch.trim() !== (t.branch ?? '')) fields.branch = branch.trim();
    if (!Object.keys(fields).length) return;
    const after = await update(t, fields);
    if (after) vscode.window.setStatusBarMessage(`planwire: edited “${after.title}”; the next plan uses the new text`, 5000);
  });

  /** Sets one field of the ticket: its planner (tool), model, variant or branch. */
  async function setField(t: Ticket, field: TicketField): Promise<void> {
    const fields: Record<string, string> = {};
    if (field === 'tool') {
      const tools = ['claude', 'opencode', 'codex', 'script'];
      const pick = await vscode.window.showQuickPick(tools.map((x) => ({ label: x, description: x === t.tool ? 'current' : undefined })), {
        title: `planwire: planner of “${t.title}”`,
        ignoreFocusOut: true,
      });
      if (!pick || pick.label === t.tool) return;
      fields.tool = pick.label;
      // The model belongs to the old tool: ask again (empty for the planner's default).
      const model = await vscode.window.showInputBox({
        title: `planwire: model for ${pick.label}`, prompt: 'Empty for the planner\'s default', value: '', ignoreFocusOut: true,
      });
      if (model === undefined) return;
      fields.model = model.trim();
    } else {
      const value = await vscode.window.showInputBox({
        title: `planwire: Set ${FIELD_WORDS[field]}`,
        prompt: `${FIELD_WORDS[field]} of “${t.title}” (empty for none)${field === 'branch' ? '; it decides where the ticket is planned' : ''}`,
        value: t[field] ?? '',
        ignoreFocusOut: true,
        validateInput: field === 'branch' ? branchProblem : undefined,
      });
      if (value === undefined || value.trim() === (t[field] ?? '')) return;
      fields[field] = value.trim();
    }
    await update(t, fields);
  }

  register('planwire.setField', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'set a field of', (x) => !BUSY.has(x.status));
    if (!t) return;
    const pick = await vscode.window.showQuickPick(
      (Object.keys(FIELD_WORDS) as TicketField[]).map((f) => ({ label: FIELD_WORDS[f], description: t[f] || 'none', f })),
      { ignoreFocusOut: true, title: `planwire: set a field of “${t.title}”` },
    );
    if (pick) await setField(t, pick.f);
  });

  register('planwire.setBranch', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'set the branch of', (x) => !BUSY.has(x.status));
    if (t) await setField(t, 'branch');
  });

  register('planwire.requestChanges', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'request changes to', (x) => planned(x) && !BUSY.has(x.status));
    if (!t) return;
    if (!t.plan) {
      void vscode.window.showInformationMessage(`planwire: “${t.title}” has no plan yet; plan it first.`);
      return;
    }
    const feedback = await vscode.window.showInputBox({
      title: 'planwire: Request Changes',
      prompt: `What should change in the plan of “${t.title}”?`,
      placeHolder: 'e.g. Also add a test that checks the printed greeting',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'Say what should change'),
    });
    if (feedback === undefined) return;
    testLog({ event: 'requestChanges', ticketId: t.id });
    await deps.plan(t, { feedback: feedback.trim() });
  });

  async function versions(t: Ticket): Promise<PlanVersion[] | undefined> {
    try {
      const res = await planwire.request<ListPlansResult>('planwire/listPlans', { ticketId: t.id });
      for (const v of res.plans ?? []) docs.remember(t.id, v);
      return res.plans ?? [];
    } catch (e) {
      reportError('list the plan versions', e);
      return undefined;
    }
  }

  async function showVersion(t: Ticket, v: PlanVersion): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(planUri(t.id, v.version, v.plan.title || t.title));
    await vscode.window.showTextDocument(doc, { preview: false });
    testLog({ event: 'planShown', ticketId: t.id, version: v.version });
  }

  async function compare(t: Ticket, a: PlanVersion, b: PlanVersion): Promise<void> {
    const [older, newer] = a.version < b.version ? [a, b] : [b, a];
    await vscode.commands.executeCommand(
      'vscode.diff',
      planUri(t.id, older.version, older.plan.title || t.title),
      planUri(t.id, newer.version, newer.plan.title || t.title),
      `${t.title}: plan v${older.version} ↔ v${newer.version}`,
    );
    testLog({ event: 'planDiff', ticketId: t.id, versions: [older.version, newer.version] });
  }

  const versionItem = (v: PlanVersion) => ({ label: `v${v.version} · ${v.plan.title || 'Plan'}`, description: new Date(v.createdAt).toLocaleString(), v });

  register('planwire.planVersions', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'show the plan versions of', planned);
    if (!t) return;
    const all = await versions(t);
    if (!all) return;
    if (!all.length) {
      void vscode.window.showInformationMessage(`planwire: “${t.title}” has no plan yet.`);
      return;
    }
    const newest = [...all].reverse();
    type Item = vscode.QuickPickItem & { run: () => Promise<void> };
    const items: Item[] = [];
    if (all.length >= 2) {
      const [b, a] = newest;
      items.push({ label: `$(diff) Compare v${a.version} ↔ v${b.version}`, description: 'the last change', run: () => compare(t, a, b) });
      items.push({ label: '$(diff) Compare Two Versions…', run: async () => {
        const first = await vscode.window.showQuickPick(newest.map(versionItem), { ignoreFocusOut: true, title: `planwire: compare a plan version of “${t.title}”…` });
        if (!first) return;
        const second = await vscode.window.showQuickPick(newest.filter((v) => v !== first.v).map(versionItem), { ignoreFocusOut: true, title: `…with (v${first.v.version})` });
        if (second) await compare(t, first.v, second.v);
      } });
    }
    for (const v of newest) items.push({ ...versionItem(v), run: () => showVersion(t, v) });
    const pick = await vscode.window.showQuickPick(items, { ignoreFocusOut: true, title: `planwire: plan versions of “${t.title}”`, placeHolder: 'Show a version, or compare two' });
    if (pick) await pick.run();
  });

  register('planwire.exportPlan', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'export the plan of', planned);
    if (!t) return;
    let target: vscode.Uri | undefined;
    try {
      const dry = await planwire.request<ExportPlanResult>('planwire/exportPlan', { ticketId: t.id, dryRun: true });
      target = await vscode.window.showSaveDialog({
        title: `planwire: export plan v${dry.version} of “${t.title}”`,
        defaultUri: vscode.Uri.file(dry.path),
        saveLabel: 'Export',
        filters: { Markdown: ['md'] },
      });
    } catch (e) {
      reportError('export the plan', e);
      return;
    }
    if (!target) return;
    const send = (overwrite: boolean) => planwire.request<ExportPlanResult>('planwire/exportPlan', { ticketId: t.id, path: target!.fsPath, overwrite });
    let res: ExportPlanResult;
    try {
      res = await send(false);
    } catch (e) {
      if (errorCode(e) !== ErrorCodes.conflict) {
        reportError('export the plan', e);
        return;
      }
      testLog({ event: 'exportConflict', ticketId: t.id, path: target.fsPath });
      const ok = await vscode.window.showWarningMessage(`${target.fsPath} already exists. Replace it with the plan?`, { modal: true }, 'Replace');
      if (ok !== 'Replace') return;
      try {
        res = await send(true);
      } catch (e2) {
        reportError('export the plan', e2);
        return;
      }
    }
    testLog({ event: 'exported', ticketId: t.id, ...res });
    void vscode.window.showInformationMessage(`planwire: exported plan v${res.version} to ${vscode.workspace.asRelativePath(res.path)}`, 'Open').then((c) => {
      if (c) void vscode.window.showTextDocument(vscode.Uri.file(res.path));
    });
  });

  register('planwire.handoff', async (arg?: unknown) => {
    const t = await resolveTicket(arg, 'hand off', (x) => planned(x) && !BUSY.has(x.status));
    if (!t) return;
    const order = IMPLEMENTERS.includes(t.tool) ? [t.tool, ...IMPLEMENTERS.filter((x) => x !== t.tool)] : IMPLEMENTERS;
    const pick = await vscode.window.showQuickPick(
      order.map((tool) => ({ label: tool, description: tool === t.tool ? 'the planner of this ticket' : undefined, tool })),
      { ignoreFocusOut: true, title: `planwire: hand off plan v${t.planVersion ?? ''} of “${t.title}” to`, placeHolder: 'The CLI that implements it, in a terminal' },
    );
    if (!pick) return;
    let res: HandoffResult;
    try {
      res = await planwire.request<HandoffResult>('planwire/handoff', { ticketId: t.id, tool: pick.tool });
    } catch (e) {
      reportError(`hand off to ${pick.tool}`, e);
      return;
    }
    // The command runs as it is, with no shell between (argv[0] is the program).
    const terminal = vscode.window.createTerminal({
      name: `${pick.tool}: ${t.title}`.slice(0, 60),
      shellPath: res.argv[0],
      shellArgs: res.argv.slice(1),
      cwd: res.cwd,
    });
    terminal.show();
    testLog({ event: 'handoffTerminal', ticketId: t.id, tool: pick.tool, argv: res.argv, cwd: res.cwd, version: res.version });
  });
}
