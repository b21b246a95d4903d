// planwire for VS Code: a thin client of the planwire sidecar. The server holds every ticket,
// run and transcript; this extension renders them and forwards what the person does.

import * as vscode from 'vscode';
import { ErrorCodes, METHOD_NOT_FOUND, Planwire, errorCode, errorMessage } from './client';
import { TicketStore, TicketTree, workspaceRoots } from './tickets';
import { TranscriptPanels } from './transcriptPanel';
import { askQuestion } from './answer';
import { answerable, questionSummary } from './pure/questions';
import { statusWord } from './pure/render';
import { ticketFromMarkdown } from './pure/ticketText';
import type { GetTicketResult, PlannerInfo, Question, StatusResult, Ticket } from './pure/types';
import { testLog } from './testlog';

type TicketArg = Ticket | { ticketId?: number; questionId?: number } | number | undefined;

const BUSY = new Set(['planning', 'queued']);
const RESTART_KEYS = ['planwire.serverPath', 'planwire.dbPath', 'planwire.logLevel'];

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('planwire', { log: true });
  const planwire = new Planwire(output);
  const store = new TicketStore(planwire);
  const tree = new TicketTree(store);
  const panels = new TranscriptPanels(planwire, context.extensionUri);
  const statusItem = vscode.window.createStatusBarItem('planwire.runs', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'planwire';
  statusItem.command = 'planwire.showTickets';
  context.subscriptions.push(output, planwire, store, tree, panels, statusItem);

  // ---- status bar: number of planning runs ------------------------------------------------
  let statusTimer: NodeJS.Timeout | undefined;
  const showCount = (n: number) => {
    statusItem.text = n ? `$(sync~spin) planwire: ${n} planning` : '$(checklist) planwire';
    statusItem.tooltip = n ? `${n} planning run${n === 1 ? '' : 's'}. Click to show the tickets.` : 'planwire: no planning runs. Click to show the tickets.';
    statusItem.show();
  };
  const updateStatus = () => {
    if (statusTimer) clearTimeout(statusTimer);
    statusTimer = setTimeout(async () => {
      const local = store.list().filter((t) => BUSY.has(t.status)).length;
      try {
        const s = await planwire.request<StatusResult>('planwire/status', {});
        showCount(Math.max(s.activeRuns?.length ?? 0, local));
      } catch {
        showCount(local);
      }
    }, 150);
  };
  context.subscriptions.push({ dispose: () => statusTimer && clearTimeout(statusTimer) });

  // ---- notifications ----------------------------------------------------------------------
  let firstReady = true;
  context.subscriptions.push(
    planwire.onTicketChanged.event((t) => {
      store.upsert(t);
      updateStatus();
    }),
    planwire.onRunChanged.event(() => updateStatus()),
    planwire.onQuestion.event(({ ticketId, question }) => {
      if (question.status !== 'open' && question.status !== 'stale') return;
      const t = store.get(ticketId);
      const title = t?.title ?? `ticket ${ticketId}`;
      void vscode.window
        .showInformationMessage(`planwire: “${title}” has a question: ${questionSummary(question)}`, 'Answer', 'Open Transcript')
        .then((c) => {
          if (c === 'Answer') void vscode.commands.executeCommand('planwire.answer', { ticketId, questionId: question.id });
          if (c === 'Open Transcript') panels.open(ticketId);
        });
    }),
    planwire.onReady.event(async () => {
      try {
        await store.refresh();
      } catch (e) {
        output.error(`listing tickets: ${errorMessage(e)}`);
      }
      updateStatus();
      if (firstReady) {
        firstReady = false;
        const waiting = store.list().filter((t) => answerable(t.openQuestions).length > 0);
        if (waiting.length) {
          const msg = waiting.length === 1
            ? `planwire: “${waiting[0].title}” is waiting for your answer.`
            : `planwire: ${waiting.length} tickets are waiting for your answers.`;
          void vscode.window.showInformationMessage(msg, 'Answer').then((c) => {
            if (c) void vscode.commands.executeCommand('planwire.answer', waiting.length === 1 ? waiting[0] : undefined);
          });
        }
      }
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => void store.refresh().catch(() => undefined)),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!RESTART_KEYS.some((k) => e.affectsConfiguration(k))) return;
      const busy = store.list().some((t) => BUSY.has(t.status));
      if (busy) {
        const c = await vscode.window.showWarningMessage('planwire settings changed. Restarting the server stops the planning runs it owns.', 'Restart Now', 'Later');
        if (c !== 'Restart Now') return;
      }
      await planwire.restart();
    }),
  );

  // ---- resolving the ticket a command acts on -------------------------------------------
  async function fetchTicket(id: number): Promise<Ticket | undefined> {
    const known = store.get(id);
    if (known) return known;
    try {
      const res = await planwire.request<GetTicketResult>('planwire/getTicket', { ticketId: id });
      store.upsert(res.ticket);
      return res.ticket;
    } catch (e) {
      void vscode.window.showErrorMessage(`planwire: ${errorMessage(e)}`);
      return undefined;
    }
  }

  async function resolveTicket(arg: TicketArg, what: string, applies: (t: Ticket) => boolean = () => true): Promise<Ticket | undefined> {
    if (typeof arg === 'number') return fetchTicket(arg);
    if (arg && typeof arg === 'object') {
      if ('id' in arg && typeof arg.id === 'number') return store.get(arg.id) ?? (arg as Ticket);
      if ('ticketId' in arg && typeof arg.ticketId === 'number') return fetchTicket(arg.ticketId);
    }
    const selected = tree.view.selection[0];
    testLog({ event: 'resolveTicket', what, selection: tree.view.selection.map((t) => t.id), activePanel: panels.activeTicketId() ?? null });
    if (selected) {
      const t = store.get(selected.id) ?? selected;
      if (applies(t)) return t;
    }
    const active = panels.activeTicketId();
    if (active !== undefined) {
      const t = store.get(active);
      if (t && applies(t)) return t;
    }
    if (!planwire.running && !(await planwire.start())) return undefined;
    const candidates = store.list().filter(applies);
    if (!candidates.length) {
      void vscode.window.showInformationMessage(`planwire: no ticket to ${what}.`);
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      candidates.map((t) => ({ label: t.title, description: statusWord(t.status), detail: `#${t.id} · ${[t.tool, t.model].filter(Boolean).join(' / ')}`, t })),
      { title: `planwire: ticket to ${what}`, placeHolder: 'Choose a ticket', matchOnDescription: true },
    );
    return pick?.t;
  }

  function reportError(action: string, e: unknown): void {
    const code = errorCode(e);
    if (code === ErrorCodes.plannerUnavailable) {
      void vscode.window.showErrorMessage(`planwire: cannot ${action}: ${errorMessage(e)}`, 'Choose Planner').then((c) => {
        if (c) void vscode.commands.executeCommand('planwire.chooseTool');
      });
      return;
    }
    void vscode.window.showErrorMessage(`planwire: cannot ${action}: ${errorMessage(e)}`);
  }

  function settingsTicketOptions(): { tool?: string; model?: string } {
    const cfg = vscode.workspace.getConfiguration('planwire');
    const tool = (cfg.get<string>('defaultTool') || '').trim();
    const model = (cfg.get<string>('model') || '').trim();
    return { ...(tool ? { tool } : {}), ...(model ? { model } : {}) };
  }

  async function chooseRoot(): Promise<string | undefined> {
    const roots = workspaceRoots();
    if (!roots.length) {
      void vscode.window.showErrorMessage('planwire: open a folder first; a ticket plans work in a folder.', 'Open Folder').then((c) => {
        if (c) void vscode.commands.executeCommand('workbench.action.files.openFolder');
      });
      return undefined;
    }
    if (roots.length === 1) return roots[0];
    const pick = await vscode.window.showQuickPick(roots.map((r) => ({ label: vscode.workspace.asRelativePath(r, true) || r, description: r, r })), {
      title: 'planwire: folder the ticket is about',
    });
    return pick?.r;
  }

  async function createTicket(root: string, title: string, description: string): Promise<void> {
    try {
      const ticket = await planwire.request<Ticket>('planwire/createTicket', { root, title, description, ...settingsTicketOptions() });
      store.upsert(ticket);
      await vscode.commands.executeCommand('planwire.tickets.focus');
      await tree.reveal(ticket);
      vscode.window.setStatusBarMessage(`planwire: created ticket #${ticket.id} “${ticket.title}”`, 5000);
    } catch (e) {
      reportError('create the ticket', e);
    }
  }

  async function plan(t: Ticket, extra: Record<string, unknown> = {}): Promise<void> {
    try {
      const res = await planwire.request<{ ticketId: number; runId: number }>('planwire/plan', { ticketId: t.id, ...extra });
      panels.open(res.ticketId ?? t.id);
      updateStatus();
    } catch (e) {
      if (errorCode(e) === ErrorCodes.ticketBusy) {
        void vscode.window.showWarningMessage(`planwire: “${t.title}” is already being planned.`, 'Open Transcript').then((c) => c && panels.open(t.id));
        return;
      }
      reportError('plan', e);
    }
  }

  // ---- commands ----------------------------------------------------------------------
  const register = (id: string, fn: (...args: any[]) => unknown) =>
    context.subscriptions.push(
      vscode.commands.registerCommand(id, async (...args: any[]) => {
        testLog({ event: 'command', id });
        try {
          return await fn(...args);
        } catch (e) {
          output.error(`${id}: ${errorMessage(e)}`);
          void vscode.window.showErrorMessage(`planwire: ${errorMessage(e)}`);
        }
      }),
    );

  register('planwire.newTicket', async () => {
    const root = await chooseRoot();
    if (!root) return;
    const title = await vscode.window.showInputBox({
      title: 'planwire: New Ticket (1/2)',
      prompt: 'Title of the ticket',
      placeHolder: 'What should be planned?',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'The title may not be empty'),
    });
    if (title === undefined) return;
    const description = await vscode.window.showInputBox({
      title: 'planwire: New Ticket (2/2)',
      prompt: 'Description (optional; for a long one use “planwire: New Ticket from Editor”)',
      placeHolder: 'Details, context, constraints… (may be empty)',
      ignoreFocusOut: true,
    });
    if (description === undefined) return;
    await createTicket(root, title.trim(), description.trim());
  });

  register('planwire.newTicketFromEditor', async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('planwire: open a markdown document with the ticket first (its first heading is the title).');
      return;
    }
    const text = editor.selection.isEmpty ? editor.document.getText() : editor.document.getText(editor.selection);
    const parsed = ticketFromMarkdown(text);
    if (!parsed) {
      void vscode.window.showErrorMessage('planwire: the document is empty; its first heading or line becomes the title.');
      return;
    }
    const root = await chooseRoot();
    if (!root) return;
    await createTicket(root, parsed.title, parsed.description);
  });

  register('planwire.plan', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'plan', (x) => !BUSY.has(x.status));
    if (t) await plan(t);
  });

  register('planwire.retry', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'retry', (x) => !BUSY.has(x.status) && x.status !== 'draft');
    if (!t) return;
    try {
      const res = await planwire.request<GetTicketResult>('planwire/getTicket', { ticketId: t.id });
      const last = [...(res.runs ?? [])].sort((a, b) => b.id - a.id)[0];
      await plan(t, last ? { retryOf: last.id } : {});
    } catch (e) {
      reportError('retry', e);
    }
  });

  register('planwire.stop', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'stop', (x) => BUSY.has(x.status));
    if (!t) return;
    try {
      const res = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `planwire: stopping “${t.title}”…` },
        () => planwire.request<{ stopped: boolean }>('planwire/stop', { ticketId: t.id }),
      );
      if (!res.stopped) void vscode.window.showInformationMessage(`planwire: “${t.title}” was not planning.`);
      else vscode.window.setStatusBarMessage(`planwire: stopped “${t.title}”`, 5000);
      updateStatus();
    } catch (e) {
      reportError('stop', e);
    }
  });

  register('planwire.answer', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'answer', (x) => answerable(x.openQuestions).length > 0 || x.status === 'needs_input');
    if (!t) return;
    let questions: Question[];
    try {
      const res = await planwire.request<GetTicketResult>('planwire/getTicket', { ticketId: t.id });
      store.upsert(res.ticket);
      questions = answerable(res.questions?.length ? res.questions : res.ticket.openQuestions);
    } catch (e) {
      reportError('load the questions', e);
      return;
    }
    const wanted = arg && typeof arg === 'object' && 'questionId' in arg ? arg.questionId : undefined;
    let q = questions.find((x) => x.id === wanted);
    if (!q && questions.length === 1) q = questions[0];
    if (!q && questions.length > 1) {
      const pick = await vscode.window.showQuickPick(questions.map((x) => ({ label: questionSummary(x), description: x.status === 'stale' ? 'stale' : undefined, x })), {
        title: `planwire: question of “${t.title}” to answer`,
      });
      q = pick?.x;
      if (!q) return;
    }
    if (!q) {
      void vscode.window.showInformationMessage(`planwire: “${t.title}” has no open question.`);
      return;
    }
    const answers = await askQuestion(q, t.title);
    if (!answers) return;
    try {
      const res = await planwire.request<{ runId: number }>('planwire/answer', { ticketId: t.id, questionId: q.id, answers });
      testLog({ event: 'answered', ticketId: t.id, questionId: q.id, answers, runId: res?.runId });
      panels.open(t.id, true);
      updateStatus();
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) {
        testLog({ event: 'answerUnsupported', ticketId: t.id, questionId: q.id, answers });
        void vscode.window.showErrorMessage('planwire: this server does not support answering questions yet (planwire/answer). Update planwire.');
        return;
      }
      reportError('answer', e);
    }
  });

  register('planwire.openTranscript', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'show');
    if (t) panels.open(t.id);
  });

  register('planwire.delete', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'delete', (x) => !BUSY.has(x.status));
    if (!t) return;
    const ok = await vscode.window.showWarningMessage(`Delete the ticket “${t.title}” with its runs and transcripts?`, { modal: true }, 'Delete');
    if (ok !== 'Delete') return;
    try {
      await planwire.request('planwire/deleteTicket', { ticketId: t.id });
      panels.close(t.id);
      store.remove(t.id);
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) {
        void vscode.window.showErrorMessage('planwire: this server cannot delete tickets yet (planwire/deleteTicket).');
        return;
      }
      reportError('delete', e);
    }
  });

  register('planwire.status', async () => {
    const s = await planwire.request<StatusResult>('planwire/status', {});
    type Item = vscode.QuickPickItem & { ticketId?: number };
    const items: Item[] = [];
    items.push({ label: 'Server', kind: vscode.QuickPickItemKind.Separator });
    items.push({ label: `$(server-process) planwire ${planwire.serverVersion}`, description: s.store?.path, detail: `${s.store?.tickets ?? 0} tickets · ${s.store?.runs ?? 0} runs · schema ${s.store?.schemaVersion ?? '?'}` });
    items.push({ label: 'Planning now', kind: vscode.QuickPickItemKind.Separator });
    if (!s.activeRuns?.length) items.push({ label: '$(check) no planning runs' });
    for (const r of s.activeRuns ?? []) {
      const t = store.get(r.ticketId);
      items.push({ label: `$(sync~spin) ${t?.title ?? `ticket ${r.ticketId}`}`, description: `run ${r.id} · ${statusWord(r.status)} · ${[r.tool, r.model].filter(Boolean).join(' / ')}`, ticketId: r.ticketId });
    }
    items.push({ label: 'Planners', kind: vscode.QuickPickItemKind.Separator });
    for (const p of s.planners ?? []) items.push(plannerItem(p));
    const pick = await vscode.window.showQuickPick(items, { title: 'planwire: status', placeHolder: 'Pick a run to open its transcript' });
    if (pick?.ticketId !== undefined) panels.open(pick.ticketId);
  });

  register('planwire.chooseTool', async () => {
    let planners: PlannerInfo[] = planwire.planners;
    try {
      planners = (await planwire.request<StatusResult>('planwire/status', {})).planners ?? planners;
    } catch {
      // use what initialize reported
    }
    const cfg = vscode.workspace.getConfiguration('planwire');
    const current = cfg.get<string>('defaultTool') || '';
    const tools = new Map<string, PlannerInfo | undefined>();
    for (const p of planners) tools.set(p.tool, p);
    for (const name of ['claude', 'opencode', 'codex', 'script']) if (!tools.has(name)) tools.set(name, undefined);
    const items = [...tools].map(([tool, p]) => ({ ...plannerItem(p ?? { tool, found: tool === 'script', supported: true }), tool, picked: tool === current }));
    const pick = await vscode.window.showQuickPick(items, { title: 'planwire: planner for new tickets', placeHolder: `Current: ${current || 'server default'}` });
    if (!pick) return;
    const model = await vscode.window.showInputBox({
      title: `planwire: model for ${pick.tool}`,
      prompt: pick.tool === 'script' ? 'Script name (demo, slow, questions, fail) or a script file path; empty for demo' : 'Model name; empty for the planner’s default',
      value: pick.tool === current ? cfg.get<string>('model') || '' : '',
      ignoreFocusOut: true,
    });
    if (model === undefined) return;
    const target = cfg.inspect('defaultTool')?.workspaceValue !== undefined ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await cfg.update('defaultTool', pick.tool, target);
    await cfg.update('model', model.trim(), target);
    vscode.window.setStatusBarMessage(`planwire: new tickets use ${pick.tool}${model.trim() ? ` / ${model.trim()}` : ''}`, 5000);
  });

  register('planwire.refresh', () => store.refresh());
  register('planwire.showTickets', () => vscode.commands.executeCommand('workbench.view.extension.planwire'));
  register('planwire.restartServer', () => planwire.restart());

  showCount(0);
  void planwire.start();
}

function plannerItem(p: PlannerInfo): vscode.QuickPickItem {
  const state = !p.found ? 'not found' : !p.supported ? 'unsupported version' : p.version ? `v${p.version.replace(/^v/, '')}` : 'found';
  return {
    label: `${p.found && p.supported ? '$(check)' : '$(warning)'} ${p.tool}`,
    description: state,
    detail: p.hint ?? p.path ?? undefined,
  };
}

export function deactivate(): void {
  // disposables in context.subscriptions stop the client
}
