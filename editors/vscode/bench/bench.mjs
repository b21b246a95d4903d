// VS Code benchmark: a long planning run streamed into a real VS Code (code-server in
// Chromium) with the extension installed from a .vsix. For each size and run it starts a fresh
// code-server profile, creates a ticket, plans it with the `script` planner replaying a stream
// at `--rate` lines/s (bench/stream.mjs), and measures:
//   - the time from the planner's last line (stamped with CLOCK_MONOTONIC by the replayer) to
//     the plan shown in the webview, and to the tree and the status bar no longer saying planning;
//   - CPU per event of each process (renderer(s), extension host, the rest of code-server and
//     Chromium; the sidecar and the replayer for reference), from /proc/PID/stat;
//   - responsiveness during the stream: the workbench's main-thread lag (a 50 ms timer's
//     lateness) and long tasks, and the webview's long tasks; as a control, the same lag over
//     5 s with nothing streaming (what the machine's load alone does);
//   - peak memory (VmHWM) per process;
//   - that every event's row is shown exactly once (each "step K" text once, each call's row
//     once, with its result), and the run footer's count equals the server's last seq.
// Timing never fails it; the exit code is 1 only when a check fails or a run does not finish.
//
// Usage: node bench/bench.mjs --vsix planwire.vsix [--bin path/to/planwire] [--sizes 2000,20000]
//          [--runs 3] [--rate 1000] [--label after] [--out results.json] [--keep]
//        node bench/bench.mjs --report results.json…   (one table from runs saved with --out)
// Env: BENCH_CACHE (holds code-server and playwright-core; default <repo>/.cache/vscode-e2e),
//      BENCH_CHROMIUM (default /usr/bin/chromium).

import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_ARGS, chromiumFrom, sleep, waitFor, workbench } from '../test/e2e/workbench.mjs';
import { LAST_MARK, rowProblems, shownRows, writeScript } from './stream.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '../../..');

function parseArgs(argv) {
  const o = { sizes: [2000, 20000], runs: 3, rate: 1000, label: '', out: '', keep: false, vsix: '', bin: '', timeoutS: 900, report: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--report') o.report.push(...argv.slice(i + 1).map((f) => resolve(f)));
    if (a === '--report') break;
    if (a === '--sizes') o.sizes = next().split(',').map(Number);
    else if (a === '--runs') o.runs = Number(next());
    else if (a === '--rate') o.rate = Number(next());
    else if (a === '--label') o.label = next();
    else if (a === '--out') o.out = next();
    else if (a === '--vsix') o.vsix = resolve(next());
    else if (a === '--bin') o.bin = resolve(next());
    else if (a === '--timeout') o.timeoutS = Number(next());
    else if (a === '--keep') o.keep = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.vsix && !o.report.length) throw new Error('--vsix is required (--bin sets planwire.serverPath; without it the .vsix must carry the binary)');
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const CACHE = process.env.BENCH_CACHE || join(REPO, '.cache/vscode-e2e');
const CODE_SERVER = join(CACHE, 'node_modules/.bin/code-server');
const chromium = chromiumFrom(CACHE);
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK']).stdout.toString().trim() || 100);
const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

// ---- processes ----------------------------------------------------------------------------
function readProc(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const f = stat.slice(close + 2).split(' ');
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return { pid, ppid: Number(f[1]), cpuMs: ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK, cmd };
  } catch {
    return undefined;
  }
}

function memKb(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** What a process is, for the per-process figures. */
function classify(cmd) {
  const line = cmd.join(' ');
  if (/planwire\S*\s+replay\b/.test(line)) return 'replayer';
  if (/planwire\S*\s+--stdio\b/.test(line)) return 'sidecar';
  if (/--type=renderer/.test(line)) return 'renderer';
  if (/chrom/i.test(cmd[0] ?? '')) return 'chromium other';
  if (/--type=extensionHost/.test(line)) return 'extension host';
  return 'code-server other';
}

/** Every descendant of this process, by class. */
function processTree() {
  const all = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const p = readProc(Number(d));
    if (p) all.push(p);
  }
  const kids = new Map();
  for (const p of all) {
    if (!kids.has(p.ppid)) kids.set(p.ppid, []);
    kids.get(p.ppid).push(p);
  }
  const out = [];
  const walk = (pid) => {
    for (const c of kids.get(pid) ?? []) {
      out.push({ ...c, cls: classify(c.cmd) });
      walk(c.pid);
    }
  };
  walk(process.pid);
  return out;
}

