// Driving a real VS Code workbench (code-server in Chromium) with playwright-core: the command
// palette, quick inputs, the Tickets tree and the transcript webview. Shared by the end-to-end
// test (test/e2e/e2e.mjs) and the benchmark (bench/bench.mjs).

import { createRequire } from 'node:module';
import { join } from 'node:path';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Polls `fn` until it returns something truthy; throws after `timeout` ms. */
export async function waitFor(what, fn, timeout = 10_000, every = 150) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}${last instanceof Error ? ` (${last.message.split('\n')[0]})` : ''}`);
    await sleep(every);
  }
}

/** playwright-core's chromium, from the test cache (installed by test/setup.sh). */
export function chromiumFrom(cacheDir) {
  const require = createRequire(join(cacheDir, 'node_modules', 'index.js'));
  return require('playwright-core').chromium;
}

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

/** The helpers for one workbench page. */
export function workbench(page) {
  const quickInput = () => page.locator('.quick-input-widget');
  const quickInputVisible = () => quickInput().isVisible();

  /** Runs a palette command by its exact label ("planwire: New Ticket"). */
  async function runCommand(label) {
    // Once more when the palette lost what was typed (focus taken by a toast or a dialog).
    try {
      await paletteRun(label);
    } catch {
      await paletteRun(label);
    }
  }

  async function paletteRun(label) {
    // (Escape in the focused tree would clear its selection, so only close an open quick input.)
    if (await quickInputVisible()) await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    let opened = await waitFor('the command palette', quickInputVisible, 1500).catch(() => false);
    if (!opened) {
      // Focus may sit inside a webview that keeps F1: move it to the workbench and try again.
      await page.locator('.part.sidebar .composite.title').first().click({ timeout: 2000 }).catch(() => undefined);
      await page.keyboard.press('F1');
      opened = await waitFor('the command palette', quickInputVisible, 1500).catch(() => false);
    }
    if (!opened) {
      await page.locator('.command-center-center').first().click({ timeout: 2000 });
      await waitFor('quick open', quickInputVisible, 3000);
      await page.keyboard.type('>');
    }
    await page.keyboard.type(label, { delay: 5 });
    const row = quickInput().locator('.monaco-list-row').filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(label)}$`) }) }).first();
    await waitFor(`"${label}" in the palette`, () => row.isVisible(), 5000);
    await row.click();
  }

  /**
   * Waits for the quick input with a title containing `title`, types `text` and presses Enter.
   * An empty `text` keeps the value offered, unless `replace` (then the input is cleared).
   */
  async function answerInput(title, text, replace = false) {
    await waitFor(`an input titled "${title}"`, async () => (await quickInputVisible()) && (await quickInput().locator('.quick-input-title').innerText()).includes(title), 6000);
    const box = quickInput().locator('.quick-input-box input').first();
    await box.click();
    if (text || replace) {
      await box.fill(text);
      await waitFor(`"${text}" in the input`, async () => (await box.inputValue()) === text, 2000);
    }
    await box.press('Enter');
  }

  /** Picks the quick pick entry with this label. */
  async function pickItem(label) {
    const row = quickInput().locator('.monaco-list-row').filter({ has: page.locator('.label-name', { hasText: new RegExp(`^\\s*${escapeRe(label)}\\s*$`) }) }).first();
    await waitFor(`"${label}" in the quick pick`, () => row.isVisible(), 6000);
    await row.click();
  }

  const ticketsView = () => page.locator('.pane').filter({ has: page.locator('.pane-header', { hasText: /Tickets/i }) });
  const ticketRow = (title) => ticketsView().locator('.monaco-list-row').filter({ hasText: title }).first();
  /** The tree row whose label is exactly `label` (not one that mentions it in its description). */
  const exactRow = (label) => ticketsView().locator('.monaco-list-row').filter({ has: page.locator('.label-name', { hasText: new RegExp(`^\\s*${escapeRe(label)}\\s*$`) }) }).first();

  async function rowDescription(title) {
    const row = ticketRow(title);
    if (!(await row.count())) return '';
    return (await row.locator('.label-description').first().innerText().catch(() => '')).trim();
  }

  async function waitForStatus(title, word, timeout = 15_000) {
    await waitFor(`"${title}" to be ${word} in the tree`, async () => (await rowDescription(title)).startsWith(word), timeout);
  }

  /** The text of the planwire status bar item. */
  async function statusBarText() {
    const item = page.locator('.statusbar-item').filter({ hasText: /planwire/ }).first();
    return (await item.isVisible()) ? (await item.innerText()).trim() : '';
  }

  /** The frame of a transcript webview: `body[data-ticket-id="N"]`, or any ticket's. */
  async function transcriptFrame(ticketId, timeout = 10_000) {
    const sel = ticketId === undefined ? 'body[data-ticket-id]' : `body[data-ticket-id="${ticketId}"]`;
    return waitFor(`the transcript webview of ticket ${ticketId ?? '(any)'}`, async () => {
      for (const f of page.frames()) {
        try {
          if (await f.locator(sel).count()) return f;
        } catch {
          // detached frame
        }
      }
      return undefined;
    }, timeout);
  }

  /** Opens the planwire view and waits for the Tickets tree. */
  async function openPlanwire() {
    await page.locator('.activitybar .action-label[aria-label^="planwire"]').first().click();
    await waitFor('the Tickets view', () => ticketsView().isVisible(), 5000);
  }

  async function newTicket(title, description, branch = '') {
    await runCommand('planwire: New Ticket');
    await answerInput('New Ticket (1/3)', title);
    await answerInput('New Ticket (2/3)', description);
    await answerInput('New Ticket (3/3)', branch);
    await waitFor(`"${title}" in the tree`, async () => (await ticketRow(title).count()) > 0, 8000);
  }

  async function choosePlanner(tool, model) {
    await runCommand('planwire: Choose Planner');
    await pickItem(tool);
    await waitFor('the model input', async () => (await quickInputVisible()) && (await quickInput().locator('.quick-input-title').innerText()).includes(`model for ${tool}`), 5000);
    const box = quickInput().locator('.quick-input-box input').first();
    await box.fill(model);
    await waitFor(`"${model}" in the input`, async () => (await box.inputValue()) === model, 2000);
    await box.press('Enter');
    await waitFor('the planner setting to be saved', async () => !(await quickInputVisible()), 3000);
  }

  return {
    quickInput, quickInputVisible, runCommand, answerInput, pickItem, ticketsView, ticketRow, exactRow,
    rowDescription, waitForStatus, statusBarText, transcriptFrame, openPlanwire, newTicket, choosePlanner,
  };
}
