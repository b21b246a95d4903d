-- Shared helpers of the specs: a fresh plugin state, a temp project and db, waits.
local H = {}

local api = vim.api

H.plugin_dir = vim.env.PLANWIRE_PLUGIN_DIR or vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
H.repo = vim.fn.fnamemodify(H.plugin_dir, ':h:h')
H.bin = vim.env.PLANWIRE_BIN or (H.repo .. '/target/debug/planwire')
H.tmp_root = vim.env.PLANWIRE_TEST_TMP or vim.fn.tempname()
vim.fn.mkdir(H.tmp_root, 'p')

--- Default wait: generous, for a busy 2-core machine.
H.TIMEOUT = tonumber(vim.env.PLANWIRE_TEST_TIMEOUT or '') or 30000

--- A new empty directory under the run's temp root (unique also across spec files, which
--- busted runs with fresh copies of this module).
function H.tempdir(name)
  local n = 0
  local dir
  repeat
    n = n + 1
    dir = ('%s/%s-%d'):format(H.tmp_root, name or 'dir', n)
  until vim.fn.isdirectory(dir) == 0 and vim.fn.filereadable(dir) == 0
  vim.fn.mkdir(dir, 'p')
  return dir
end

--- Waits for `cond()` to be truthy; fails with `what` (and `detail()`) on timeout.
function H.wait(what, cond, timeout, detail)
  local last
  local ok = vim.wait(timeout or H.TIMEOUT, function()
    local good, v = pcall(cond)
    last = good and v or last
    if not good then
      last = nil
      H.last_error = v
    end
    return good and v and true or false
  end, 25)
  if not ok then
    local extra = detail and ('\n' .. tostring(detail())) or ''
    error(('timed out after %d ms waiting for %s%s'):format(timeout or H.TIMEOUT, what, extra), 2)
  end
  return last
end

--- Lines of a buffer.
function H.lines(buf)
  return api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

function H.text(buf)
  return table.concat(H.lines(buf), '\n')
end

--- Stops every planwire client and waits until they are gone.
function H.stop_servers()
  for _, c in ipairs(vim.lsp.get_clients({ name = 'planwire' })) do
    c:stop(true)
  end
  vim.wait(10000, function()
    return #vim.lsp.get_clients({ name = 'planwire' }) == 0
  end, 25)
end

--- Drops every loaded planwire module, so the next require starts from scratch.
function H.unload()
  for name in pairs(package.loaded) do
    if name == 'planwire' or name:match('^planwire%.') then
      package.loaded[name] = nil
    end
  end
end

--- A fresh world: no server, no planwire buffers, fresh modules, a new project dir (the cwd)
--- and a new db, then `setup()` with the script planner.
--- @param opts table? extra setup options (model, init_options, ...)
function H.fresh(opts)
  opts = opts or {}
  H.stop_servers()
  vim.cmd('silent! %bwipeout!')
  H.unload()
  H.project = H.tempdir('project')
  vim.fn.mkdir(H.project .. '/.git', 'p') -- a git root, as the plugin finds it
  vim.fn.chdir(H.project)
  H.db = H.tempdir('db') .. '/planwire.db'
  local planwire = require('planwire')
  planwire.setup(vim.tbl_deep_extend('force', {
    cmd = { H.bin, '--stdio' },
    db_path = H.db,
    tool = 'script',
    model = 'demo',
    init_options = { stopGraceMs = 1000 },
  }, opts))
  return planwire
end

--- Makes `dir` a real git repository (branch `main`, one empty commit) with `branches` in it:
--- the server looks a ticket's branch up in the root's repository.
--- @param dir string
--- @param branches string[]
function H.git_branches(dir, branches)
  local function git(args)
    local cmd = vim.list_extend({ 'git', '-c', 'user.name=t', '-c', 'user.email=t@t', '-C', dir }, args)
    local r = vim.system(cmd, { env = { GIT_CONFIG_GLOBAL = '/dev/null' } }):wait()
    assert(r.code == 0, ('git %s: %s'):format(table.concat(args, ' '), r.stderr))
  end
  vim.fn.delete(dir .. '/.git', 'rf')
  git({ 'init', '-q', '-b', 'main' })
  git({ 'commit', '-q', '--allow-empty', '-m', 'initial' })
  for _, b in ipairs(branches) do
    git({ 'branch', b })
  end
