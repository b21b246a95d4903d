--- The planwire server as a Neovim LSP client: start, requests, notifications, shared state.
local M = {}

local api = vim.api

--- Shared state, fed by responses and notifications.
M.state = {
  client_id = nil, --- @type integer?
  initialized = false,
  init_result = nil, --- @type table? the `initialize` result
  tickets = {}, --- @type table<integer, table> ticket id -> ticket
  runs = {}, --- @type table<integer, table> run id -> run
  questions = {}, --- @type table<integer, table> question id -> question
  last_ticket = {}, --- @type table<string, integer> root -> id of the ticket created last
  last_breakdown = {}, --- @type table<string, integer> root -> id of the breakdown run started last
  links = {}, --- @type table<string, table[]> root -> linked projects (last listed)
  memory = {}, --- @type table<string, table> root -> last planwire/memory/list result
  last_error = nil, --- @type string?
}

local has_011 = vim.fn.has('nvim-0.11') == 1

-- Client methods are called with `:` from 0.11 on, with `.` before.
local function call(c, name, ...)
  if has_011 then
    return c[name](c, ...)
  end
  return c[name](...)
end
M.call = call

local queue = {} --- @type fun(client: vim.lsp.Client?, err: string?)[]

local function config()
  return require('planwire').config
end

--- Notifies the user, prefixed with the plugin's name.
function M.notify(msg, level)
  vim.notify('planwire: ' .. msg, level or vim.log.levels.INFO, { title = 'planwire' })
end

--- Formats a JSON-RPC error (or anything) as one line.
function M.format_error(err)
  if type(err) == 'table' then
    local kind = type(err.data) == 'table' and err.data.kind or nil
    local msg = err.message or vim.inspect(err)
    return kind and (msg .. ' (' .. kind .. ')') or msg
  end
  return tostring(err)
end

