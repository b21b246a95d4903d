// The tickets of the workspace roots, as the server reports them, and the Tickets tree.

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { Planwire } from './client';
import type { Ticket } from './pure/types';
import { statusWord } from './pure/render';
import { answerable, questionSummary } from './pure/questions';
import { testLog } from './testlog';

export function normalizeRoot(p: string): string {
  let r = path.resolve(p);
  try {
    r = fs.realpathSync.native(r);
  } catch {
    // keep the resolved path
  }
  return r.length > 1 ? r.replace(/[\\/]+$/, '') : r;
}

/** Absolute paths of the workspace folders on disk. */
export function workspaceRoots(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => normalizeRoot(f.uri.fsPath));
}

export class TicketStore implements vscode.Disposable {
  private readonly tickets = new Map<number, Ticket>();
  readonly onDidChange = new vscode.EventEmitter<void>();
  private refreshing: Promise<void> | undefined;

  constructor(private readonly planwire: Planwire) {}

  get(id: number): Ticket | undefined {
    return this.tickets.get(id);
  }

  /** Tickets of the workspace roots, newest first. */
  list(): Ticket[] {
    const roots = new Set(workspaceRoots());
    return [...this.tickets.values()]
      .filter((t) => roots.has(normalizeRoot(t.root)))
      .sort((a, b) => b.id - a.id);
  }

  upsert(ticket: Ticket): void {
    this.tickets.set(ticket.id, ticket);
    this.onDidChange.fire();
  }

  remove(id: number): void {
    if (this.tickets.delete(id)) this.onDidChange.fire();
  }

  refresh(): Promise<void> {
    this.refreshing ??= this.doRefresh().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async doRefresh(): Promise<void> {
    const fresh = new Map<number, Ticket>();
    for (const root of workspaceRoots()) {
      const res = await this.planwire.request<{ tickets: Ticket[] }>('planwire/listTickets', { root });
      for (const t of res.tickets) fresh.set(t.id, t);
    }
    this.tickets.clear();
    for (const [id, t] of fresh) this.tickets.set(id, t);
    this.onDidChange.fire();
  }

  dispose(): void {
    this.onDidChange.dispose();
  }
}

interface IconSpec { id: string; color?: string }

const ICONS: Record<string, IconSpec> = {
  draft: { id: 'circle-large-outline' },
  queued: { id: 'clock', color: 'charts.blue' },
  planning: { id: 'loading~spin', color: 'charts.blue' },
  needs_input: { id: 'question', color: 'charts.yellow' },
  planned: { id: 'pass-filled', color: 'testing.iconPassed' },
  failed: { id: 'error', color: 'errorForeground' },
  stopped: { id: 'debug-stop', color: 'descriptionForeground' },
};

/** The context value that decides which menu items a ticket row offers. */
export function contextValue(t: Ticket): string {
  const parts = ['ticket'];
  const busy = t.status === 'planning' || t.status === 'queued';
  if (!busy) parts.push('canPlan', 'canDelete');
  if (busy) parts.push('canStop');
  if (t.status === 'failed' || t.status === 'stopped') parts.push('canRetry');
  if (answerable(t.openQuestions).length || t.status === 'needs_input') parts.push('canAnswer');
  return parts.join(' ');
}

export class TicketTree implements vscode.TreeDataProvider<Ticket>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Ticket | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Ticket>;
  private readonly sub: vscode.Disposable;

  constructor(private readonly store: TicketStore) {
    this.view = vscode.window.createTreeView('planwire.tickets', { treeDataProvider: this, showCollapseAll: false });
    this.sub = store.onDidChange.event(() => {
      this.changed.fire();
      this.updateBadge();
    });
  }

  private updateBadge(): void {
    const waiting = this.store.list().filter((t) => answerable(t.openQuestions).length > 0 || t.status === 'needs_input').length;
    this.view.badge = waiting ? { value: waiting, tooltip: `${waiting} ticket${waiting === 1 ? '' : 's'} waiting for your answer` } : undefined;
  }

  getChildren(element?: Ticket): Ticket[] {
    return element ? [] : this.store.list();
  }

  getParent(): undefined {
    return undefined;
  }

  getTreeItem(t: Ticket): vscode.TreeItem {
    const current = this.store.get(t.id) ?? t;
    const item = new vscode.TreeItem(current.title, vscode.TreeItemCollapsibleState.None);
    item.id = `ticket-${current.id}`;
    const questions = answerable(current.openQuestions);
    let description = statusWord(current.status);
    if (questions.length) description += ` · ${questions.length} question${questions.length === 1 ? '' : 's'}`;
    if (workspaceRoots().length > 1) description += ` · ${path.basename(current.root)}`;
    item.description = description;
    const icon = ICONS[current.status] ?? { id: 'circle-outline' };
    item.iconPath = new vscode.ThemeIcon(icon.id, icon.color ? new vscode.ThemeColor(icon.color) : undefined);
    item.contextValue = contextValue(current);
    const tip = new vscode.MarkdownString();
    tip.appendMarkdown(`**${escapeMd(current.title)}**\n\n`);
    tip.appendMarkdown(`#${current.id} · ${statusWord(current.status)} · ${escapeMd([current.tool, current.model].filter(Boolean).join(' / '))}\n\n`);
    if (current.plan?.title) tip.appendMarkdown(`Plan: ${escapeMd(current.plan.title)}\n\n`);
    for (const q of questions) tip.appendMarkdown(`Question: ${escapeMd(questionSummary(q))}\n\n`);
    item.tooltip = tip;
    item.accessibilityInformation = { label: `${current.title}, ${statusWord(current.status)}` };
    item.command = { command: 'planwire.openTranscript', title: 'Open Transcript', arguments: [current] };
    return item;
  }

  async reveal(ticket: Ticket): Promise<void> {
    try {
      await this.view.reveal(this.store.get(ticket.id) ?? ticket, { select: true, focus: false });
      testLog({ event: 'revealed', ticketId: ticket.id, selection: this.view.selection.map((t) => t.id) });
    } catch (e) {
      testLog({ event: 'revealFailed', ticketId: ticket.id, message: e instanceof Error ? e.message : String(e) });
    }
  }

  dispose(): void {
    this.sub.dispose();
    this.changed.dispose();
    this.view.dispose();
  }
}

function escapeMd(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, '\\$&');
}
