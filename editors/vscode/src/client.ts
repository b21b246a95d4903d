// Starts `planwire --stdio` with vscode-languageclient and turns its notifications into events.
// The server holds all state; this module holds the connection only.

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  LanguageClient,
  type LanguageClientOptions,
  ResponseError,
  type ServerOptions,
  State,
  Trace,
  TransportKind,
  ErrorAction,
  CloseAction,
} from 'vscode-languageclient/node';
import type { DeltaParams, PlannerInfo, Question, Run, Ticket, TranscriptParams } from './pure/types';
import { bundledServer, chooseServer } from './pure/serverPath';
import { ThrottledProgressFeature } from './progress';
import { testLog } from './testlog';

export const METHOD_NOT_FOUND = -32601;
export const ErrorCodes = {
  ticketBusy: -32010,
  notFound: -32011,
  plannerUnavailable: -32012,
  projectUnavailable: -32013,
  conflict: -32014,
} as const;

export const INSTALL_HINT = 'cargo install --path server';
const INSTALL_ADVICE = 'Install the planwire extension built for your platform (it carries the server), or run `cargo install --path server` in a planwire checkout, or set planwire.serverPath.';

/** Finds an executable: an absolute or relative path as is, a bare name on PATH. */
export function resolveExecutable(command: string, envPath = process.env.PATH ?? ''): string | undefined {
  const isExec = (p: string) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes('/') || command.includes('\\')) return isExec(command) ? command : undefined;
  const exts = process.platform === 'win32' ? ['', '.exe', '.cmd'] : [''];
  for (const dir of envPath.split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const p = path.join(dir, command + ext);
      if (isExec(p)) return p;
    }
  }
  return undefined;
}

function expandHome(p: string): string {
  return p.startsWith('~/') ? path.join(process.env.HOME ?? '', p.slice(2)) : p;
}

/** The bundled binary, made executable if unpacking the .vsix lost its mode bits. */
function bundledExecutable(file: string): string | undefined {
  if (resolveExecutable(file)) return file;
  try {
    if (!fs.statSync(file).isFile()) return undefined;
    fs.chmodSync(file, 0o755);
  } catch {
    return undefined;
  }
  return resolveExecutable(file);
}

/** planwire.logLevel → the server's PLANWIRE_LOG filter. */
const LOG_FILTERS: Record<string, string> = { off: 'off', error: 'error', warn: 'warn', info: 'info', debug: 'debug', trace: 'trace' };

