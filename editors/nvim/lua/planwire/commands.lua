--- `:Planwire {sub}`: new, plan, stop, retry, answer, delete, tickets, transcript, status,
--- breakdown, link, unlink, links, memory; and for a ticket's living plan: edit, set, feedback,
--- versions, diff, export, handoff.
local M = {}

local api = vim.api
local client = require('planwire.client')

local function cfg()
  return require('planwire').config
end

local function notify_err(what, err)
  client.notify(what .. ': ' .. client.format_error(err), vim.log.levels.ERROR)
end

--- Resolves the ticket a command is about: the explicit id, else the ticket of the current
--- transcript (or tickets-buffer line), else the ticket created last in this project.
--- @param arg string|integer|nil
--- @param cb fun(id: integer)
function M.resolve_ticket(arg, cb)
  if arg ~= nil and arg ~= '' then
    local id = tonumber(arg)
    if not id then
      return client.notify('not a ticket id: ' .. tostring(arg), vim.log.levels.ERROR)
    end
    return cb(id)
  end
  local transcript = require('planwire.transcript')
  local id = transcript.ticket_of(0) or require('planwire.tickets').ticket_at_cursor() or transcript.ticket_at_cursor()
    or vim.b.planwire_ticket -- an edit, feedback or plan version buffer
  if id then
    return cb(id)
  end
  local root = client.root()
  if client.state.last_ticket[root] then
    return cb(client.state.last_ticket[root])
  end
  client.request('planwire/listTickets', { root = root }, function(err, result)
    if err then
      return notify_err('listTickets', err)
    end
    local best
    for _, t in ipairs(result and result.tickets or {}) do
      client.state.tickets[t.id] = t
      if not best or t.id > best then
        best = t.id
      end
    end
    if not best then
      return client.notify('no ticket in ' .. root .. ' yet: create one with :Planwire new', vim.log.levels.WARN)
    end
    cb(best)
  end)
end

-- new ------------------------------------------------------------------------------------------

local new_count = 0

--- Creates the ticket from a description buffer (its BufWriteCmd).
local function write_description(buf)
  local root, title = vim.b[buf].planwire_root, vim.b[buf].planwire_title
  local description = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n'):gsub('%s+$', '')
  local fields = require('planwire.edit').new_ticket_fields(buf) -- setup()'s, or set with :Planwire set
  local err, ticket = client.request_sync('planwire/createTicket', {
    root = root,
    title = title,
    description = description,
    tool = fields.tool,
    model = fields.model,
    variant = fields.variant,
    branch = fields.branch,
  }, 20000)
  if err or type(ticket) ~= 'table' then
    notify_err('createTicket', err or { message = 'no ticket returned' })
    return
  end
  vim.bo[buf].modified = false
  client.state.last_ticket[root] = ticket.id
  client.on_ticket(ticket)
  client.notify(('ticket %d created: %s'):format(ticket.id, ticket.title))
  local win = vim.fn.win_findbuf(buf)[1]
  vim.schedule(function()
    if win and api.nvim_win_is_valid(win) then
      api.nvim_set_current_win(win)
    end
    require('planwire.transcript').open(ticket.id, { win = win and api.nvim_win_is_valid(win) and win or nil })
    if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end)
end

--- Opens the description buffer of a new ticket; `:w` creates the ticket.
function M.open_description(root, title)
  new_count = new_count + 1
  local buf = api.nvim_create_buf(true, false)
  api.nvim_buf_set_name(buf, ('planwire://new/%d'):format(new_count))
  vim.bo[buf].buftype = 'acwrite'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].planwire_root = root
  vim.b[buf].planwire_title = title
  api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      write_description(buf)
    end,
  })
  api.nvim_win_set_buf(0, buf)
  client.notify(('describe "%s", then :w to create the ticket (:Planwire set branch {name} first gives it a branch)')
    :format(title))
  return buf
end

