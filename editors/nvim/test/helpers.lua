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
--- `inputs`: list of strings answered in order; `picks`: list of functions(items, opts) -> item.
function H.stub_ui(inputs, picks)
  local orig_input, orig_select = vim.ui.input, vim.ui.select
  local calls = { input = {}, select = {} }
  inputs, picks = inputs or {}, picks or {}
  vim.ui.input = function(o, on_confirm)
    table.insert(calls.input, o)
    local v = table.remove(inputs, 1)
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

return H
