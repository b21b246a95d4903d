// The server's work-done progress of each run ("Planning: <title>" and what it does now), shown
// in the status bar as vscode-languageclient's own progress feature does, but with at most one
// update every REPORT_EVERY_MS. The server reports every tool call; a long run reports hundreds
// a second, and each report redraws the workbench's status bar, on the thread the workbench and
// the transcript share. Registered after the client's default features, its handler of
// `window/workDoneProgress/create` is the one in use.

import * as vscode from 'vscode';
import {
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
  type BaseLanguageClient,
  type ClientCapabilities,
  type FeatureState,
  type ProgressToken,
  type StaticFeature,
} from 'vscode-languageclient/node';

const REPORT_EVERY_MS = 250;

export class ThrottledProgressFeature implements StaticFeature {
  private readonly parts = new Set<() => void>();

  constructor(private readonly client: BaseLanguageClient) {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    (capabilities.window ??= {}).workDoneProgress = true;
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => this.create(token));
  }

  clear(): void {
    for (const end of [...this.parts]) end();
  }

  private create(token: ProgressToken): void {
    let progress: vscode.Progress<{ message?: string }> | undefined;
    let ended: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (ended = resolve));
    let pending: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    let last = 0;
    const flush = () => {
      timer = undefined;
      if (pending === undefined || !progress) return;
      progress.report({ message: pending });
      pending = undefined;
      last = Date.now();
    };
    const sub = this.client.onProgress(WorkDoneProgress.type, token, (v) => {
      if (v.kind === 'begin') {
        void vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: v.title }, (p) => {
          progress = p;
          if (v.message) p.report({ message: v.message });
          return done;
        });
      } else if (v.kind === 'report') {
        pending = v.message ?? '';
        timer ??= setTimeout(flush, Math.max(0, last + REPORT_EVERY_MS - Date.now()));
      } else {
        end();
      }
    });
    const end = () => {
      if (timer) clearTimeout(timer);
      sub.dispose();
      ended();
      this.parts.delete(end);
    };
    this.parts.add(end);
  }
}
