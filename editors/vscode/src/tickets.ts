// The tickets of the workspace roots, as the server reports them (with their initiatives, linked
// projects and memory), and the Tickets tree.

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { METHOD_NOT_FOUND, errorCode, type Planwire } from './client';
import type { LinksResult, MemoryEntry, MemoryListResult, MemorySuggestion, ProjectLink, Run, StatusResult, Ticket } from './pure/types';
import { afterLabel, groupTickets, initiativeTitle, orderByDependencies } from './pure/initiative';
import { statusWord } from './pure/render';
import { answerable, needsInput, questionSummary } from './pure/questions';
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

/** What this window remembers of the initiatives it started: the text (the server keeps none). */
const INITIATIVES_KEY = 'planwire.initiatives';
const INITIATIVES_KEPT = 200;
type InitiativeMemo = Record<string, { root: string; text: string }>;

export class TicketStore implements vscode.Disposable {
  private readonly tickets = new Map<number, Ticket>();
  /** Breakdown runs seen (from status, runChanged and breakdown requests). */
  private readonly breakdowns = new Map<number, Run>();
  private readonly links = new Map<string, ProjectLink[]>();
  private readonly memory = new Map<string, MemoryListResult>();
  /** False once the server answered "method not found" (an older server). */
  linksSupported = true;
  memorySupported = true;
  readonly onDidChange = new vscode.EventEmitter<void>();
  private refreshing: Promise<void> | undefined;

  constructor(private readonly planwire: Planwire, private readonly memento?: vscode.Memento) {}

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

  /** The tickets a breakdown created, in dependency order. */
  initiativeTickets(runId: number): Ticket[] {
    return orderByDependencies([...this.tickets.values()].filter((t) => t.initiativeRunId === runId));
  }

  upsert(ticket: Ticket): void {
    this.tickets.set(ticket.id, ticket);
    this.onDidChange.fire();
  }

  remove(id: number): void {
    if (this.tickets.delete(id)) this.onDidChange.fire();
  }

  /** Records a breakdown run (any other run is ignored). */
  upsertRun(run: Run): void {
    if (run.kind !== 'breakdown') return;
    this.breakdowns.set(run.id, run);
    this.onDidChange.fire();
  }

  breakdown(runId: number): Run | undefined {
    return this.breakdowns.get(runId);
  }

  /** Breakdown runs known to this window: of the tickets shown, and those seen running; newest first. */
  initiativeRunIds(): number[] {
    const ids = new Set<number>(this.activeBreakdowns().map((r) => r.id));
    for (const t of this.list()) if (t.initiativeRunId !== null && t.initiativeRunId !== undefined) ids.add(t.initiativeRunId);
    return [...ids].sort((a, b) => b - a);
  }

  /** Breakdown runs of the workspace roots still queued or running. */
  activeBreakdowns(): Run[] {
    const roots = new Set(workspaceRoots());
    return [...this.breakdowns.values()].filter((r) => (r.status === 'queued' || r.status === 'running') && (!r.root || roots.has(normalizeRoot(r.root))));
  }

  /** Remembers an initiative's text for its tree row and page (the server keeps none). */
  rememberInitiative(runId: number, root: string, text: string): void {
    if (!this.memento) return;
    const all = { ...(this.memento.get<InitiativeMemo>(INITIATIVES_KEY) ?? {}) };
    all[String(runId)] = { root, text };
    const keys = Object.keys(all).map(Number).sort((a, b) => b - a);
    for (const k of keys.slice(INITIATIVES_KEPT)) delete all[String(k)];
    void this.memento.update(INITIATIVES_KEY, all);
  }

  initiativeText(runId: number): string | undefined {
    const memo = this.memento?.get<InitiativeMemo>(INITIATIVES_KEY)?.[String(runId)];
    if (!memo) return undefined;
    // A run id of another database (planwire.dbPath changed) names another initiative.
    const root = this.breakdowns.get(runId)?.root ?? this.initiativeTickets(runId)[0]?.root;
    if (root && normalizeRoot(root) !== normalizeRoot(memo.root)) return undefined;
    return memo.text;
  }