// ---- code-server ----------------------------------------------------------------------------
function freePort() {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function startCodeServer(dir, settings) {
  for (const d of ['home', 'xdg/config', 'xdg/data', 'xdg/cache', 'xdg/state', 'xdg/runtime', 'user/User', 'ext', 'workspace/src']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'config.yaml'), 'bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n');
  writeFileSync(join(dir, 'workspace/src/main.rs'), 'fn main() {\n    println!("hello");\n}\n');
  writeFileSync(join(dir, 'user/User/settings.json'), JSON.stringify(settings, null, 2));
  const env = {
    ...process.env, HOME: join(dir, 'home'), XDG_CONFIG_HOME: join(dir, 'xdg/config'), XDG_DATA_HOME: join(dir, 'xdg/data'),
    XDG_CACHE_HOME: join(dir, 'xdg/cache'), XDG_STATE_HOME: join(dir, 'xdg/state'), XDG_RUNTIME_DIR: join(dir, 'xdg/runtime'), VSCODE_CLI: '1',
  };
  delete env.PLANWIRE_VSCODE_TEST_LOG;
  const common = ['--config', join(dir, 'config.yaml'), '--user-data-dir', join(dir, 'user'), '--extensions-dir', join(dir, 'ext')];
  const inst = spawnSync(CODE_SERVER, [...common, '--install-extension', opts.vsix], { env, encoding: 'utf8' });
  if (inst.status !== 0) throw new Error(`installing ${opts.vsix} failed: ${inst.stderr || inst.stdout}`);
  const port = await freePort();
  const cs = spawn(CODE_SERVER, [...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', join(dir, 'workspace')], {
    env, detached: true, stdio: ['ignore', 'ignore', 'ignore'],
  });
  const stop = async () => {
    try {
      process.kill(-cs.pid, 'SIGTERM');
    } catch {
      return;
    }
    for (let i = 0; i < 20; i++) {
      try {
        process.kill(-cs.pid, 0);
      } catch {
        return;
      }
      await sleep(200);
    }
    try {
      process.kill(-cs.pid, 'SIGKILL');
    } catch {
      // gone
    }
  };
  await waitFor('code-server to listen', () => new Promise((res) => {
    const s = createServer();
    s.once('error', () => res(true));
    s.listen(port, '127.0.0.1', () => s.close(() => res(false)));
  }), 30_000, 200);
  return { port, stop, workspace: join(dir, 'workspace') };
}

// ---- probes injected into the pages ---------------------------------------------------------
/**
 * Main-thread lag (how late a 50 ms timer fires) and long tasks, in the page it runs in. With
 * `buffered`, long tasks from before the probe count too (the webview's, from its creation).
 */
function installProbes(buffered) {
  const w = window;
  if (w.__pwBench) return;
  const b = { lag: [], longTasks: [], running: true };
  w.__pwBench = b;
  let expected = performance.now() + 50;
  const tick = () => {
    if (!b.running) return;
    const now = performance.now();
    b.lag.push(Math.max(0, now - expected));
    expected = now + 50;
    setTimeout(tick, 50);
  };
  setTimeout(tick, 50);
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) b.longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered });
  } catch {
    // no long task API
  }
}

/** In the webview: when the plan first appears (epoch ms, to compare with the replayer's stamp). */
function watchPlan() {
  const w = window;
  if (w.__pwPlan !== undefined) return;
  w.__pwPlan = 0;
  const seen = () => {
    if (!w.__pwPlan && document.querySelector('section.plan')) w.__pwPlan = performance.timeOrigin + performance.now();
    return w.__pwPlan;
  };
  if (seen()) return;
  const mo = new MutationObserver(() => {
    if (seen()) mo.disconnect();
  });
  mo.observe(document.body, { childList: true, subtree: true });
}

function collectProbes() {
  const b = window.__pwBench;
  if (!b) return undefined;
  b.running = false;
  return { lag: b.lag, longTasks: b.longTasks };
}

