// When PLANWIRE_VSCODE_TEST_LOG names a file (the end-to-end test sets it in code-server's
// environment), the extension appends one JSON line per notable event to it. Otherwise a no-op.

import * as fs from 'fs';

const file = process.env.PLANWIRE_VSCODE_TEST_LOG;

export function testLog(entry: Record<string, unknown>): void {
  if (!file) return;
  try {
    fs.appendFileSync(file, JSON.stringify({ t: Date.now(), ...entry }) + '\n');
  } catch {
    // a test aid only
  }
}