export class Planwire implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private starting: Promise<boolean> | undefined;

  readonly onTranscript = new vscode.EventEmitter<TranscriptParams>();
  /** `planwire/delta`: not sent by the server yet; handled so that a server sending it just works. */
  readonly onDelta = new vscode.EventEmitter<DeltaParams>();
  readonly onTicketChanged = new vscode.EventEmitter<Ticket>();
  readonly onRunChanged = new vscode.EventEmitter<Run>();
  readonly onQuestion = new vscode.EventEmitter<{ ticketId: number; runId: number; question: Question }>();
  /** Fires each time the server is (re)connected and initialized. */
  readonly onReady = new vscode.EventEmitter<void>();
  /** Planners reported in `initialize` (capabilities.experimental.planwire.planners). */
  planners: PlannerInfo[] = [];
  serverVersion = '';

  constructor(readonly output: vscode.LogOutputChannel, private readonly extensionPath: string) {}

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** Starts the server unless it runs. Resolves false (after telling the user) when it cannot start. */
  start(): Promise<boolean> {
    if (this.running) return Promise.resolve(true);
    this.starting ??= this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(): Promise<boolean> {
    const cfg = vscode.workspace.getConfiguration('planwire');
    const bundled = bundledServer(this.extensionPath, process.platform);
    const choice = chooseServer({
      setting: cfg.get<string>('serverPath') || '',
      bundled,
      executable: (p) => (p === bundled ? bundledExecutable(p) : resolveExecutable(p)),
      onPath: (name) => resolveExecutable(name),
      home: process.env.HOME,
    });
    if (!choice.found) {
      const what = choice.source === 'setting' ? `planwire.serverPath "${choice.tried[0]}" was not found` : 'no planwire server was found (none bundled, none on PATH)';
      this.output.error(`planwire: ${what}`);
      testLog({ event: 'serverNotFound', source: choice.source, tried: choice.tried });
      void vscode.window
        .showErrorMessage(`planwire: ${what}. ${INSTALL_ADVICE}`, 'Open Settings', 'Copy Install Command')
        .then((c) => {
          if (c === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'planwire.serverPath');
          if (c === 'Copy Install Command') void vscode.env.clipboard.writeText(INSTALL_HINT);
        });
      return false;
    }
    const command = choice.command;
    this.output.info(`server: ${command} (${choice.source === 'setting' ? 'planwire.serverPath' : choice.source === 'bundled' ? 'bundled with the extension' : 'found on PATH'})`);
    testLog({ event: 'serverResolved', source: choice.source, command, pathHasPlanwire: resolveExecutable('planwire') ?? null });
    const logLevel = cfg.get<string>('logLevel') || 'info';
    const dbPath = (cfg.get<string>('dbPath') || '').trim();
    const defaultTool = (cfg.get<string>('defaultTool') || '').trim();
    const env = { ...process.env, PLANWIRE_LOG: LOG_FILTERS[logLevel] || 'info' };
    const serverOptions: ServerOptions = {
      command,
      args: [],
      transport: TransportKind.stdio, // appends --stdio
      options: { env },
    };
    const initializationOptions: Record<string, unknown> = {};
    if (dbPath) initializationOptions.dbPath = expandHome(dbPath);
    if (defaultTool) initializationOptions.defaultTool = defaultTool;
    const sandbox = (cfg.get<string>('sandbox') || '').trim();
    if (sandbox) initializationOptions.sandbox = sandbox;

    let crashes = 0;
    const clientOptions: LanguageClientOptions = {
      documentSelector: [],
      outputChannel: this.output,
      traceOutputChannel: this.output,
      initializationOptions,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          crashes++;
          if (crashes > 4) {
            void vscode.window.showErrorMessage('planwire: the server stopped several times. See the "planwire" output channel.', 'Show Output', 'Restart').then((c) => {
              if (c === 'Show Output') this.output.show();
              if (c === 'Restart') void this.restart();
            });
            return { action: CloseAction.DoNotRestart };
          }
          this.output.warn('planwire server connection closed; restarting');
          return { action: CloseAction.Restart };
        },
      },
    };
    const client = new LanguageClient('planwire', 'planwire', serverOptions, clientOptions);
    // Each run's progress in the status bar, at a few updates a second (src/progress.ts).
    client.registerFeature(new ThrottledProgressFeature(client));
    this.client = client;
    this.disposables.push(
      client.onNotification('planwire/transcript', (p: TranscriptParams) => this.onTranscript.fire(p)),
      client.onNotification('planwire/delta', (p: DeltaParams) => this.onDelta.fire(p)),
      client.onNotification('planwire/ticketChanged', (p: { ticket: Ticket }) => {
        testLog({ event: 'ticketChanged', id: p.ticket.id, status: p.ticket.status });
        this.onTicketChanged.fire(p.ticket);
      }),
      client.onNotification('planwire/runChanged', (p: { run: Run }) => {
        testLog({ event: 'runChanged', id: p.run.id, status: p.run.status, sandbox: p.run.sandbox ?? null });
        this.onRunChanged.fire(p.run);
      }),
      client.onNotification('planwire/question', (p: { ticketId: number; runId: number; question: Question }) => {
        testLog({ event: 'question', ticketId: p.ticketId, questionId: p.question?.id });
        this.onQuestion.fire(p);
      }),
      client.onDidChangeState((e) => {
        if (e.newState === State.Running) this.afterStart(client);
      }),
    );
    try {
      this.output.info(`starting ${command} --stdio`);
      await client.start();
      if (logLevel === 'trace') await client.setTrace(Trace.Verbose);
      return true;
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      this.output.error(`planwire server failed to start: ${msg}`);
      testLog({ event: 'startFailed', message: msg });
      void vscode.window.showErrorMessage(`planwire: the server failed to start: ${msg}`, 'Show Output').then((c) => {
        if (c) this.output.show();
      });
      return false;
    }
  }

  private afterStart(client: LanguageClient): void {
    const init = client.initializeResult as
      | { serverInfo?: { version?: string }; capabilities?: { experimental?: { planwire?: { planners?: PlannerInfo[] } } } }
      | undefined;
    this.planners = init?.capabilities?.experimental?.planwire?.planners ?? [];
    this.serverVersion = init?.serverInfo?.version ?? '';
    this.output.info(`planwire server ${this.serverVersion} ready`);
    testLog({ event: 'ready', version: this.serverVersion });
    this.onReady.fire();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.disposables.splice(0)) d.dispose();
    if (client) {
      try {
        await client.stop(4000);
      } catch (e) {
        this.output.warn(`stopping the server: ${e instanceof Error ? e.message : String(e)}`);
      }
      await client.dispose().catch(() => undefined);
    }
  }

  async restart(): Promise<boolean> {
    await this.stop();
    return this.start();
  }

  /** Sends a planwire request; starts the server first when needed. */
  async request<R>(method: string, params: unknown): Promise<R> {
    if (!this.running && !(await this.start())) throw new Error('the planwire server is not running');
    const client = this.client!;
    try {
      const result = await client.sendRequest<R>(method, params);
      testLog({ event: 'response', method, ok: true, result: summarise(result) });
      return result;
    } catch (e) {
      const code = e instanceof ResponseError ? e.code : undefined;
      testLog({ event: 'response', method, ok: false, code, message: e instanceof Error ? e.message : String(e) });
      throw e;
    }
  }

  dispose(): void {
    void this.stop();
    this.onTranscript.dispose();
    this.onDelta.dispose();
    this.onTicketChanged.dispose();
    this.onRunChanged.dispose();
    this.onQuestion.dispose();
    this.onReady.dispose();
  }
}

function summarise(result: unknown): unknown {
  if (result && typeof result === 'object') {
    const r = result as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const k of ['id', 'status', 'ticketId', 'runId', 'stopped', 'lastSeq', 'done', 'version', 'path', 'bytes']) if (k in r) out[k] = r[k];
    if (Array.isArray(r.events)) out.events = r.events.length;
    if (Array.isArray(r.openBlocks)) out.openBlocks = r.openBlocks.length;
    if (Array.isArray(r.tickets)) out.tickets = r.tickets.length;
    return out;
  }
  return result;
}

/** A message for the user from a failed request. */
export function errorMessage(e: unknown): string {
  if (e instanceof ResponseError) {
    if (e.code === METHOD_NOT_FOUND) return `this planwire server does not support that yet (${e.message})`;
    return e.message;
  }
  return e instanceof Error ? e.message : String(e);
}

export function errorCode(e: unknown): number | undefined {
  return e instanceof ResponseError ? e.code : undefined;
}