/** The run footer's counts, the stamped last line as shown, the plan's title. */
function readEnd(mark) {
  const foot = document.querySelector('footer.run-foot');
  const last = new RegExp(`${mark}(\\d+)`).exec(document.body.textContent);
  return {
    applied: Number(foot?.getAttribute('data-applied')), serverLastSeq: Number(foot?.getAttribute('data-server-last-seq')),
    lastLineNs: last ? last[1] : null, planTitle: document.querySelector('.plan-title')?.textContent.trim() ?? '',
  };
}

// ---- one run --------------------------------------------------------------------------------
function pct(xs, p) {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function checkRows(rows, end, cycles) {
  const problems = rowProblems(rows, cycles);
  if (!(end.applied > 0 && end.applied === end.serverLastSeq)) problems.push(`footer: ${end.applied} applied, server last seq ${end.serverLastSeq}`);
  return problems;
}

async function oneRun(size, index) {
  const dir = mkdtempSync(join(tmpdir(), `planwire-vscode-bench-${size}-`));
  const script = join(dir, 'stream.jsonl');
  const info = writeScript(script, { events: size, linesPerSecond: opts.rate });
  const settings = {
    ...(opts.bin ? { 'planwire.serverPath': opts.bin } : {}), 'planwire.dbPath': join(dir, 'planwire.db'), 'planwire.defaultTool': 'script', 'planwire.model': script,
    'planwire.logLevel': 'warn', 'workbench.startupEditor': 'none', 'workbench.tips.enabled': false, 'workbench.enableExperiments': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false, 'workbench.secondarySideBar.defaultVisibility': 'hidden', 'chat.commandCenter.enabled': false,
    'chat.disableAIFeatures': true, 'security.workspace.trust.enabled': false, 'telemetry.telemetryLevel': 'off', 'update.mode': 'none',
    'extensions.autoCheckUpdates': false, 'extensions.autoUpdate': false, 'extensions.ignoreRecommendations': true, 'git.enabled': false, 'editor.minimap.enabled': false,
  };
  const cs = await startCodeServer(dir, settings);
  const browser = await chromium.launch({ executablePath: process.env.BENCH_CHROMIUM || '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const result = { size, run: index + 1, cycles: info.cycles, lines: info.lines };
  try {
    const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
    page.setDefaultTimeout(5000);
    page.setDefaultNavigationTimeout(90_000);
    const wb = workbench(page);
    await page.goto(`http://127.0.0.1:${cs.port}/?folder=${encodeURIComponent(cs.workspace)}`);
    await waitFor('the workbench', () => page.locator('.monaco-workbench').isVisible(), 60_000);
    await waitFor('the planwire status bar item', async () => /planwire/.test(await wb.statusBarText()), 60_000);
    await wb.openPlanwire();
    const title = `Bench ${size} #${index + 1}`;
    await wb.newTicket(title, 'A long planning run.');
    await sleep(1000);
    await page.evaluate(installProbes, false);
    // A control: the workbench's lag with nothing streaming, on this machine, right now.
    await sleep(5000);
    const idleLag = await page.evaluate(() => {
      const b = window.__pwBench;
      const lag = b.lag;
      b.lag = [];
      b.longTasks = [];
      return lag;
    });
    const before = processTree();
    const t0 = monoMs();
    await wb.runCommand('planwire: Plan Ticket');
    const frame = await wb.transcriptFrame(undefined, 60_000);
    await frame.evaluate(installProbes, true);
    await frame.evaluate(watchPlan);
    const peakRss = new Map();
    const sample = () => {
      for (const p of processTree()) peakRss.set(p.pid, Math.max(peakRss.get(p.pid) ?? 0, memKb(p.pid, 'VmRSS')));
    };
    const deadline = opts.timeoutS * 1000;
    let planEpoch = 0;
    let treeDoneMono = 0;
    let statusDoneMono = 0;
    let planMono = 0;
    let after;
    while (monoMs() - t0 < deadline) {
      sample();
      if (!planEpoch) {
        planEpoch = await frame.evaluate(() => window.__pwPlan).catch(() => 0);
        if (planEpoch) planMono = monoMs() - (Date.now() - planEpoch);
      }
      if (!treeDoneMono && (await wb.rowDescription(title)).startsWith('planned')) treeDoneMono = monoMs();
      if (!statusDoneMono && treeDoneMono && !/planning/.test(await wb.statusBarText())) statusDoneMono = monoMs();
      if (planEpoch && treeDoneMono && statusDoneMono) {
        after = processTree();
        break;
      }
      await sleep(250);
    }
    if (!after) throw new Error(`the plan was not shown within ${opts.timeoutS} s (plan ${!!planEpoch}, tree ${!!treeDoneMono}, status bar ${!!statusDoneMono})`);
    const webviewProbes = await frame.evaluate(collectProbes);
    const workbenchProbes = await page.evaluate(collectProbes);
    const rows = await frame.evaluate(shownRows);
    const seen = await frame.evaluate(readEnd, LAST_MARK);
    const lastLineMono = seen.lastLineNs ? Number(BigInt(seen.lastLineNs) / 1000n) / 1000 : NaN;
    const events = seen.serverLastSeq;
    // CPU per class, over the run (processes that started during it counted from zero).
    const cpuBefore = new Map(before.map((p) => [p.pid, p.cpuMs]));
    const byClass = {};
    const perProcess = [];
    for (const p of after) {
      const ms = p.cpuMs - (cpuBefore.get(p.pid) ?? 0);
      byClass[p.cls] = (byClass[p.cls] ?? 0) + ms;
      if (ms > 50) perProcess.push({ cls: p.cls, pid: p.pid, cpuMs: Math.round(ms), hwmMb: Math.round(Math.max(memKb(p.pid, 'VmHWM'), peakRss.get(p.pid) ?? 0) / 1024) });
    }
    const editorClasses = ['renderer', 'chromium other', 'extension host', 'code-server other'];
    const editorMs = editorClasses.reduce((n, c) => n + (byClass[c] ?? 0), 0);
    const peakByClass = {};
    for (const p of after) peakByClass[p.cls] = Math.max(peakByClass[p.cls] ?? 0, Math.max(memKb(p.pid, 'VmHWM'), peakRss.get(p.pid) ?? 0) / 1024);
    Object.assign(result, {
      events,
      planShownAfterLastLineS: (planMono - lastLineMono) / 1000,
      treePlannedAfterLastLineS: (treeDoneMono - lastLineMono) / 1000,
      statusBarIdleAfterLastLineS: (statusDoneMono - lastLineMono) / 1000,
      streamS: (lastLineMono - t0) / 1000,
      cpuMsPerEvent: { editor: editorMs / events, ...Object.fromEntries(Object.entries(byClass).map(([c, ms]) => [c, ms / events])) },
      workbenchLag: { p95: pct(workbenchProbes.lag, 95), max: Math.max(0, ...workbenchProbes.lag), samples: workbenchProbes.lag.length },
      idleWorkbenchLag: { p95: pct(idleLag, 95), max: Math.max(0, ...idleLag), samples: idleLag.length },
      workbenchLongTasks: { count: workbenchProbes.longTasks.length, p95: pct(workbenchProbes.longTasks, 95), max: Math.max(0, ...workbenchProbes.longTasks), totalMs: workbenchProbes.longTasks.reduce((a, b) => a + b, 0) },
      webviewLongTasks: { count: webviewProbes.longTasks.length, p95: pct(webviewProbes.longTasks, 95), max: Math.max(0, ...webviewProbes.longTasks), totalMs: webviewProbes.longTasks.reduce((a, b) => a + b, 0) },
      peakMb: peakByClass,
      perProcess,
      problems: checkRows(rows, seen, info.cycles),
      planTitle: seen.planTitle,
    });
    if (seen.planTitle !== info.planTitle) result.problems.push(`plan title "${seen.planTitle}"`);
    if (!seen.lastLineNs) result.problems.push('the stamped last line is not shown');
  } finally {
    await browser.close().catch(() => undefined);
    await cs.stop();
    if (!opts.keep) rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

// ---- the report -----------------------------------------------------------------------------
const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};
const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '–');
const spread = (xs, d = 2) => `${f(median(xs), d)} (${f(Math.min(...xs), d)}–${f(Math.max(...xs), d)})`;

function report(results) {
  const lines = [];
  const sizes = [...new Set(results.map((r) => r.size))];
  const get = (size, fn) => results.filter((r) => r.size === size && !r.error).map(fn);
  const row = (name, fn, d) => lines.push(`| ${name} | ${sizes.map((s) => spread(get(s, fn), d)).join(' | ')} |`);
  lines.push(`| figure${opts.label ? ` (${opts.label})` : ''} | ${sizes.map((s) => `${s} events`).join(' | ')} |`);
  lines.push(`| --- | ${sizes.map(() => '---').join(' | ')} |`);
  row('plan shown after the last line, s', (r) => r.planShownAfterLastLineS);
  row('tree says planned after the last line, s', (r) => r.treePlannedAfterLastLineS);
  row('status bar stops saying planning, s', (r) => r.statusBarIdleAfterLastLineS);
  row('plan command → last line, s (stream)', (r) => r.streamS);
  row('editor CPU per event, ms', (r) => r.cpuMsPerEvent.editor, 3);
  for (const c of ['renderer', 'extension host', 'chromium other', 'code-server other', 'sidecar']) row(`  ${c}, ms/event`, (r) => r.cpuMsPerEvent[c] ?? 0, 3);
  row('workbench lag p95, ms', (r) => r.workbenchLag.p95, 0);
  row('workbench lag max, ms', (r) => r.workbenchLag.max, 0);
  row('  control: idle workbench lag p95, ms', (r) => r.idleWorkbenchLag?.p95 ?? NaN, 0);
  row('webview long tasks, count', (r) => r.webviewLongTasks.count, 0);
  row('webview long task max, ms', (r) => r.webviewLongTasks.max, 0);
  row('workbench long tasks, total ms', (r) => r.workbenchLongTasks.totalMs, 0);
  row('peak renderer (max of processes), MB', (r) => r.peakMb.renderer ?? 0, 0);
  row('peak extension host, MB', (r) => r.peakMb['extension host'] ?? 0, 0);
  row('load average at start', (r) => Number(String(r.load).split(' ')[0]), 1);
  if (sizes.length === 2) {
    const [a, b] = sizes;
    const ratio = (fn) => median(get(b, fn)) / median(get(a, fn));
    lines.push('');
    lines.push(`CPU per event, ${b} ÷ ${a}: editor ${f(ratio((r) => r.cpuMsPerEvent.editor))}, renderer ${f(ratio((r) => r.cpuMsPerEvent.renderer ?? 0))}, extension host ${f(ratio((r) => r.cpuMsPerEvent['extension host'] ?? 0))}`);
    // What each event past the first `a` cost: fixed costs (opening the panel) cancel out.
    const marginal = (c) => (median(get(b, (r) => (r.cpuMsPerEvent[c] ?? 0) * r.events)) - median(get(a, (r) => (r.cpuMsPerEvent[c] ?? 0) * r.events))) / (b - a);
    lines.push(`Marginal CPU per event from ${a} to ${b} events, ms: editor ${f(marginal('editor'), 3)}, renderer ${f(marginal('renderer'), 3)}, extension host ${f(marginal('extension host'), 3)}`);
  }
  return lines.join('\n');
}

if (opts.report.length) {
  const saved = opts.report.map((f) => JSON.parse(readFileSync(f, 'utf8')));
  opts.label = [...new Set(saved.map((x) => x.label).filter(Boolean))].join(', ');
  console.log(report(saved.flatMap((x) => x.results)));
  process.exit(0);
}

const results = [];
let failed = 0;
for (const size of opts.sizes) {
  for (let i = 0; i < opts.runs; i++) {
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    process.stdout.write(`[bench] ${size} events, run ${i + 1}/${opts.runs} (load ${load})… `);
    try {
      const r = await oneRun(size, i);
      r.load = load;
      results.push(r);
      if (r.problems.length) failed++;
      console.log(`plan shown ${f(r.planShownAfterLastLineS)} s after the last line; editor ${f(r.cpuMsPerEvent.editor, 3)} ms/event; workbench lag p95 ${f(r.workbenchLag.p95, 0)} ms${r.problems.length ? `; PROBLEMS: ${r.problems.join('; ')}` : '; every row once'}`);
    } catch (e) {
      failed++;
      results.push({ size, run: i + 1, error: e.message });
      console.log(`FAILED: ${e.message}`);
    }
  }
}
console.log('\n' + report(results));
if (opts.out) {
  mkdirSync(dirname(resolve(opts.out)), { recursive: true });
  writeFileSync(opts.out, JSON.stringify({ label: opts.label, rate: opts.rate, results }, null, 2));
  console.log(`\nresults: ${opts.out}`);
}
const ok = results.length - failed;
console.log(`\n${ok} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