  projectLinks(root: string): ProjectLink[] | undefined {
    return this.links.get(root);
  }

  projectMemory(root: string): MemoryListResult | undefined {
    return this.memory.get(root);
  }

  refresh(): Promise<void> {
    this.refreshing ??= this.doRefresh().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async doRefresh(): Promise<void> {
    const fresh = new Map<number, Ticket>();
    const roots = workspaceRoots();
    for (const root of roots) {
      const res = await this.planwire.request<{ tickets: Ticket[] }>('planwire/listTickets', { root });
      for (const t of res.tickets) fresh.set(t.id, t);
    }
    this.tickets.clear();
    for (const [id, t] of fresh) this.tickets.set(id, t);
    try {
      const s = await this.planwire.request<StatusResult>('planwire/status', {});
      for (const r of s.activeRuns ?? []) if (r.kind === 'breakdown') this.breakdowns.set(r.id, r);
    } catch {
      // the tree shows what it has
    }
    await Promise.all(roots.map((r) => this.refreshProject(r, false)));
    this.onDidChange.fire();
  }

  /** Reloads a project's linked repositories and memory. */
  async refreshProject(root: string, fire = true): Promise<void> {
    await Promise.all([this.refreshLinks(root, false), this.refreshMemory(root, false)]);
    if (fire) this.onDidChange.fire();
  }

  async refreshLinks(root: string, fire = true): Promise<void> {
    if (!this.linksSupported) return;
    try {
      const res = await this.planwire.request<LinksResult>('planwire/listLinks', { root });
      this.links.set(root, res.links ?? []);
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) this.linksSupported = false;
    }
    if (fire) this.onDidChange.fire();
  }

  async refreshMemory(root: string, fire = true): Promise<void> {
    if (!this.memorySupported) return;
    try {
      const res = await this.planwire.request<MemoryListResult>('planwire/memory/list', { root });
      this.memory.set(root, { entries: res.entries ?? [], suggestions: res.suggestions ?? [] });
    } catch (e) {
      if (errorCode(e) === METHOD_NOT_FOUND) this.memorySupported = false;
    }
    if (fire) this.onDidChange.fire();
  }

  setLinks(root: string, links: ProjectLink[]): void {
    this.links.set(root, links);
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
  if (needsInput(t)) parts.push('canAnswer');
  if (!busy) parts.push('canEdit');
  if (t.plan) parts.push('hasPlan');
  if (t.plan && !busy) parts.push('canRevise');
  return parts.join(' ');
}

/** A row of the Tickets tree. Objects are kept per key so that reveal() finds them again. */
export type Node =
  | { kind: 'ticket'; key: string; id: number }
  | { kind: 'initiative'; key: string; runId: number; root: string }
  | { kind: 'links'; key: string; root: string }
  | { kind: 'link'; key: string; root: string; link: ProjectLink }
  | { kind: 'memory'; key: string; root: string }
  | { kind: 'memoryEntry'; key: string; root: string; entry: MemoryEntry }
  | { kind: 'suggestion'; key: string; root: string; suggestion: MemorySuggestion }
  | { kind: 'hint'; key: string; root: string; text: string; command: string };

type NodeOf<K extends Node['kind']> = Extract<Node, { kind: K }>;

export class TicketTree implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Node>;
  private readonly sub: vscode.Disposable;
  private readonly nodes = new Map<string, Node>();

  constructor(private readonly store: TicketStore) {
    this.view = vscode.window.createTreeView('planwire.tickets', { treeDataProvider: this, showCollapseAll: true });
    this.sub = store.onDidChange.event(() => {
      this.changed.fire();
      this.updateBadge();
    });
  }

  /** The node with this key, reused (and updated) so the tree view recognises it. */
  private node<K extends Node['kind']>(value: NodeOf<K>): NodeOf<K> {
    const existing = this.nodes.get(value.key) as NodeOf<K> | undefined;
    if (existing && existing.kind === value.kind) return Object.assign(existing, value);
    this.nodes.set(value.key, value);
    return value;
  }