--- :Planwire new — asks for a title, then opens the description buffer.
function M.new(title)
  local root = client.root()
  local function go(t)
    t = t and vim.trim(t) or ''
    if t == '' then
      return
    end
    M.open_description(root, t)
  end
  if title and vim.trim(title) ~= '' then
    return go(title)
  end
  vim.ui.input({ prompt = 'Ticket title: ' }, go)
end

-- plan, retry, stop ------------------------------------------------------------------------------

--- :Planwire plan [id] — opens the transcript and starts planning.
function M.plan(arg, opts)
  opts = opts or {}
  M.resolve_ticket(arg, function(id)
    require('planwire.transcript').open(id, { split = opts.split })
    local params = { ticketId = id, fresh = opts.fresh or nil, retryOf = opts.retry_of }
    client.request('planwire/plan', params, function(err, result)
      if err then
        return notify_err('plan', err)
      end
      client.notify(('planning ticket %d (run %d)'):format(result.ticketId or id, result.runId or -1))
    end)
  end)
end

--- :Planwire retry [id] — plans again with the tool, model and variant of the last run.
function M.retry(arg)
  M.resolve_ticket(arg, function(id)
    client.get_ticket(id, function(err, result)
      if err then
        return notify_err('getTicket', err)
      end
      local last = result.runs and result.runs[1]
      M.plan(id, { retry_of = last and last.id or nil })
    end)
  end)
end

--- Stops a run by id (a breakdown has no ticket to stop it by).
function M.stop_run(run_id)
  client.request('planwire/stop', { runId = run_id }, function(err, result)
    if err then
      return notify_err('stop', err)
    end
    client.notify(result and result.stopped and ('run %d stopped'):format(run_id) or ('run %d is not active'):format(run_id))
  end)
end

--- :Planwire stop [id] — the ticket's active run; without an id in a breakdown buffer (or,
--- outside any ticket's buffer, while a breakdown of this project runs) the breakdown.
function M.stop(arg)
  if arg == nil or arg == '' then
    local transcript = require('planwire.transcript')
    local run_id = transcript.run_of(0)
    if run_id then
      return M.stop_run(run_id)
    end
    if not (transcript.ticket_of(0) or require('planwire.tickets').ticket_at_cursor()) then
      local bid = client.state.last_breakdown[client.root()]
      local run = bid and client.state.runs[bid]
      if bid and (not run or run.status == 'queued' or run.status == 'running') then
        return M.stop_run(bid)
      end
    end
  end
  M.resolve_ticket(arg, function(id)
    client.request('planwire/stop', { ticketId = id }, function(err, result)
      if err then
        return notify_err('stop', err)
      end
      client.notify(result and result.stopped and ('ticket %d stopped'):format(id) or ('ticket %d has no active run'):format(id))
    end)
  end)
end

-- delete -----------------------------------------------------------------------------------------

--- Asks yes or no with vim.ui.select; `on_yes()` only on yes.
function M.confirm(prompt, yes_label, on_yes)
  vim.ui.select({ yes_label, 'Cancel' }, { prompt = prompt, kind = 'planwire.confirm' }, function(choice)
    if choice == yes_label then
      on_yes()
    else
      client.notify('cancelled')
    end
  end)
end

