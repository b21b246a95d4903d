// The transcript webview alone, without VS Code: the real page model (out/src/pure/page.js)
// computes the patches of a long run, batch by batch, and the real webview script
// (dist/webview.js) with the real stylesheet applies them in Chromium, one frame each. Reports the
// renderer's CPU time for the first and the last 40 patches: with rendering that is linear in
// what changed they are about the same, however long the transcript. This is how the CSS traps
// in media/transcript.css were found.
//
// Usage (after `npm run build`): node bench/webview.mjs [events, default 20000]
// Env: BENCH_CACHE (playwright-core; default <repo>/.cache/vscode-e2e), BENCH_CHROMIUM.

import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_ARGS, chromiumFrom } from '../test/e2e/workbench.mjs';
import { cycle } from './stream.mjs';

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { PageModel } = require(join(HERE, 'out/src/pure/page.js'));
const { ticketPage } = require(join(HERE, 'out/src/pure/render.js'));
const { applyEvents, newRunTranscript } = require(join(HERE, 'out/src/pure/transcript.js'));

const EVENTS = Number(process.argv[2] || 20000);
const PER_PATCH = 48; // about what the extension gathers in one flush at 1,000 lines/s
const SEGMENT = 40;

/** CPU time (ms) of this browser's renderer processes. */
function rendererCpuMs() {
  let ms = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer') || !cmd.includes('playwright')) continue;
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      ms += (Number(f[11]) + Number(f[12])) * 10;
    } catch {
      // gone
    }
  }
  return ms;
}

/** The stream's events (text, call, result), as the server stores them. */
function* events() {
  let seq = 0;
  for (let k = 0; ; k++) {
    const [text, call, result] = cycle(k).map((l) => l.message.content[0]);
    yield { seq: ++seq, ts: 'x', kind: 'text', text: text.text, final: false };
    yield { seq: ++seq, ts: 'x', kind: 'toolCall', callId: call.id, name: call.name, input: JSON.stringify(call.input) };
    yield { seq: ++seq, ts: 'x', kind: 'toolResult', callId: result.tool_use_id, status: 'completed', output: result.content };
  }
}

const chromium = chromiumFrom(process.env.BENCH_CACHE || resolve(HERE, '../../.cache/vscode-e2e'));
const browser = await chromium.launch({ executablePath: process.env.BENCH_CHROMIUM || '/usr/bin/chromium', args: CHROMIUM_ARGS });
try {
  const page = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
  const css = readFileSync(join(HERE, 'media/transcript.css'), 'utf8');
  await page.setContent(`<html><head><style>${css}</style></head><body data-ticket-id="1"><div id="root"></div></body></html>`);
  await page.evaluate(() => {
    window.acquireVsCodeApi = () => ({ getState: () => undefined, setState() {}, postMessage() {} });
  });
  await page.addScriptTag({ content: readFileSync(join(HERE, 'dist/webview.js'), 'utf8') });

  const ticket = { id: 1, root: '/repo', title: 'A long run', description: 'Many events.', status: 'planning', tool: 'script', createdAt: '2025-01-01T00:00:00Z', updatedAt: '2025-01-01T00:00:00Z' };
  const t = newRunTranscript(1);
  const transcripts = new Map([[1, t]]);
  const view = (lastSeq) => ticketPage({ ticket, runs: [{ id: 1, ticketId: 1, status: 'running', tool: 'script', createdAt: ticket.createdAt, startedAt: ticket.createdAt, lastSeq }], transcripts, questions: [], now: Date.now() });
  const model = new PageModel();
  await page.evaluate((html) => window.postMessage({ type: 'reset', gen: 1, n: 1, html, status: 'planning' }, '*'), model.reset(view(0)));

  const patches = Math.floor(EVENTS / PER_PATCH);
  const source = events();
  const cpu = [];
  let mark = 0;
  const started = Date.now();
  for (let i = 1; i <= patches; i++) {
    if (i === 1 || i === patches - SEGMENT + 1) mark = rendererCpuMs();
    const batch = Array.from({ length: PER_PATCH }, () => source.next().value);
    applyEvents(t, batch);
    const ops = model.patch(view(batch[batch.length - 1].seq));
    await page.evaluate(async ({ ops, n }) => {
      window.postMessage({ type: 'patch', gen: 1, n, ops, status: 'planning' }, '*');
      await new Promise((r) => setTimeout(r, 0));
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    }, { ops, n: i + 1 });
    if (i === SEGMENT || i === patches) cpu.push(rendererCpuMs() - mark);
  }
  const shown = await page.evaluate(() => ({ rows: document.querySelectorAll('[data-key^="r1-"]').length, chunks: document.querySelectorAll('.chunk').length }));
  console.log(`${patches * PER_PATCH} events in ${patches} patches (${((Date.now() - started) / 1000).toFixed(1)} s): ${shown.rows} rows in ${shown.chunks} chunks`);
  console.log(`renderer CPU per patch: first ${SEGMENT} ${(cpu[0] / SEGMENT).toFixed(1)} ms, last ${SEGMENT} ${(cpu[1] / SEGMENT).toFixed(1)} ms (ratio ${(cpu[1] / cpu[0]).toFixed(2)})`);
} finally {
  await browser.close();
}