end

--- A synchronous request through the plugin's client (starts the server when needed).
function H.request(method, params, timeout)
  local err, result = require('planwire.client').request_sync(method, params, timeout or H.TIMEOUT)
  if err then
    error(method .. ' failed: ' .. vim.inspect(err), 2)
  end
  return result
end

--- Creates a ticket in the current project directly over the protocol.
function H.create_ticket(title, description, model)
  local t = H.request('planwire/createTicket', {
    root = H.project,
    title = title,
    description = description or '',
    tool = 'script',
    model = model or 'demo',
  })
  require('planwire.client').state.last_ticket[H.project] = t.id
  require('planwire.client').on_ticket(t)
  return t
end

--- The ticket as the plugin knows it (kept current by planwire/ticketChanged).
function H.ticket(id)
  return require('planwire.client').state.tickets[id]
end

--- Waits until the plugin knows ticket `id` has one of the statuses.
function H.wait_status(id, statuses, timeout, buf)
  if type(statuses) == 'string' then
    statuses = { statuses }
  end
  return H.wait('ticket ' .. id .. ' status in {' .. table.concat(statuses, ',') .. '}', function()
    local t = H.ticket(id)
    return t and vim.tbl_contains(statuses, t.status) and t
  end, timeout, function()
    local t = H.ticket(id)
    return 'ticket: ' .. vim.inspect(t and t.status) .. (buf and ('\nbuffer:\n' .. H.text(buf)) or '')
  end)
end

--- The buffer named `name`, or nil.
function H.find_buf(name)
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(b) == name then
      return b
    end
  end
end

--- Non-blank lines that appear more than once.
function H.duplicates(lines)
  local seen, dups = {}, {}
  for _, l in ipairs(lines) do
    if vim.trim(l) ~= '' then
      if seen[l] then
        table.insert(dups, l)
      end
      seen[l] = true
    end
  end
  return dups
end

--- Replaces vim.ui.input / vim.ui.select for the duration of a test; returns a restore function.
--- `inputs`: list of strings (or functions(opts) -> string) answered in order; `picks`: list of
--- functions(items, opts) -> item.
function H.stub_ui(inputs, picks)
  local orig_input, orig_select = vim.ui.input, vim.ui.select
  local calls = { input = {}, select = {} }
  inputs, picks = inputs or {}, picks or {}
  vim.ui.input = function(o, on_confirm)
    table.insert(calls.input, o)
    local v = table.remove(inputs, 1)
    if type(v) == 'function' then
      v = v(o) -- e.g. accept the default: function(o) return o.default end
    end
    vim.schedule(function()
      on_confirm(v)
    end)
  end
  vim.ui.select = function(items, o, on_choice)
    table.insert(calls.select, { items = items, opts = o })
    local pick = table.remove(picks, 1)
    local choice = pick and pick(items, o) or nil
    vim.schedule(function()
      on_choice(choice, choice and vim.fn.index(items, choice) + 1 or nil)
    end)
  end
  return function()
    vim.ui.input, vim.ui.select = orig_input, orig_select
  end, calls
end

--- Plans ticket `id` with `:Planwire plan`, waits until it is planned and its transcript shows the
--- plan, the ticket's usage and the run's timing; returns the transcript buffer.
function H.plan(id)
  vim.cmd('Planwire plan ' .. id)
  local buf = api.nvim_get_current_buf()
  H.wait_status(id, 'planned', nil, buf)
  H.wait('the plan, the ticket\'s usage and the run\'s timing', function()
    local text = H.text(buf)
    return text:find('\n# Plan: ', 1, true) and text:find('\n_all runs of the ticket: ', 1, true)
      and text:find('\n_took ', 1, true)
  end, nil, function()
    return H.text(buf)
  end)
  return buf
end

--- Polls `fn()` (which may make requests) until it is truthy; fails with `what` on timeout.
function H.poll(what, fn, timeout)
  local deadline = vim.uv.now() + (timeout or H.TIMEOUT)
  while true do
    local v = fn()
    if v then
      return v
    end
    if vim.uv.now() > deadline then
      error('timed out waiting for ' .. what, 2)
    end
    vim.wait(50)
  end