--- Forgets a deleted ticket: state, tickets buffer, its buffers.
function M.forget_ticket(id)
  client.state.tickets[id] = nil
  client.needs_input_changed()
  for qid, q in pairs(client.state.questions) do
    if q.ticketId == id then
      client.state.questions[qid] = nil
    end
  end
  for root, last in pairs(client.state.last_ticket) do
    if last == id then
      client.state.last_ticket[root] = nil
    end
  end
  -- the server drops the dependencies on it too (and sends no ticketChanged for that)
  local tickets = require('planwire.tickets')
  local lists = { client.state.tickets, tickets.view and tickets.view.tickets or {} }
  for _, list in ipairs(lists) do
    for _, t in pairs(list) do
      if type(t.dependsOn) == 'table' and vim.tbl_contains(t.dependsOn, id) then
        t.dependsOn = vim.tbl_filter(function(d)
          return d ~= id
        end, t.dependsOn)
      end
    end
  end
  if tickets.view then
    tickets.view.tickets[id] = nil
    tickets.render()
  end
  local transcript = require('planwire.transcript')
  -- its transcript, edit, feedback and plan version buffers
  local prefixes = { transcript.bufname(id), ('planwire://edit/%d'):format(id), ('planwire://feedback/%d'):format(id),
    ('planwire://plan/%d/v'):format(id) }
  for _, b in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(b)
    for i, prefix in ipairs(prefixes) do
      if name == prefix or (i == #prefixes and vim.startswith(name, prefix)) then
        pcall(api.nvim_buf_delete, b, { force = true })
      end
    end
  end
  transcript.views[id] = nil
  for _, v in pairs(transcript.run_views) do
    if v.tickets[id] then
      v.tickets[id] = nil
      transcript.sync(v)
    end
  end
end

--- :Planwire delete [id] — deletes a ticket with its runs, transcript and questions, after a
--- confirmation (none with !). `cb(err, result)` runs when done (tests).
function M.delete(arg, force, cb)
  M.resolve_ticket(arg, function(id)
    local function go()
      client.request('planwire/deleteTicket', { ticketId = id }, function(err, result)
        if err then
          notify_err('deleteTicket', err)
        else
          M.forget_ticket(id)
          client.notify(('ticket %d deleted'):format(id))
        end
        if cb then
          cb(err, result)
        end
      end)
    end
    if force then
      return go()
    end
    local t = client.state.tickets[id]
    local what = t and t.title and ('#%d "%s"'):format(id, t.title) or ('#' .. id)
    M.confirm(('Delete ticket %s with its runs, transcript and questions?'):format(what), 'Delete', go)
  end)
end

-- breakdown -------------------------------------------------------------------------------------

local breakdown_count = 0

--- Starts `planwire/breakdown` and opens its progress buffer (in `win`, else the current one).
--- @return any err, integer? run_id
function M.start_breakdown(root, description, opts)
  opts = opts or {}
  local c = cfg()
  local err, result = client.request_sync('planwire/breakdown', {
    root = root,
    description = description,
    tool = c.tool,
    model = c.model,
  }, 20000)
  if err or type(result) ~= 'table' or not result.runId then
    notify_err('breakdown', err or { message = 'no run returned' })
    return err or { message = 'no run returned' }, nil
  end
  client.state.last_breakdown[root] = result.runId
  client.notify(('breaking down the initiative (run %d); :Planwire stop stops it'):format(result.runId))
  require('planwire.transcript').open_run(result.runId, { win = opts.win, description = description, root = root })
  return nil, result.runId
end

--- Opens the description buffer of an initiative; `:w` starts the breakdown.
function M.open_breakdown_description(root)
  breakdown_count = breakdown_count + 1
  local buf = api.nvim_create_buf(true, false)
  api.nvim_buf_set_name(buf, ('planwire://breakdown/new/%d'):format(breakdown_count))
  vim.bo[buf].buftype = 'acwrite'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].planwire_root = root
  api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      local description = vim.trim(table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))
      if description == '' then
        return client.notify('describe the initiative first', vim.log.levels.WARN)
      end
      local win = vim.fn.win_findbuf(buf)[1]
      vim.bo[buf].modified = false -- written: the window may now show the breakdown instead
      local err = M.start_breakdown(root, description, { win = win })
      if err then
        vim.bo[buf].modified = true
        return
      end
      vim.schedule(function()
        if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
          pcall(api.nvim_buf_delete, buf, { force = true })
        end
      end)
    end,
  })
  api.nvim_win_set_buf(0, buf)
  client.notify('describe the initiative, then :w to break it down into tickets')
  return buf
end

