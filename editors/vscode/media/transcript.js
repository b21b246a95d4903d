// Transcript webview: receives rendered HTML from the extension and keeps the reader's place
// (expanded rows, scroll position) across updates. No remote resources; all actions go back to
// the extension as messages.
(function () {
  const vscode = acquireVsCodeApi();
  const root = document.getElementById('root');
  const saved = vscode.getState() || {};
  // A ticket's page carries data-ticket-id; a breakdown's page data-run-id.
  const ticketId = document.body.dataset.ticketId ? Number(document.body.dataset.ticketId) : undefined;
  const runId = document.body.dataset.runId ? Number(document.body.dataset.runId) : undefined;
  /** data-key → open, for rows the reader toggled. */
  const toggled = saved.toggled || {};
  vscode.setState({ ticketId, runId, toggled });

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
  }

  function applyOpenState() {
    for (const d of root.querySelectorAll('details[data-key]')) {
      const key = d.dataset.key;
      const want = Object.prototype.hasOwnProperty.call(toggled, key) ? toggled[key] : d.hasAttribute('data-default-open');
      if (d.open !== want) d.open = want;
    }
  }

  window.addEventListener('message', (e) => {
    const m = e.data;
    if (!m || typeof m !== 'object') return;
    if (m.type === 'render') {
      const stick = atBottom();
      const y = window.scrollY;
      root.innerHTML = m.html;
      applyOpenState();
      document.body.dataset.status = m.status || '';
      if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
      else window.scrollTo(0, y);
    } else if (m.type === 'error') {
      const div = document.createElement('div');
      div.className = 'error';
      div.textContent = m.message;
      root.prepend(div);
    }
  });

  // Remember rows the reader opens or closes (a click or Enter/Space on the summary).
  root.addEventListener('click', (e) => {
    const summary = e.target.closest('summary');
    if (summary && summary.parentElement && summary.parentElement.dataset.key) {
      const d = summary.parentElement;
      toggled[d.dataset.key] = !d.open;
      vscode.setState({ ticketId, runId, toggled });
    }
    const button = e.target.closest('[data-cmd]');
    if (button) {
      e.preventDefault();
      const qid = button.dataset.questionId ? Number(button.dataset.questionId) : undefined;
      const tid = button.dataset.ticketId ? Number(button.dataset.ticketId) : undefined;
      vscode.postMessage({ type: 'command', cmd: button.dataset.cmd, questionId: qid, ticketId: tid });
    }
  });

  vscode.postMessage({ type: 'ready' });
})();