end

--- Writes a `script` planner file (JSON lines) under the run's temp root; returns its path.
function H.script(name, lines)
  local path = H.tempdir('script') .. '/' .. name .. '.jsonl'
  local out = {}
  for i, l in ipairs(lines) do
    out[i] = vim.json.encode(l)
  end
  vim.fn.writefile(out, path)
  return path
end

H.SESSION = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee'

local function claude_line(v, delay)
  return { out = vim.json.encode(v), delayMs = delay or 20 }
end

--- A Claude stream (as the `script` planner replays it) that ends with a plan.
--- opts: title, criteria (list), deltas (text pieces streamed before the stored text), gate (a
--- path: after `gate_after` pieces, waits until it exists), before (directives first, e.g.
--- `{ spawn = {...} }`), cost.
function H.claude_script(name, opts)
  opts = opts or {}
  local plan = vim.json.encode({ title = opts.title or 'A plan', description = opts.description or '## Steps\n1. Do it.',
    acceptanceCriteria = opts.criteria or { 'it works' }, openQuestions = {}, dependencies = {} })
  local pieces = vim.deepcopy(opts.deltas or {})
  local whole = table.concat(pieces) .. (opts.text and opts.text or '') .. '\n\n<planwire-plan>' .. plan .. '</planwire-plan>'
  local lines = { { format = 'claude' } }
  vim.list_extend(lines, opts.before or {})
  table.insert(lines, claude_line({ type = 'system', subtype = 'init', session_id = H.SESSION, tools = { 'Read' },
    permissionMode = 'plan' }))
  for i, piece in ipairs(pieces) do
    table.insert(lines, claude_line({ type = 'stream_event', session_id = H.SESSION, parent_tool_use_id = vim.NIL,
      event = { type = 'content_block_delta', index = 0, delta = { type = 'text_delta', text = piece } } }))
    if opts.gate and i == opts.gate_after then
      table.insert(lines, { awaitFile = opts.gate })
    end
  end
  table.insert(lines, claude_line({ type = 'assistant', session_id = H.SESSION, parent_tool_use_id = vim.NIL,
    message = { id = 'msg_1', role = 'assistant', content = { { type = 'text', text = whole } } } }))
  table.insert(lines, claude_line({ type = 'result', subtype = 'success', is_error = false, session_id = H.SESSION,
    result = whole, total_cost_usd = opts.cost or 0.01, usage = { input_tokens = 10, output_tokens = 5 } }))
  table.insert(lines, { exit = 0 })
  return H.script(name, lines), whole
end

--- Makes `dir` a git work tree with one commit (a fresh `.git`).
function H.git_init(dir)
  vim.fn.delete(dir .. '/.git', 'rf')
  vim.fn.writefile({ 'fn main() {}' }, dir .. '/main.rs')
  for _, argv in ipairs({
    { 'git', 'init', '-q' },
    { 'git', 'add', '-A' },
    { 'git', '-c', 'user.email=t@example.com', '-c', 'user.name=t', 'commit', '-q', '-m', 'init' },
  }) do
    local r = vim.system(argv, { cwd = dir, text = true }):wait(20000)
    assert(r.code == 0, table.concat(argv, ' ') .. ': ' .. tostring(r.stderr))
  end
end

--- The highlight groups of row `row` (1-based) in namespace `ns`, with their start columns.
function H.highlights(buf, ns, row)
  local out = {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, { row - 1, 0 }, { row - 1, -1 }, { details = true })) do
    table.insert(out, { col = m[3], group = m[4].hl_group })
  end
  return out
end

--- The 1-based row of the first line of `buf` matching `pattern`, and the line.
function H.row_of(buf, pattern)
  for i, l in ipairs(H.lines(buf)) do
    if l:find(pattern) then
      return i, l
    end
  end
end

--- Notifications so far whose message matches `pattern` (a Lua pattern).
function H.notified(pattern)
  for _, n in ipairs(_G.planwire_test_notifications) do
    if tostring(n.msg):find(pattern) then
      return n
    end
  end
end

return H