--- :Planwire breakdown [description] — with words, starts at once; else opens a description buffer.
function M.breakdown(description)
  local root = client.root()
  description = description and vim.trim(description) or ''
  if description ~= '' then
    return M.start_breakdown(root, description)
  end
  return M.open_breakdown_description(root)
end

-- status -------------------------------------------------------------------------------------

--- Formats a `planwire/status` result as lines.
function M.status_lines(s)
  local lines = {}
  local store = s.store or {}
  table.insert(lines, ('store: %s (schema %s, %s tickets, %s runs)'):format(
    store.path or '?', tostring(store.schemaVersion), tostring(store.tickets), tostring(store.runs)))
  local caps = client.server_capabilities()
  if caps and caps.sandbox then
    table.insert(lines, 'sandbox: ' .. tostring(caps.sandbox))
  end
  if #(s.activeRuns or {}) == 0 then
    table.insert(lines, 'no active run')
  end
  for _, run in ipairs(s.activeRuns or {}) do
    local of = run.ticketId and ('of ticket ' .. tostring(run.ticketId)) or ('(' .. tostring(run.kind or 'breakdown') .. ')')
    table.insert(lines, ('run %d %s: %s (%s%s)'):format(run.id, of, tostring(run.status), run.tool or '?',
      run.model and (' ' .. run.model) or ''))
  end
  for _, p in ipairs(s.planners or {}) do
    table.insert(lines, ('planner %s: %s%s'):format(p.tool,
      p.found and (p.supported and 'ok' or 'unsupported') or 'not found',
      p.version and (' ' .. p.version) or ''))
  end
  return lines
end

--- :Planwire status [id]
function M.status(arg)
  local params = {}
  if arg and arg ~= '' then
    params.ticketId = tonumber(arg)
  end
  client.request('planwire/status', params, function(err, result)
    if err then
      return notify_err('status', err)
    end
    M.last_status = result
    client.notify(table.concat(M.status_lines(result), '\n'))
  end)
end

-- dispatch -------------------------------------------------------------------------------------

M.subcommands = {
  new = function(args)
    M.new(table.concat(args, ' '))
  end,
  plan = function(args, bang)
    M.plan(args[1], { fresh = bang })
  end,
  stop = function(args)
    M.stop(args[1])
  end,
  retry = function(args)
    M.retry(args[1])
  end,
  answer = function(args, bang)
    M.resolve_ticket(args[1], function(id)
      require('planwire.questions').answer(id, { dismiss = bang })
    end)
  end,
  tickets = function()
    require('planwire.tickets').open()
  end,
  transcript = function(args)
    M.resolve_ticket(args[1], function(id)
      require('planwire.transcript').open(id)
    end)
  end,
  status = function(args)
    M.status(args[1])
  end,
  delete = function(args, bang)
    M.delete(args[1], bang)
  end,
  breakdown = function(args)
    M.breakdown(table.concat(args, ' '))
  end,
  link = function(args)
    require('planwire.links').link(args[1], args[2], table.concat(vim.list_slice(args, 3), ' '))
  end,
  unlink = function(args)
    require('planwire.links').unlink(args[1])
  end,
  links = function()
    require('planwire.links').list()
  end,
  edit = function(args)
    M.resolve_ticket(args[1], function(id)
      require('planwire.edit').edit(id)
    end)
  end,
  set = function(args, bang)
    require('planwire.edit').set(args, bang)
  end,
  feedback = function(args)
    M.resolve_ticket(args[1], function(id)
      require('planwire.edit').feedback(id)
    end)
  end,
  versions = function(args)
    M.resolve_ticket(args[1], function(id)
      require('planwire.plans').versions(id)
    end)
  end,
  diff = function(args)
    -- [id] [a b]: one word is the ticket, two are versions, three are both
    local id, a, b = args[1], args[2], args[3]
    if #args == 2 then
      id, a, b = nil, args[1], args[2]
    end
    a, b = tonumber(a or ''), tonumber(b or '')
    if #args >= 2 and not (a and b) then
      return client.notify('usage: :Planwire diff [id] [version version]', vim.log.levels.ERROR)
    end
    M.resolve_ticket(id, function(tid)
      require('planwire.plans').diff(tid, a, b)
    end)
  end,
  export = function(args, bang)
    require('planwire.plans').export(table.concat(args, ' '), bang)
  end,
  handoff = function(args)
    require('planwire.plans').handoff(args[1])
  end,
  memory = function(args)
    local memory = require('planwire.memory')
    local sub = args[1]
    if sub == 'add' then
      return memory.add(client.root(), table.concat(vim.list_slice(args, 2), ' '))
    elseif sub == 'remove' then
      return memory.remove(tonumber(args[2] or ''))
    elseif sub ~= nil then
      return client.notify('usage: :Planwire memory [add {text} | remove {id}]', vim.log.levels.ERROR)
    end
    memory.open()
  end,
}

