// Wire types of the planwire protocol, as the extension sees them (camelCase JSON).
// The source of truth is protocol/src/lib.rs and protocol/src/methods.rs in the planwire repo.

export type TicketStatus = 'draft' | 'queued' | 'planning' | 'needs_input' | 'planned' | 'failed' | 'stopped';
export type RunStatus = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled' | 'interrupted';

export interface Plan {
  title: string;
  description: string;
  acceptanceCriteria?: string[];
  openQuestions?: string[];
  dependencies?: string[];
  memorySuggestions?: string[];
}

export interface QuestionOption { label: string; description?: string }
export interface QuestionItem {
  header: string;
  question: string;
  options?: QuestionOption[];
  multiSelect?: boolean;
  allowOther?: boolean;
}
export interface Question {
  id: number;
  ticketId: number;
  runId: number;
  status: 'open' | 'answered' | 'dismissed' | 'stale';
  source: 'live' | 'plan';
  items: QuestionItem[];
  /** What the person answered, one entry per item (absent until answered). */
  answers?: Answer[] | null;
}
export interface Answer { selected: string[]; other?: string | null }

export interface Ticket {
  id: number;
  root: string;
  title: string;
  description: string;
  status: TicketStatus;
  tool: string;
  model?: string | null;
  variant?: string | null;
  createdAt: string;
  updatedAt: string;
  plan?: Plan | null;
  openQuestions?: Question[];
  /** Tickets this one depends on (from a breakdown); [] when none. */
  dependsOn?: number[];
  /** The breakdown run that created this ticket, if one did. */
  initiativeRunId?: number | null;
  /** The git branch the work is for (null when none). */
  branch?: string | null;
  /** The number of `plan`'s version (null while never planned). */
  planVersion?: number | null;
  /** When the plan was last handed off, and to which CLI (`planwire/handoff`). */
  handedOffAt?: string | null;
  handedOffTool?: string | null;
}

export interface Failure { code: string; message: string }

export interface Run {
  id: number;
  /** Null for a breakdown, which has no ticket of its own. */
  ticketId: number | null;
  /** `plan` (one ticket) or `breakdown` (an initiative into tickets); absent from older servers. */
  kind?: 'plan' | 'breakdown' | string;
  root?: string;
  status: RunStatus;
  tool: string;
  model?: string | null;
  variant?: string | null;
  createdAt: string;
  startedAt?: string | null;
  endedAt?: string | null;
  exitCode?: number | null;
  signal?: number | null;
  failure?: Failure | null;
  providerSessionId?: string | null;
  lastSeq: number;
  /** The directory the planner ran in: the root, or the branch's worktree. */
  cwd?: string | null;
  /** Whether the OS sandbox held the run's planner processes (null before the first starts). */
  sandbox?: SandboxState | null;
  /** Files the run changed in a work tree it planned in (it must never). */
  readonlyViolation?: { paths: string[] } | null;
  /** Milliseconds from the run's start; null while it is active. */
  timing?: RunTiming | null;
}

export type SandboxState = 'enforced' | 'unavailable' | 'off';
export interface RunTiming { firstOutputMs: number | null; firstFinalMs: number | null; totalMs: number }

export interface Message {
  id: number;
  kind: string;
  text: string;
  runId?: number | null;
  createdAt: string;
}

interface EventBase { seq: number; ts: string; agentRunId?: number }
export type TranscriptEvent = EventBase & (
  | { kind: 'text'; text: string; final: boolean }
  | { kind: 'reasoning'; text: string }
  | { kind: 'toolCall'; callId: string; name: string; input: string }
  | { kind: 'toolResult'; callId: string; status: 'running' | 'completed' | 'error'; output: string }
  | { kind: 'subagent'; phase: 'start' | 'end'; label: string; status?: string }
  | { kind: 'usage'; inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number }
  | { kind: 'session'; providerSessionId: string }
  | { kind: 'error'; errorKind: string; message: string }
  | { kind: 'question'; questionId: number }
  | { kind: 'raw'; line: string }
  | { kind: 'warning'; message: string }
);

export interface PlannerInfo {
  tool: string;
  found: boolean;
  path?: string | null;
  version?: string | null;
  supported: boolean;
  hint?: string;
}

export interface GetTicketResult { ticket: Ticket; messages: Message[]; questions: Question[]; runs: Run[] }
/** A block streaming live now, as far as `planwire/delta` has sent it. */
export interface OpenBlock { agentRunId?: number | null; kind: 'text' | 'reasoning'; text: string }
export interface GetTranscriptResult { events: TranscriptEvent[]; lastSeq: number; done: boolean; openBlocks?: OpenBlock[] }
export interface StatusResult {
  activeRuns: Run[];
  planners: PlannerInfo[];
  store: { path: string; schemaVersion: number; tickets: number; runs: number };
}
/** `ticketId` is null for a breakdown's transcript. */
export interface TranscriptParams { ticketId: number | null; runId: number; events: TranscriptEvent[] }
/**
 * A piece of text or reasoning still being written (`planwire/delta`): it extends the open block
 * of that kind of that agent; the stored `text` / `reasoning` event that closes the block
 * replaces it. `offset`: the characters (code points) of the block sent before this piece.
 */
export interface DeltaParams { ticketId: number | null; runId: number; agentRunId?: number | null; kind: 'text' | 'reasoning'; text: string; offset?: number }

/** A plan version (`planwire/listPlans`, `planwire/getPlan`). */
export interface PlanVersion { version: number; runId: number | null; createdAt: string; plan: Plan; markdown: string }
export interface ListPlansResult { plans: PlanVersion[] }
export interface ExportPlanResult { path: string; bytes: number; version: number }
export interface HandoffResult { argv: string[]; cwd: string; planPath: string; version: number }

/** One agent of a run: a pass ("Outline", "Expansion"), linked research, or a subagent. */
export interface AgentRun {
  id: number;
  runId: number;
  parentId?: number | null;
  label: string;
  status: string;
  startedAt: string;
  endedAt?: string | null;
}
export interface GetRunResult { run: Run; agentRuns: AgentRun[] }

export interface ProjectLink { name: string; linkedRoot: string; role: string }
export interface LinksResult { links: ProjectLink[] }

export interface MemoryEntry { id: number; text: string; source: 'user' | 'suggestion' | string; createdAt: string }
export interface MemorySuggestion {
  id: number;
  text: string;
  ticketId: number;
  status: 'open' | 'accepted' | 'rejected';
  createdAt: string;
}
export interface MemoryListResult { entries: MemoryEntry[]; suggestions: MemorySuggestion[] }

export const ACTIVE_RUN_STATUSES: readonly RunStatus[] = ['queued', 'running'];
export const ACTIVE_TICKET_STATUSES: readonly TicketStatus[] = ['queued', 'planning'];