--- The project root of a buffer: the git root of its file, else the cwd (absolute).
--- A planwire:// buffer keeps the root it was opened for.
--- @param bufnr integer?
--- @return string
function M.root(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local ok, kept = pcall(api.nvim_buf_get_var, bufnr, 'planwire_root')
  if ok and type(kept) == 'string' and kept ~= '' then
    return kept
  end
  local name = api.nvim_buf_get_name(bufnr)
  local dir
  if name ~= '' and not name:match('^%a[%w+.-]*://') then
    dir = vim.fs.dirname(vim.fn.fnamemodify(name, ':p'))
  end
  if not dir or vim.fn.isdirectory(dir) == 0 then
    dir = vim.fn.getcwd()
  end
  local root = vim.fs.root(dir, '.git') or vim.fn.getcwd()
  root = vim.fn.fnamemodify(root, ':p'):gsub('/+$', '')
  return root == '' and '/' or root
end

--- The running client, if any.
--- @return vim.lsp.Client?
function M.get()
  if M.state.client_id then
    local c = vim.lsp.get_client_by_id(M.state.client_id)
    if c and not call(c, 'is_stopped') then
      return c
    end
  end
  return nil
end

local function flush(client, err)
  local q = queue
  queue = {}
  for _, cb in ipairs(q) do
    local ok, e = pcall(cb, client, err)
    if not ok then
      M.notify(tostring(e), vim.log.levels.ERROR)
    end
  end
end

local function handlers()
  local function wrap(fn)
    return function(err, params, ctx)
      if err then
        return
      end
      local ok, e = pcall(fn, params or {}, ctx)
      if not ok then
        M.notify('handler ' .. ctx.method .. ': ' .. tostring(e), vim.log.levels.ERROR)
      end
    end
  end
  return {
    ['planwire/transcript'] = wrap(function(p)
      require('planwire.transcript').on_events(p.ticketId, p.runId, p.events or {})
    end),
    ['planwire/delta'] = wrap(function(p)
      require('planwire.transcript').on_delta(p.ticketId, p.runId, p.agentRunId, p.kind, p.text, p.offset)
    end),
    ['planwire/ticketChanged'] = wrap(function(p)
      M.on_ticket(p.ticket)
    end),
    ['planwire/runChanged'] = wrap(function(p)
      M.on_run(p.run)
    end),
    ['planwire/question'] = wrap(function(p)
      require('planwire.questions').on_question(p.ticketId, p.runId, p.question)
    end),
  }
end

--- How many tickets this Neovim knows of (listed, opened or changed since the server
--- started) wait for an answer; only those of `root` when given.
function M.needs_input(root)
  local n = 0
  for _, t in pairs(M.state.tickets) do
    if t.status == 'needs_input' and (root == nil or t.root == root) then
      n = n + 1
    end
  end
  return n
end

local shown_needs_input = 0

--- Redraws status lines when the count of tickets needing input changed (for
--- `require('planwire').statusline()`).
function M.needs_input_changed()
  local n = M.needs_input()
  if n ~= shown_needs_input then
    shown_needs_input = n
    vim.schedule(function()
      vim.cmd('redrawstatus!')
    end)
  end
end

--- Records a ticket the server sent and updates every view of it.
function M.on_ticket(ticket)
  if type(ticket) ~= 'table' or not ticket.id then
    return
  end
  M.state.tickets[ticket.id] = ticket
  for _, q in ipairs(ticket.openQuestions or {}) do
    M.state.questions[q.id] = q
  end
  M.needs_input_changed()
  require('planwire.transcript').on_ticket(ticket)
  require('planwire.tickets').on_ticket(ticket)
  if package.loaded['planwire.edit'] then
    require('planwire.edit').on_ticket(ticket)
  end
end

local ENDED = { completed = true, failed = true, cancelled = true, interrupted = true }

--- Records a run the server sent and updates the transcript of its ticket (or its breakdown
--- buffer: a breakdown run has no ticket, `ticketId` is nil).
function M.on_run(run)
  if type(run) ~= 'table' or not run.id then
    return
  end
  local before = M.state.runs[run.id]
  M.state.runs[run.id] = run
  require('planwire.transcript').on_run(run)
  require('planwire.tickets').on_run(run)
  if run.kind == 'breakdown' and ENDED[run.status] and not (before and ENDED[before.status]) then
    local msg = ('breakdown (run %d) %s'):format(run.id, run.status)
    if type(run.failure) == 'table' and run.failure.message then
      msg = msg .. ': ' .. run.failure.message
    elseif run.status == 'completed' then
      msg = msg .. ': its tickets are in :Planwire tickets'
    end
    M.notify(msg, run.status == 'completed' and vim.log.levels.INFO or vim.log.levels.WARN)
  end
end

--- Starts the server when it is not running, then calls `cb(client)` once it is initialized
--- (or `cb(nil, err)` when it cannot start).
--- @param cb fun(client: vim.lsp.Client?, err: string?)
function M.with_client(cb)
  local c = M.get()
  if c and M.state.initialized then
    return cb(c)
  end
  table.insert(queue, cb)
  if c then
    return -- initializing; the queue runs from on_init
  end
  local cfg = config()
  local cmd = require('planwire').server_cmd()
  if type(cmd) ~= 'table' or not cmd[1] or vim.fn.executable(cmd[1]) ~= 1 then
    M.state.last_error = 'server binary not executable: ' .. tostring(type(cmd) == 'table' and cmd[1] or cmd)
    return flush(nil, M.state.last_error .. ' (see :checkhealth planwire)')
  end
  local init_options = vim.deepcopy(cfg.init_options or {})
  if cfg.db_path then
    init_options.dbPath = vim.fn.fnamemodify(vim.fn.expand(cfg.db_path), ':p')
  end
  M.state.initialized = false
  local root = M.root()
  local config = {
    name = 'planwire',
    cmd = cmd,
    root_dir = root,
    init_options = next(init_options) and init_options or vim.empty_dict(),
    capabilities = vim.lsp.protocol.make_client_capabilities(),
    handlers = handlers(),
    on_init = function(client, result)
      M.state.initialized = true
      M.state.init_result = result
      flush(client)
      vim.schedule(function()
        require('planwire.transcript').reattach_all()
        require('planwire.tickets').refresh_all()
      end)
    end,
    on_exit = function(code, signal, client_id)
      vim.schedule(function()
        if M.state.client_id == client_id then
          M.state.client_id = nil
          M.state.initialized = false
          if code ~= 0 then
            M.state.last_error = ('server exited with code %s, signal %s'):format(code, signal)
            M.notify(M.state.last_error .. ' (see :LspLog); the next command restarts it', vim.log.levels.WARN)
          end
          flush(nil, 'server exited')
        end
      end)
    end,
  }
  local id
  if has_011 then
    id = vim.lsp.start(config, {
      attach = false, -- the server plans tickets; it has nothing to do with buffers
      reuse_client = function(client)
        -- only the client this module started (never one of an earlier load of the plugin)
        return client.name == 'planwire' and client.id == M.state.client_id
      end,
    })
  else
    id = vim.lsp.start_client(config) -- 0.10: vim.lsp.start always attaches a buffer
  end
  if not id then
    M.state.last_error = 'could not start ' .. table.concat(cmd, ' ')
    return flush(nil, M.state.last_error)
  end
  M.state.client_id = id
end

--- Sends a request; `cb(err, result)` runs on the main loop. Errors without a callback are shown.
--- @param method string
--- @param params table
--- @param cb fun(err: any, result: any)?
function M.request(method, params, cb)
  -- Params are named: an empty Lua table would be encoded as `[]`, which the server refuses.
  if params == nil or (type(params) == 'table' and next(params) == nil) then
    params = vim.empty_dict()
  end
  cb = cb
    or function(err)
      if err then
        M.notify(method .. ': ' .. M.format_error(err), vim.log.levels.ERROR)
      end
    end
  M.with_client(function(client, start_err)
    if not client then
      return cb({ message = start_err or 'server not running' })
    end
    local ok = call(client, 'request', method, params, function(err, result)
      cb(err, result)
    end)
    if not ok then
      cb({ message = 'server not running' })
    end
  end)
end

--- Sends a request and waits for its answer (for `:w` and :checkhealth).
--- @return any err, any result
function M.request_sync(method, params, timeout_ms)
  local done, e, r = false, nil, nil
  M.request(method, params, function(err, result)
    done, e, r = true, err, result
  end)
  if not vim.wait(timeout_ms or 10000, function()
    return done
  end, 10) then
    return { message = method .. ' timed out' }, nil
  end
  return e, r
end

--- The `capabilities.experimental.planwire` of the running server, if any.
function M.server_capabilities()
  local r = M.state.init_result
  return r and r.capabilities and r.capabilities.experimental and r.capabilities.experimental.planwire
end

--- Stops the server (tests, :Planwire restart).
function M.stop(force)
  local c = M.get()
  if c then
    call(c, 'stop', force)
  end
end

--- Fetches one ticket (ticket, messages, questions, runs) and records it.
function M.get_ticket(id, cb)
  M.request('planwire/getTicket', { ticketId = id }, function(err, result)
    if not err and result and result.ticket then
      M.state.tickets[result.ticket.id] = result.ticket
      M.needs_input_changed()
      for _, run in ipairs(result.runs or {}) do
        M.state.runs[run.id] = run
      end
      for _, q in ipairs(result.questions or {}) do
        M.state.questions[q.id] = q
      end
    end
    if cb then
      cb(err, result)
    end
  end)
end

return M
