// Tickets of a breakdown (an initiative broken into dependent tickets): their order, the
// "after: …" line each shows, and how the tree groups them. Pure (no vscode import).

import type { Ticket } from './types';

/**
 * The tickets in dependency order: every ticket after the tickets it depends on (among those
 * given), otherwise oldest first. Unknown dependencies are ignored; a cycle (which the server
 * rejects, but a client must not hang on) keeps the remaining tickets in id order.
 */
export function orderByDependencies(tickets: readonly Ticket[]): Ticket[] {
  const byId = new Map(tickets.map((t) => [t.id, t]));
  const sorted = [...tickets].sort((a, b) => a.id - b.id);
  const done = new Set<number>();
  const out: Ticket[] = [];
  while (out.length < sorted.length) {
    const ready = sorted.find((t) => !done.has(t.id) && (t.dependsOn ?? []).every((d) => done.has(d) || !byId.has(d) || d === t.id));
    // A cycle: take the oldest remaining ticket and carry on.
    const next = ready ?? sorted.find((t) => !done.has(t.id))!;
    done.add(next.id);
    out.push(next);
  }
  return out;
}

/** "after: A, B" for a ticket with dependencies; '' when it has none. */
export function afterLabel(t: Ticket, byId: (id: number) => Ticket | undefined): string {
  const deps = t.dependsOn ?? [];
  if (!deps.length) return '';
  return `after: ${deps.map((d) => byId(d)?.title ?? `#${d}`).join(', ')}`;
}

export type TopEntry =
  | { kind: 'ticket'; ticket: Ticket }
  | { kind: 'initiative'; runId: number; root: string; tickets: Ticket[] };

/**
 * Top level of the tickets tree, newest first: tickets of their own, and one initiative per
 * breakdown run holding its tickets in dependency order. `activeBreakdowns` are breakdown runs
 * still running (shown before they have tickets).
 */
export function groupTickets(tickets: readonly Ticket[], activeBreakdowns: readonly { id: number; root: string }[] = []): TopEntry[] {
  const groups = new Map<number, Ticket[]>();
  const entries: { key: number; entry: TopEntry }[] = [];
  for (const t of tickets) {
    const run = t.initiativeRunId;
    if (run === undefined || run === null) {
      entries.push({ key: t.id, entry: { kind: 'ticket', ticket: t } });
      continue;
    }
    let g = groups.get(run);
    if (!g) groups.set(run, (g = []));
    g.push(t);
  }
  for (const [runId, g] of groups) {
    // An initiative sorts where its newest ticket would.
    entries.push({ key: Math.max(...g.map((t) => t.id)), entry: { kind: 'initiative', runId, root: g[0].root, tickets: orderByDependencies(g) } });
  }
  for (const r of activeBreakdowns) {
    if (groups.has(r.id)) continue;
    entries.push({ key: Number.MAX_SAFE_INTEGER - r.id, entry: { kind: 'initiative', runId: r.id, root: r.root, tickets: [] } });
  }
  return entries.sort((a, b) => b.key - a.key).map((e) => e.entry);
}

/** One line for an initiative: its description's first line, shortened. */
export function initiativeTitle(description: string | undefined, runId: number, max = 60): string {
  const line = (description ?? '')
    .split('\n')
    .map((l) => l.replace(/^#+\s*/, '').trim())
    .find(Boolean);
  if (!line) return `Initiative #${runId}`;
  return line.length > max ? `${line.slice(0, max - 1).trimEnd()}…` : line;
}

/** What a breakdown is doing, from the label of the pass that started last. */
export function passMessage(label: string): string {
  const l = label.trim();
  if (/^outline$/i.test(l)) return 'outlining the tickets…';
  if (/^expansion$/i.test(l)) return 'expanding each ticket…';
  if (/^outline repair$/i.test(l)) return 'repairing the dependency graph…';
  const research = /^linked research:\s*(.+)$/i.exec(l);
  if (research) return `researching ${research[1]}…`;
  return l ? `${l}…` : 'working…';
}

/** A default name for a linked repository: its folder name, made unique among `taken`. */
export function suggestLinkName(linkedRoot: string, taken: ReadonlySet<string>): string {
  const base = (linkedRoot.replace(/[\\/]+$/, '').split(/[\\/]/).pop() || 'linked')
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '') || 'linked';
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}
