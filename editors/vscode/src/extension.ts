// planwire for VS Code: a thin client of the planwire sidecar. The server holds every ticket,
// run and transcript; this extension renders them and forwards what the person does.

import * as path from 'path';
import * as vscode from 'vscode';
import { ErrorCodes, METHOD_NOT_FOUND, Planwire, errorCode, errorMessage } from './client';
import { TicketStore, TicketTree, normalizeRoot, workspaceRoots, type Node } from './tickets';
import { TranscriptPanels } from './transcriptPanel';
import { askQuestion } from './answer';
import { registerLivingPlan } from './living';
import { answerable, needsInput, questionSummary, statusSummary } from './pure/questions';
import { statusWord } from './pure/render';
import { branchProblem, ticketFromMarkdown } from './pure/ticketText';
import { initiativeTitle, passMessage, suggestLinkName } from './pure/initiative';
import type { GetRunResult, GetTicketResult, LinksResult, MemoryEntry, MemorySuggestion, PlannerInfo, Question, Run, StatusResult, Ticket } from './pure/types';
import { testLog } from './testlog';

type TicketArg = Ticket | Node | { ticketId?: number; questionId?: number } | number | undefined;

const BUSY = new Set(['planning', 'queued']);
const BUSY_RUN = new Set(['running', 'queued']);
const RESTART_KEYS = ['planwire.serverPath', 'planwire.dbPath', 'planwire.logLevel', 'planwire.sandbox'];

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('planwire', { log: true });
  const planwire = new Planwire(output, context.extensionPath);
  const store = new TicketStore(planwire, context.workspaceState);
  const tree = new TicketTree(store);
  const panels = new TranscriptPanels(planwire, context.extensionUri, {
    description: (runId) => store.initiativeText(runId),
    tickets: (runId) => store.initiativeTickets(runId),
  });
  const statusItem = vscode.window.createStatusBarItem('planwire.runs', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'planwire';
  statusItem.command = 'planwire.showTickets';
  context.subscriptions.push(output, planwire, store, tree, panels, statusItem);

  // ---- status bar: planning runs, and tickets waiting for an answer ------------------------
  let statusTimer: NodeJS.Timeout | undefined;
  const showCount = (n: number) => {
    const waiting = store.list().filter(needsInput).length;
    const s = statusSummary(n, waiting);
    statusItem.text = s.text;
    statusItem.tooltip = s.tooltip;
    statusItem.command = waiting ? 'planwire.answer' : 'planwire.showTickets';
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

  const memoryTimers = new Map<string, NodeJS.Timeout>();
  const scheduleMemoryRefresh = (root: string) => {
    const r = normalizeRoot(root);
    const old = memoryTimers.get(r);
    if (old) clearTimeout(old);
    memoryTimers.set(r, setTimeout(() => {
      memoryTimers.delete(r);
      void store.refreshMemory(r);
    }, 300));
  };
  context.subscriptions.push({ dispose: () => memoryTimers.forEach((t) => clearTimeout(t)) });

  // ---- notifications ----------------------------------------------------------------------
  let firstReady = true;
  /** Questions already shown in a notification. */
  const notified = new Set<number>();
  context.subscriptions.push(
    planwire.onTicketChanged.event((t) => {
      store.upsert(t);
      updateStatus();
      // A finished plan may have suggested memory entries.
      if (t.status === 'planned' || t.status === 'needs_input') scheduleMemoryRefresh(t.root);
    }),
    planwire.onRunChanged.event((r) => {
      store.upsertRun(r);
      updateStatus();
    }),
    planwire.onQuestion.event(({ ticketId, question }) => {
      if (question.status !== 'open' && question.status !== 'stale') return;
      // Once per question, whether the window is in front or not (a toast with actions stays
      // until it is dealt with; the view's badge and the status bar keep the count).
      if (notified.has(question.id)) return;
      notified.add(question.id);
      const t = store.get(ticketId);
      const title = t?.title ?? `ticket ${ticketId}`;
      testLog({ event: 'questionNotified', ticketId, questionId: question.id, focused: vscode.window.state.focused });
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
    vscode.window.onDidChangeWindowState((w) => testLog({ event: 'windowState', focused: w.focused })),
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
      // A row of the tree (its context menu passes the node) or a ticket.
      if ('kind' in arg && arg.kind === 'ticket') return fetchTicket(arg.id);
      if ('id' in arg && typeof arg.id === 'number' && 'title' in arg) return store.get(arg.id) ?? (arg as Ticket);
      if ('ticketId' in arg && typeof arg.ticketId === 'number') return fetchTicket(arg.ticketId);
    }
    const selectedIds = tree.selectedTicketIds();
    testLog({ event: 'resolveTicket', what, selection: selectedIds, activePanel: panels.activeTicketId() ?? null });
    if (selectedIds.length) {
      const t = store.get(selectedIds[0]);
      if (t && applies(t)) return t;
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
    // Every picker and input of planwire's sets ignoreFocusOut. A picker that a palette command
    // opens can otherwise close by itself: when the palette closes, VS Code hands focus back to
    // the editor, and a transcript webview takes it a moment after the picker opened (VS Code
    // #93950). Escape still closes it.
    const pick = await vscode.window.showQuickPick(
      candidates.map((t) => ({ label: t.title, description: statusWord(t.status), detail: `#${t.id} · ${[t.tool, t.model].filter(Boolean).join(' / ')}`, t })),
      { ignoreFocusOut: true, title: `planwire: ticket to ${what}`, placeHolder: 'Choose a ticket', matchOnDescription: true },
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
      ignoreFocusOut: true,
    });
    return pick?.r;
  }

  async function createTicket(root: string, title: string, description: string, branch = ''): Promise<void> {
    try {
      const ticket = await planwire.request<Ticket>('planwire/createTicket', { root, title, description, ...(branch ? { branch } : {}), ...settingsTicketOptions() });
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

  registerLivingPlan(context, {
    planwire,
    register,
    resolveTicket: (arg, what, applies) => resolveTicket(arg as TicketArg, what, applies),
    plan,
    upsert: (t) => store.upsert(t),
    reportError,
    openTranscript: (id) => panels.open(id),
  });

  register('planwire.newTicket', async () => {
    const root = await chooseRoot();
    if (!root) return;
    const title = await vscode.window.showInputBox({
      title: 'planwire: New Ticket (1/3)',
      prompt: 'Title of the ticket',
      placeHolder: 'What should be planned?',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'The title may not be empty'),
    });
    if (title === undefined) return;
    const description = await vscode.window.showInputBox({
      title: 'planwire: New Ticket (2/3)',
      prompt: 'Description (optional; for a long one use “planwire: New Ticket from Editor”)',
      placeHolder: 'Details, context, constraints… (may be empty)',
      ignoreFocusOut: true,
    });
    if (description === undefined) return;
    const branch = await vscode.window.showInputBox({
      title: 'planwire: New Ticket (3/3)',
      prompt: 'Git branch the work is for (optional; it decides where the ticket is planned)',
      placeHolder: 'e.g. feature/greeting (empty for none)',
      ignoreFocusOut: true,
      validateInput: branchProblem,
    });
    if (branch === undefined) return;
    await createTicket(root, title.trim(), description.trim(), branch.trim());
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

  register('planwire.stop', async (arg?: TicketArg | { runId: number }) => {
    if (arg && typeof arg === 'object' && 'runId' in arg) {
      return vscode.commands.executeCommand('planwire.stopBreakdown', arg);
    }
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
        ignoreFocusOut: true,
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

  register('planwire.openTranscript', async (arg?: TicketArg | { runId: number }) => {
    if (arg && typeof arg === 'object' && 'runId' in arg) {
      return vscode.commands.executeCommand('planwire.openBreakdown', arg);
    }
    const t = await resolveTicket(arg, 'show');
    if (t) panels.open(t.id);
  });

  register('planwire.delete', async (arg?: TicketArg) => {
    const t = await resolveTicket(arg, 'delete', (x) => !BUSY.has(x.status));
    if (!t) return;
    if (BUSY.has(t.status)) {
      busyDeleteMessage(t);
      return;
    }
    const dependents = store.list().filter((x) => (x.dependsOn ?? []).includes(t.id));
    const detail = dependents.length
      ? dependents.length === 1
        ? `“${dependents[0].title}” depends on it; it keeps its plan but loses this dependency.`
        : `${dependents.map((x) => `“${x.title}”`).join(', ')} depend on it; they keep their plans but lose this dependency.`
      : 'Its plan, runs, transcripts and questions are deleted too. This cannot be undone.';
    const ok = await vscode.window.showWarningMessage(`Delete the ticket “${t.title}”?`, { modal: true, detail }, 'Delete');
    if (ok !== 'Delete') return;
    try {
      const res = await planwire.request<{ deleted: boolean }>('planwire/deleteTicket', { ticketId: t.id });
      testLog({ event: 'deleted', ticketId: t.id, deleted: res?.deleted });
      panels.close(t.id);
      store.remove(t.id);
      vscode.window.setStatusBarMessage(`planwire: deleted “${t.title}”`, 5000);
      // Tickets that depended on it changed too (the server sends no ticketChanged for them).
      if (dependents.length || t.initiativeRunId !== null && t.initiativeRunId !== undefined) await store.refresh().catch(() => undefined);
      if (t.initiativeRunId !== null && t.initiativeRunId !== undefined) panels.refreshRun(t.initiativeRunId);
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) {
        void vscode.window.showErrorMessage('planwire: this server cannot delete tickets yet (planwire/deleteTicket).');
        return;
      }
      if (errorCode(e) === ErrorCodes.ticketBusy) {
        busyDeleteMessage(t);
        return;
      }
      if (errorCode(e) === ErrorCodes.notFound) {
        store.remove(t.id);
        panels.close(t.id);
        void vscode.window.showInformationMessage(`planwire: “${t.title}” was already deleted.`);
        return;
      }
      reportError('delete', e);
    }
  });

  function busyDeleteMessage(t: Ticket): void {
    testLog({ event: 'deleteBusy', ticketId: t.id });
    void vscode.window
      .showWarningMessage(`planwire: “${t.title}” is being planned and cannot be deleted. Stop planning it first.`, 'Stop Planning', 'Open Transcript')
      .then((c) => {
        if (c === 'Stop Planning') void vscode.commands.executeCommand('planwire.stop', { ticketId: t.id });
        if (c === 'Open Transcript') panels.open(t.id);
      });
  }

  // ---- breakdown: an initiative into dependent tickets --------------------------------
  /** The initiative's text: the active markdown document (or its selection), else an InputBox. */
  async function askInitiative(): Promise<string | undefined> {
    const editor = vscode.window.activeTextEditor;
    const doc = editor?.document;
    const fromEditor = editor && doc && doc.languageId === 'markdown'
      ? (editor.selection.isEmpty ? doc.getText() : doc.getText(editor.selection)).trim()
      : '';
    if (fromEditor) {
      const name = doc!.isUntitled ? 'the active document' : vscode.workspace.asRelativePath(doc!.uri);
      const pick = await vscode.window.showQuickPick(
        [
          { label: `$(markdown) Use ${editor!.selection.isEmpty ? '' : 'the selection of '}${name}`, description: `${fromEditor.length} characters`, use: true },
          { label: '$(edit) Type the initiative', use: false },
        ],
        { ignoreFocusOut: true, title: 'planwire: Break Down Initiative', placeHolder: 'Where is the initiative described?' },
      );
      if (!pick) return undefined;
      if (pick.use) return fromEditor;
    }
    const text = await vscode.window.showInputBox({
      title: 'planwire: Break Down Initiative',
      prompt: 'Describe the initiative; planwire breaks it into dependent tickets (for a long text, open a markdown document and run this again)',
      placeHolder: 'e.g. Let users sign in with GitHub and keep their settings',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'Describe the initiative'),
    });
    return text?.trim() || undefined;
  }

  register('planwire.breakdown', async (arg?: { description?: string; root?: string }) => {
    const root = arg?.root ?? (await chooseRoot());
    if (!root) return;
    const description = arg?.description?.trim() || (await askInitiative());
    if (!description) return;
    let runId: number;
    try {
      runId = (await planwire.request<{ runId: number }>('planwire/breakdown', { root, description, ...settingsTicketOptions() })).runId;
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) {
        void vscode.window.showErrorMessage('planwire: this server cannot break down initiatives yet (planwire/breakdown). Update planwire.');
        return;
      }
      reportError('break down the initiative', e);
      return;
    }
    store.rememberInitiative(runId, root, description);
    testLog({ event: 'breakdownStarted', runId });
    await followBreakdown(runId, root, description);
  });

  /** Shows a breakdown's progress (Cancel stops it) until it ends, then its tickets or its failure. */
  async function followBreakdown(runId: number, root: string, description: string): Promise<void> {
    const title = initiativeTitle(description, runId, 50);
    const subs: vscode.Disposable[] = [];
    const ended = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `planwire: breaking down “${title}”`, cancellable: true },
      (progress, token) => new Promise<Run>((resolve) => {
        let done = false;
        const finish = (r: Run) => {
          if (done) return;
          done = true;
          resolve(r);
        };
        progress.report({ message: 'starting…' });
        subs.push(
          planwire.onRunChanged.event((r) => {
            if (r.id === runId && !BUSY_RUN.has(r.status)) finish(r);
          }),
          planwire.onTranscript.event((p) => {
            if (p.runId !== runId) return;
            for (const ev of p.events ?? []) if (ev.kind === 'subagent' && ev.phase === 'start') progress.report({ message: passMessage(ev.label) });
          }),
          token.onCancellationRequested(() => {
            progress.report({ message: 'stopping…' });
            void stopRun(runId, title);
          }),
        );
        // In case it ended before we listened (or a notification was missed).
        const poll = async () => {
          while (!done) {
            try {
              const res = await planwire.request<GetRunResult>('planwire/getRun', { runId });
              store.upsertRun(res.run);
              if (!BUSY_RUN.has(res.run.status)) finish(res.run);
            } catch {
              // keep waiting for runChanged
            }
            await new Promise((r) => setTimeout(r, 5000));
          }
        };
        void poll();
      }),
    );
    for (const d of subs) d.dispose();
    store.upsertRun(ended);
    testLog({ event: 'breakdownEnded', runId, status: ended.status, failure: ended.failure?.message ?? null });
    if (ended.status === 'completed') {
      let tickets: Ticket[] = [];
      try {
        tickets = (await planwire.request<{ tickets: Ticket[] }>('planwire/listTickets', { root, initiativeRunId: runId })).tickets ?? [];
        for (const t of tickets) store.upsert(t);
      } catch (e) {
        output.warn(`listing the tickets of breakdown ${runId}: ${errorMessage(e)}`);
      }
      panels.refreshRun(runId);
      await vscode.commands.executeCommand('planwire.tickets.focus');
      // Revealing a ticket expands its initiative, whatever the tree made of the row while it
      // had no tickets yet; then the initiative is selected.
      const first = store.initiativeTickets(runId)[0];
      if (first) await tree.reveal(first);
      await tree.revealNode(tree.initiativeNode(runId, root), 1);
      testLog({ event: 'breakdownTickets', runId, tickets: store.initiativeTickets(runId).map((t) => ({ id: t.id, title: t.title, dependsOn: t.dependsOn ?? [] })) });
      void vscode.window
        .showInformationMessage(`planwire: “${title}” became ${tickets.length} ticket${tickets.length === 1 ? '' : 's'}.`, 'Open Breakdown')
        .then((c) => c && panels.openRun(runId));
    } else if (ended.status === 'cancelled') {
      vscode.window.setStatusBarMessage(`planwire: stopped breaking down “${title}”`, 5000);
    } else {
      const why = ended.failure?.message || ended.failure?.code || statusWord(ended.status);
      void vscode.window
        .showErrorMessage(`planwire: breaking down “${title}” failed: ${why}`, 'Open Breakdown')
        .then((c) => c && panels.openRun(runId));
    }
  }

  async function stopRun(runId: number, title: string): Promise<void> {
    try {
      const res = await planwire.request<{ stopped: boolean }>('planwire/stop', { runId });
      if (!res.stopped) vscode.window.setStatusBarMessage(`planwire: “${title}” was not running`, 5000);
      updateStatus();
    } catch (e) {
      reportError('stop the breakdown', e);
    }
  }

  /** A breakdown run from a command argument (an initiative row, `{ runId }`), else the active one. */
  async function resolveRun(arg: unknown, activeOnly: boolean): Promise<number | undefined> {
    if (arg && typeof arg === 'object' && 'runId' in arg && typeof (arg as { runId: unknown }).runId === 'number') return (arg as { runId: number }).runId;
    const ids = activeOnly ? store.activeBreakdowns().map((r) => r.id) : store.initiativeRunIds();
    if (activeOnly && ids.length === 1) return ids[0];
    if (!ids.length) {
      void vscode.window.showInformationMessage(activeOnly ? 'planwire: no breakdown is running.' : 'planwire: no initiative was broken down yet.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      ids.map((id) => ({ label: initiativeTitle(store.initiativeText(id), id), description: `breakdown run ${id} · ${store.initiativeTickets(id).length} tickets`, id })),
      { ignoreFocusOut: true, title: activeOnly ? 'planwire: breakdown to stop' : 'planwire: initiative to open' },
    );
    return pick?.id;
  }

  register('planwire.stopBreakdown', async (arg?: unknown) => {
    const runId = await resolveRun(arg, true);
    if (runId === undefined) return;
    await stopRun(runId, initiativeTitle(store.initiativeText(runId), runId));
  });

  register('planwire.openBreakdown', async (arg?: unknown) => {
    const runId = await resolveRun(arg, false);
    if (runId !== undefined) panels.openRun(runId);
  });

  // ---- linked projects ----------------------------------------------------------------
  /** The project root of a tree node or argument, else the workspace folder (asking when several). */
  async function projectRoot(arg: unknown): Promise<string | undefined> {
    if (arg && typeof arg === 'object' && 'root' in arg && typeof (arg as { root: unknown }).root === 'string') return (arg as { root: string }).root;
    return chooseRoot();
  }

  register('planwire.linkProject', async (arg?: unknown) => {
    const root = await projectRoot(arg);
    if (!root) return;
    const picked = await vscode.window.showOpenDialog({
      title: 'planwire: repository to link (researched before planning)',
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      openLabel: 'Link',
      defaultUri: vscode.Uri.file(path.dirname(root)),
    });
    const folder = picked?.[0];
    if (!folder) return;
    const linkedRoot = folder.fsPath;
    const taken = new Set((store.projectLinks(root) ?? []).map((l) => l.name));
    const name = await vscode.window.showInputBox({
      title: 'planwire: Link Project (1/2)',
      prompt: `A short name for ${linkedRoot}`,
      value: suggestLinkName(linkedRoot, taken),
      ignoreFocusOut: true,
      validateInput: (v) => (!v.trim() ? 'The name may not be empty' : taken.has(v.trim()) ? `“${v.trim()}” is already linked` : undefined),
    });
    if (name === undefined) return;
    const role = await vscode.window.showInputBox({
      title: 'planwire: Link Project (2/2)',
      prompt: `One line: what ${name.trim()} is to this project`,
      placeHolder: 'e.g. the backend whose REST API this app calls',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'Say what the repository is to this project'),
    });
    if (role === undefined) return;
    try {
      const res = await planwire.request<LinksResult>('planwire/linkProject', { root, linkedRoot, name: name.trim(), role: role.trim() });
      store.setLinks(root, res.links ?? []);
      await tree.revealNode(tree.linksNode(root), 1);
      vscode.window.setStatusBarMessage(`planwire: linked ${name.trim()}`, 5000);
    } catch (e) {
      reportError('link the project', e);
    }
  });

  register('planwire.unlinkProject', async (arg?: { root?: string; link?: { name: string } }) => {
    const root = await projectRoot(arg);
    if (!root) return;
    let name = arg?.link?.name;
    if (!name) {
      const links = store.projectLinks(root) ?? [];
      if (!links.length) {
        void vscode.window.showInformationMessage('planwire: no project is linked.');
        return;
      }
      name = (await vscode.window.showQuickPick(links.map((l) => ({ label: l.name, description: l.role, detail: l.linkedRoot })), { ignoreFocusOut: true, title: 'planwire: project to unlink' }))?.label;
      if (!name) return;
    }
    try {
      const res = await planwire.request<LinksResult>('planwire/unlinkProject', { root, name });
      store.setLinks(root, res.links ?? []);
      vscode.window.setStatusBarMessage(`planwire: unlinked ${name}`, 5000);
    } catch (e) {
      reportError('unlink the project', e);
    }
  });

  // ---- project memory -----------------------------------------------------------------
  register('planwire.addMemory', async (arg?: unknown) => {
    const root = await projectRoot(arg);
    if (!root) return;
    const text = await vscode.window.showInputBox({
      title: 'planwire: Add Memory Entry',
      prompt: 'A durable fact or convention about this project; it goes into every planning prompt',
      placeHolder: 'e.g. All database access goes through the repository layer',
      ignoreFocusOut: true,
      validateInput: (v) => (!v.trim() ? 'The entry may not be empty' : v.trim().length > 1000 ? 'At most 1000 characters' : undefined),
    });
    if (text === undefined) return;
    try {
      const entry = await planwire.request<MemoryEntry>('planwire/memory/add', { root, text: text.trim() });
      testLog({ event: 'memoryAdded', entryId: entry.id, text: entry.text });
      await store.refreshMemory(root);
      await tree.revealNode(tree.memoryEntryNode(root, entry), false);
    } catch (e) {
      reportError('add the memory entry', e);
    }
  });

  register('planwire.removeMemory', async (arg?: { root?: string; entry?: MemoryEntry }) => {
    const root = await projectRoot(arg);
    if (!root) return;
    let entry = arg?.entry;
    if (!entry) {
      const entries = store.projectMemory(root)?.entries ?? [];
      if (!entries.length) {
        void vscode.window.showInformationMessage('planwire: the project memory is empty.');
        return;
      }
      entry = (await vscode.window.showQuickPick(entries.map((e) => ({ label: e.text, e })), { ignoreFocusOut: true, title: 'planwire: memory entry to remove' }))?.e;
      if (!entry) return;
    }
    try {
      await planwire.request('planwire/memory/remove', { entryId: entry.id });
      await store.refreshMemory(root);
    } catch (e) {
      reportError('remove the memory entry', e);
    }
  });

  async function decideSuggestion(arg: { root?: string; suggestion?: MemorySuggestion } | undefined, accept: boolean): Promise<void> {
    const root = await projectRoot(arg);
    if (!root) return;
    let suggestion = arg?.suggestion;
    if (!suggestion) {
      const open = (store.projectMemory(root)?.suggestions ?? []).filter((x) => x.status === 'open');
      if (!open.length) {
        void vscode.window.showInformationMessage('planwire: no memory suggestion is waiting.');
        return;
      }
      suggestion = (await vscode.window.showQuickPick(open.map((x) => ({ label: x.text, x })), { ignoreFocusOut: true, title: `planwire: suggestion to ${accept ? 'accept' : 'reject'}` }))?.x;
      if (!suggestion) return;
    }
    try {
      await planwire.request(accept ? 'planwire/memory/accept' : 'planwire/memory/reject', { suggestionId: suggestion.id });
      await store.refreshMemory(root);
    } catch (e) {
      reportError(`${accept ? 'accept' : 'reject'} the suggestion`, e);
      await store.refreshMemory(root);
    }
  }

  register('planwire.acceptSuggestion', (arg?: { root?: string; suggestion?: MemorySuggestion }) => decideSuggestion(arg, true));
  register('planwire.rejectSuggestion', (arg?: { root?: string; suggestion?: MemorySuggestion }) => decideSuggestion(arg, false));

  register('planwire.status', async () => {
    const s = await planwire.request<StatusResult>('planwire/status', {});
    type Item = vscode.QuickPickItem & { ticketId?: number; runId?: number };
    const items: Item[] = [];
    items.push({ label: 'Server', kind: vscode.QuickPickItemKind.Separator });
    items.push({ label: `$(server-process) planwire ${planwire.serverVersion}`, description: s.store?.path, detail: `${s.store?.tickets ?? 0} tickets · ${s.store?.runs ?? 0} runs · schema ${s.store?.schemaVersion ?? '?'}` });
    items.push({ label: 'Planning now', kind: vscode.QuickPickItemKind.Separator });
    if (!s.activeRuns?.length) items.push({ label: '$(check) no planning runs' });
    for (const r of s.activeRuns ?? []) {
      const planner = [r.tool, r.model].filter(Boolean).join(' / ');
      if (r.ticketId === null || r.ticketId === undefined) {
        // A breakdown has no ticket of its own.
        const title = initiativeTitle(store.initiativeText(r.id), r.id);
        items.push({ label: `$(sync~spin) Initiative: ${title}`, description: `breakdown run ${r.id} · ${statusWord(r.status)} · ${planner}`, runId: r.id });
        continue;
      }
      const t = store.get(r.ticketId);
      items.push({ label: `$(sync~spin) ${t?.title ?? `ticket ${r.ticketId}`}`, description: `run ${r.id} · ${statusWord(r.status)} · ${planner}`, ticketId: r.ticketId });
    }
    items.push({ label: 'Planners', kind: vscode.QuickPickItemKind.Separator });
    for (const p of s.planners ?? []) items.push(plannerItem(p));
    const pick = await vscode.window.showQuickPick(items, { ignoreFocusOut: true, title: 'planwire: status', placeHolder: 'Pick a run to open its transcript' });
    if (pick?.ticketId !== undefined) panels.open(pick.ticketId);
    else if (pick?.runId !== undefined) panels.openRun(pick.runId);
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
    const pick = await vscode.window.showQuickPick(items, { ignoreFocusOut: true, title: 'planwire: planner for new tickets', placeHolder: `Current: ${current || 'server default'}` });
    if (!pick) return;
    const model = await vscode.window.showInputBox({
      title: `planwire: model for ${pick.tool}`,
      prompt: pick.tool === 'script' ? 'Script name (demo, slow, questions, ask, fail, breakdown) or a script file path; empty for demo' : 'Model name; empty for the planner’s default',
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