local takes_id = { plan = true, stop = true, retry = true, answer = true, transcript = true, status = true, delete = true,
  edit = true, feedback = true, versions = true, diff = true }

--- Entry point of :Planwire.
function M.run(cmd)
  local args = vim.deepcopy(cmd.fargs)
  local sub = table.remove(args, 1) or 'tickets'
  local bang = cmd.bang
  if sub:sub(-1) == '!' then -- `:Planwire plan! 3` as well as `:Planwire! plan 3`
    sub, bang = sub:sub(1, -2), true
  end
  local fn = M.subcommands[sub]
  if not fn then
    return client.notify('unknown subcommand "' .. sub .. '"; try one of: ' .. table.concat(M.names(), ', '),
      vim.log.levels.ERROR)
  end
  fn(args, bang)
end

function M.names()
  local names = vim.tbl_keys(M.subcommands)
  table.sort(names)
  return names
end

--- Completion of :Planwire: subcommands, then known ticket ids.
function M.complete(arglead, cmdline, _)
  local words = vim.split(cmdline:gsub('^%s*%S+', '', 1), '%s+', { trimempty = true })
  local n = #words + ((arglead == '' ) and 1 or 0)
  if n <= 1 then
    return vim.tbl_filter(function(s)
      return vim.startswith(s, arglead)
    end, M.names())
  end
  local function matching(list)
    return vim.tbl_filter(function(s)
      return vim.startswith(s, arglead)
    end, list)
  end
  local sub = (words[1]:gsub('!$', ''))
  if sub == 'link' then
    return n == 2 and vim.fn.getcompletion(arglead, 'dir') or {}
  elseif sub == 'unlink' then
    return n == 2 and matching(require('planwire.links').cached_names()) or {}
  elseif sub == 'set' then
    local edit = require('planwire.edit')
    local at = tonumber(words[2] or '') and 3 or 2 -- the field's word, after an optional ticket id
    if n == 2 or n == at then
      return matching(edit.FIELDS)
    elseif n == at + 1 and words[at] == 'tool' then
      return matching(edit.planner_choices())
    end
    return {}
  elseif sub == 'handoff' then
    return n == 2 and matching(vim.tbl_keys(require('planwire.edit').IMPLEMENTERS)) or {}
  elseif sub == 'export' then
    return n == 2 and vim.fn.getcompletion(arglead, 'file') or {}
  elseif sub == 'memory' then
    if n == 2 then
      return matching({ 'add', 'remove' })
    elseif n == 3 and words[2] == 'remove' then
      return matching(require('planwire.memory').cached_entry_ids())
    end
    return {}
  end
  if n == 2 and takes_id[sub] then
    local ids = {}
    for id in pairs(client.state.tickets) do
      local s = tostring(id)
      if vim.startswith(s, arglead) then
        table.insert(ids, s)
      end
    end
    table.sort(ids, function(a, b)
      return tonumber(a) < tonumber(b)
    end)
    return ids
  end
  return {}
end

return M