  ticketNode(id: number): NodeOf<'ticket'> {
    return this.node({ kind: 'ticket', key: `ticket-${id}`, id });
  }

  initiativeNode(runId: number, root: string): NodeOf<'initiative'> {
    return this.node({ kind: 'initiative', key: `initiative-${runId}`, runId, root });
  }

  memoryNode(root: string): NodeOf<'memory'> {
    return this.node({ kind: 'memory', key: `memory-${root}`, root });
  }

  linksNode(root: string): NodeOf<'links'> {
    return this.node({ kind: 'links', key: `links-${root}`, root });
  }

  memoryEntryNode(root: string, entry: MemoryEntry): NodeOf<'memoryEntry'> {
    return this.node({ kind: 'memoryEntry', key: `memory-${root}-entry-${entry.id}`, root, entry });
  }

  private updateBadge(): void {
    const waiting = this.store.list().filter(needsInput).length;
    this.view.badge = waiting ? { value: waiting, tooltip: `${waiting} ticket${waiting === 1 ? '' : 's'} waiting for your answer` } : undefined;
  }

  getChildren(element?: Node): Node[] {
    if (!element) {
      const out: Node[] = [];
      const roots = workspaceRoots();
      for (const root of roots) {
        if (this.store.linksSupported) out.push(this.linksNode(root));
        if (this.store.memorySupported) out.push(this.memoryNode(root));
      }
      for (const e of groupTickets(this.store.list(), this.store.activeBreakdowns().map((r) => ({ id: r.id, root: r.root ?? '' })))) {
        out.push(e.kind === 'ticket' ? this.ticketNode(e.ticket.id) : this.initiativeNode(e.runId, e.root));
      }
      return out;
    }
    switch (element.kind) {
      case 'initiative':
        return this.store.initiativeTickets(element.runId).map((t) => this.ticketNode(t.id));
      case 'links': {
        const links = this.store.projectLinks(element.root) ?? [];
        if (!links.length) return [this.node({ kind: 'hint', key: `links-${element.root}-hint`, root: element.root, text: 'Link a repository…', command: 'planwire.linkProject' })];
        return links.map((link) => this.node({ kind: 'link', key: `links-${element.root}-${link.name}`, root: element.root, link }));
      }
      case 'memory': {
        const m = this.store.projectMemory(element.root);
        const suggestions = (m?.suggestions ?? []).filter((x) => x.status === 'open');
        const out: Node[] = [
          ...suggestions.map((suggestion) => this.node({ kind: 'suggestion', key: `memory-${element.root}-suggestion-${suggestion.id}`, root: element.root, suggestion })),
          ...(m?.entries ?? []).map((entry) => this.memoryEntryNode(element.root, entry)),
        ];
        if (!out.length) out.push(this.node({ kind: 'hint', key: `memory-${element.root}-hint`, root: element.root, text: 'Add a memory entry…', command: 'planwire.addMemory' }));
        return out;
      }
      default:
        return [];
    }
  }

  getParent(element: Node): Node | undefined {
    switch (element.kind) {
      case 'ticket': {
        const t = this.store.get(element.id);
        const run = t?.initiativeRunId;
        return t && run !== null && run !== undefined ? this.initiativeNode(run, t.root) : undefined;
      }
      case 'link':
        return this.linksNode(element.root);
      case 'memoryEntry':
      case 'suggestion':
        return this.memoryNode(element.root);
      case 'hint':
        return element.command === 'planwire.linkProject' ? this.linksNode(element.root) : this.memoryNode(element.root);
      default:
        return undefined;
    }
  }

  private rootSuffix(root: string): string {
    return workspaceRoots().length > 1 ? ` · ${path.basename(root)}` : '';
  }

  getTreeItem(n: Node): vscode.TreeItem {
    switch (n.kind) {
      case 'ticket':
        return this.ticketItem(n);
      case 'initiative':
        return this.initiativeItem(n);
      case 'links': {
        const links = this.store.projectLinks(n.root) ?? [];
        const item = new vscode.TreeItem('Linked projects', vscode.TreeItemCollapsibleState.Collapsed);
        item.id = n.key;
        item.description = `${links.length || 'none'}${this.rootSuffix(n.root)}`;
        item.iconPath = new vscode.ThemeIcon('link');
        item.contextValue = 'linksGroup';
        item.tooltip = 'Repositories researched before planning (e.g. a backend whose contract plans should embed).';
        return item;
      }
      case 'link': {
        const item = new vscode.TreeItem(n.link.name, vscode.TreeItemCollapsibleState.None);
        item.id = n.key;
        item.description = n.link.role;
        item.iconPath = new vscode.ThemeIcon('repo');
        item.contextValue = 'link';
        item.tooltip = new vscode.MarkdownString(`**${escapeMd(n.link.name)}** — ${escapeMd(n.link.role)}\n\n\`${n.link.linkedRoot.replace(/`/g, '')}\``);
        item.resourceUri = undefined;
        return item;
      }
      case 'memory': {
        const m = this.store.projectMemory(n.root);
        const entries = m?.entries.length ?? 0;
        const open = (m?.suggestions ?? []).filter((x) => x.status === 'open').length;
        const item = new vscode.TreeItem('Project memory', open ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        item.id = n.key;
        item.description = `${entries} entr${entries === 1 ? 'y' : 'ies'}${open ? ` · ${open} suggestion${open === 1 ? '' : 's'}` : ''}${this.rootSuffix(n.root)}`;
        item.iconPath = new vscode.ThemeIcon('book');
        item.contextValue = 'memoryGroup';
        item.tooltip = 'Durable facts about this project, put into every planning prompt. Plans suggest new ones; accept or reject them here.';
        return item;
      }
      case 'memoryEntry': {
        const item = new vscode.TreeItem(n.entry.text, vscode.TreeItemCollapsibleState.None);
        item.id = n.key;
        item.description = n.entry.source === 'suggestion' ? 'from a plan' : '';
        item.iconPath = new vscode.ThemeIcon('note');
        item.contextValue = 'memoryEntry';
        item.tooltip = n.entry.text;
        return item;
      }
      case 'suggestion': {
        const item = new vscode.TreeItem(n.suggestion.text, vscode.TreeItemCollapsibleState.None);
        item.id = n.key;
        const from = this.store.get(n.suggestion.ticketId)?.title;
        item.description = `suggested${from ? ` by “${from}”` : ''}`;
        item.iconPath = new vscode.ThemeIcon('lightbulb', new vscode.ThemeColor('charts.yellow'));
        item.contextValue = 'memorySuggestion';
        item.tooltip = `${n.suggestion.text}\n\nA plan suggested this for the project memory. Accept it to add it, or reject it.`;
        return item;
      }
      case 'hint': {
        const item = new vscode.TreeItem(n.text, vscode.TreeItemCollapsibleState.None);
        item.id = n.key;
        item.iconPath = new vscode.ThemeIcon('add');
        item.contextValue = 'hint';
        item.command = { command: n.command, title: n.text, arguments: [{ root: n.root }] };
        return item;
      }
    }
  }

  private ticketItem(n: NodeOf<'ticket'>): vscode.TreeItem {
    const current = this.store.get(n.id);
    const item = new vscode.TreeItem(current?.title ?? `Ticket ${n.id}`, vscode.TreeItemCollapsibleState.None);
    item.id = n.key;
    if (!current) return item;
    const questions = answerable(current.openQuestions);
    let description = statusWord(current.status);
    if (questions.length) description += ` · ${questions.length} question${questions.length === 1 ? '' : 's'}`;
    const after = afterLabel(current, (id) => this.store.get(id));
    if (after) description += ` · ${after}`;
    if (current.branch) description += ` · ⎇ ${current.branch}`;
    if (workspaceRoots().length > 1 && (current.initiativeRunId === null || current.initiativeRunId === undefined)) description += ` · ${path.basename(current.root)}`;
    item.description = description;
    const icon = ICONS[current.status] ?? { id: 'circle-outline' };
    item.iconPath = new vscode.ThemeIcon(icon.id, icon.color ? new vscode.ThemeColor(icon.color) : undefined);
    item.contextValue = contextValue(current);
    const tip = new vscode.MarkdownString();
    tip.appendMarkdown(`**${escapeMd(current.title)}**\n\n`);
    tip.appendMarkdown(`#${current.id} · ${statusWord(current.status)} · ${escapeMd([current.tool, current.model].filter(Boolean).join(' / '))}\n\n`);
    if (after) tip.appendMarkdown(`${escapeMd(after.replace(/^after/, 'After'))}\n\n`);
    if (current.branch) tip.appendMarkdown(`Branch: \`${current.branch.replace(/`/g, '')}\`\n\n`);
    if (current.plan?.title) tip.appendMarkdown(`Plan${current.planVersion ? ` v${current.planVersion}` : ''}: ${escapeMd(current.plan.title)}\n\n`);
    for (const q of questions) tip.appendMarkdown(`Question: ${escapeMd(questionSummary(q))}\n\n`);
    item.tooltip = tip;
    item.accessibilityInformation = { label: `${current.title}, ${statusWord(current.status)}${after ? `, ${after}` : ''}` };
    item.command = { command: 'planwire.openTranscript', title: 'Open Transcript', arguments: [current] };
    return item;
  }

  private initiativeItem(n: NodeOf<'initiative'>): vscode.TreeItem {
    const tickets = this.store.initiativeTickets(n.runId);
    const run = this.store.breakdown(n.runId);
    const active = run && (run.status === 'running' || run.status === 'queued');
    const title = initiativeTitle(this.store.initiativeText(n.runId), n.runId);
    const item = new vscode.TreeItem(`Initiative: ${title}`, tickets.length ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.id = n.key;
    item.description = active ? 'breaking down…' : `${tickets.length} ticket${tickets.length === 1 ? '' : 's'}${run && run.status !== 'completed' ? ` · ${statusWord(run.status)}` : ''}${this.rootSuffix(n.root)}`;
    item.iconPath = new vscode.ThemeIcon(active ? 'loading~spin' : 'list-tree', active ? new vscode.ThemeColor('charts.blue') : undefined);
    item.contextValue = active ? 'initiative canStopBreakdown' : 'initiative';
    const tip = new vscode.MarkdownString();
    tip.appendMarkdown(`**Initiative** · breakdown run #${n.runId}\n\n`);
    const text = this.store.initiativeText(n.runId);
    if (text) tip.appendMarkdown(`${escapeMd(text.slice(0, 400))}\n\n`);
    if (tickets.length) tip.appendMarkdown(`Tickets in dependency order:\n\n${tickets.map((t, i) => `${i + 1}. ${escapeMd(t.title)}`).join('\n')}`);
    item.tooltip = tip;
    item.command = { command: 'planwire.openBreakdown', title: 'Open Breakdown', arguments: [{ runId: n.runId }] };
    return item;
  }

  /** Selects a ticket's row (expanding its initiative). */
  async reveal(ticket: Ticket): Promise<void> {
    try {
      await this.view.reveal(this.ticketNode(ticket.id), { select: true, focus: false });
      testLog({ event: 'revealed', ticketId: ticket.id, selection: this.selectedTicketIds() });
    } catch (e) {
      testLog({ event: 'revealFailed', ticketId: ticket.id, message: e instanceof Error ? e.message : String(e) });
    }
  }

  /** Reveals and expands a node (a group after adding to it, an initiative when it is done). */
  async revealNode(n: Node, expand: boolean | number = true): Promise<void> {
    try {
      await this.view.reveal(n, { select: true, focus: false, expand });
    } catch (e) {
      testLog({ event: 'revealFailed', key: n.key, message: e instanceof Error ? e.message : String(e) });
    }
  }

  selectedTicketIds(): number[] {
    return this.view.selection.flatMap((n) => (n.kind === 'ticket' ? [n.id] : []));
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
