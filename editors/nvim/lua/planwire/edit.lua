--- Changing a ticket after it was created: `planwire://edit/<id>` holds its title and
--- description as markdown, and `:w` sends `planwire/updateTicket`; `:Planwire set {field}
--- [value]` sets one of title, tool, model, variant and branch (also in a new ticket's
--- description buffer, before `:w` creates it); `planwire://feedback/<id>` holds the changes
--- you ask of the plan, and `:w` sends `planwire/plan { ticketId, feedback }`. The server
--- refuses an edit while the ticket is being planned (-32010): the buffer keeps what you wrote.
local M = {}

local api = vim.api
local client = require('planwire.client')

M.FIELDS = { 'title', 'tool', 'model', 'variant', 'branch' }
M.IMPLEMENTERS = { claude = true, opencode = true, codex = true }

local TICKET_BUSY = -32010

--- Shows why a request about ticket `id` failed; a busy ticket gets what to do about it.
function M.report(what, id, err)
  if type(err) == 'table' and err.code == TICKET_BUSY then
    return client.notify(('ticket %d is being planned, so %s now: stop it first (:Planwire stop %d) or wait '
      .. 'until the run ends'):format(id, what, id), vim.log.levels.ERROR)
  end
  client.notify(what .. ': ' .. client.format_error(err), vim.log.levels.ERROR)
end

--- Title and description of an edit buffer's lines: the first non-blank line is the title (its
--- leading `#`s optional), the lines after it (less leading blank lines) the description.
function M.parse(lines)
  local i = 1
  while lines[i] and vim.trim(lines[i]) == '' do
    i = i + 1
  end
  local title = vim.trim(((lines[i] or ''):gsub('^%s*#+%s*', '')))
  local rest = vim.list_slice(lines, i + 1)
  while rest[1] and vim.trim(rest[1]) == '' do
    table.remove(rest, 1)
  end
  return title, (table.concat(rest, '\n'):gsub('%s+$', ''))
end

--- The lines of an edit buffer for a ticket.
function M.lines_of(ticket)
  local lines = { '# ' .. (tostring(ticket.title or ''):gsub('\n', ' ')), '' }
  vim.list_extend(lines, vim.split(ticket.description or '', '\n', { plain = true }))
  return lines
end

--- Makes `buf` a markdown buffer of ticket `id` whose `:w` runs `on_write(buf, id)`.
local function scratch(buf, id, on_write)
  vim.bo[buf].buftype = 'acwrite'
  vim.bo[buf].bufhidden = 'hide' -- a hidden buffer keeps what was written in it
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].planwire_ticket = id
  api.nvim_clear_autocmds({ event = 'BufWriteCmd', buffer = buf })
  api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      on_write(buf, id)
    end,
  })
end

local function find_or_create(name)
  local buf = require('planwire.transcript').find_buf(name)
  if not buf then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, name)
  end
  return buf
end

local function show(buf, win)
  win = win or api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) ~= buf then
    api.nvim_win_set_buf(win, buf)
  end
  api.nvim_set_current_win(win)
end

-- The edit buffer ------------------------------------------------------------------------------

local function write_edit(buf, id)
  local title, description = M.parse(api.nvim_buf_get_lines(buf, 0, -1, false))
  if title == '' then
    return client.notify('the first line is the ticket\'s title, and it must not be empty', vim.log.levels.ERROR)
  end
  local err, result = client.request_sync('planwire/updateTicket', { ticketId = id, title = title,
    description = description }, 20000)
  if err or type(result) ~= 'table' or not result.ticket then
    return M.report('its title and description cannot be changed', id, err or { message = 'no ticket returned' })
  end
  vim.bo[buf].modified = false
  client.on_ticket(result.ticket)
  client.notify(('ticket %d updated; :Planwire plan plans it again with the new text'):format(id))
end

--- Fills an edit buffer with the ticket as the server has it now.
local function load_edit(buf, id)
  vim.bo[buf].modifiable = false -- until it holds the ticket
  client.get_ticket(id, function(err, result)
    if not api.nvim_buf_is_valid(buf) then
      return
    end
    vim.bo[buf].modifiable = true
    if err or not result or not result.ticket then
      return client.notify('getTicket: ' .. client.format_error(err or { message = 'no ticket' }), vim.log.levels.ERROR)
    end
    local t = result.ticket
    vim.b[buf].planwire_root = t.root
    api.nvim_buf_set_lines(buf, 0, -1, false, M.lines_of(t))
    vim.bo[buf].modified = false
    if t.status == 'planning' or t.status == 'queued' then
      client.notify(('ticket %d is being planned: :w is refused until the run ends'):format(id), vim.log.levels.WARN)
    end
  end)
end

local function setup_edit(buf, id)
  scratch(buf, id, write_edit)
  load_edit(buf, id)
end

--- :Planwire edit [id] — the ticket's title and description in `planwire://edit/<id>`.
function M.edit(id, opts)
  opts = opts or {}
  local name = ('planwire://edit/%d'):format(id)
  local existing = require('planwire.transcript').find_buf(name)
  local buf = find_or_create(name)
  if not existing or not vim.bo[buf].modified then
    setup_edit(buf, id)
  end
  show(buf, opts.win)
  client.notify(('edit the title (first line) and the description of ticket %d, then :w'):format(id))
  return buf
end

--- planwire/ticketChanged: an edit buffer with nothing unsaved shows the ticket as it is now.
function M.on_ticket(ticket)
  local buf = require('planwire.transcript').find_buf(('planwire://edit/%d'):format(ticket.id))
  if not buf or vim.bo[buf].modified or not vim.bo[buf].modifiable then
    return
  end
  local lines = M.lines_of(ticket)
  if not vim.deep_equal(lines, api.nvim_buf_get_lines(buf, 0, -1, false)) then
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modified = false
  end
end

--- BufReadCmd of planwire://edit/<id> (`:e!` reloads the ticket).
function M.on_read_edit(buf, name)
  local id = tonumber(tostring(name):match('^planwire://edit/(%d+)$'))
  if not id then
    return client.notify('not a ticket: ' .. tostring(name), vim.log.levels.ERROR)
  end
  setup_edit(buf, id)
end

-- :Planwire set ----------------------------------------------------------------------------------

--- The fields a new ticket's description buffer holds for createTicket, with setup()'s defaults.
function M.new_ticket_fields(buf)
  local c = require('planwire').config
  local fields = vim.b[buf].planwire_fields or {}
  local function value(v)
    return v ~= '' and v or nil
  end
  local tool = fields.tool ~= nil and value(fields.tool) or c.tool
  local model = c.model
  if fields.model ~= nil then
    model = value(fields.model)
  elseif fields.tool ~= nil and tool ~= c.tool then
    model = nil -- setup()'s model belongs to setup()'s tool
  end
  return { tool = tool, model = model, variant = value(fields.variant), branch = value(fields.branch) }
end

local function is_new_buffer(buf)
  return api.nvim_buf_get_name(buf):match('^planwire://new/%d+$') ~= nil
end

local function set_on_new(buf, field, value)
  if field == 'title' then
    if vim.trim(value) == '' then
      return client.notify('a ticket\'s title must not be empty', vim.log.levels.ERROR)
    end
    vim.b[buf].planwire_title = vim.trim(value)
  else
    local fields = vim.b[buf].planwire_fields or {}
    fields[field] = vim.trim(value)
    vim.b[buf].planwire_fields = fields
  end
  client.notify(('the new ticket\'s %s: %s (:w creates it)'):format(field, value ~= '' and vim.trim(value) or 'none'))
end

local function set_on_ticket(id, field, value, cb)
  local t = client.state.tickets[id] or {}
  local params = { ticketId = id, [field] = value }
  local note = ''
  if field == 'tool' and value ~= t.tool and t.model then
    params.model = '' -- the model belonged to the old planner
    note = (' (its model %s was for %s: :Planwire set model chooses one)'):format(t.model, tostring(t.tool))
  end
  client.request('planwire/updateTicket', params, function(err, result)
    if err or not result or not result.ticket then
      M.report(('its %s cannot be changed'):format(field), id, err or { message = 'no ticket returned' })
    else
      client.on_ticket(result.ticket)
      local now = result.ticket[field]
      client.notify(('ticket %d: %s %s%s'):format(id, field, now and ('set to ' .. tostring(now)) or 'cleared', note))
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- The planners the server found, for `:Planwire set tool`.
local function planner_choices()
  local caps = client.server_capabilities() or {}
  local out = {}
  for _, p in ipairs(caps.planners or {}) do
    if p.found then
      table.insert(out, p.tool)
    end
  end
  return out
end
M.planner_choices = planner_choices

--- Asks the value of `field` (current value `current`); `cb(value)`, '' to clear, nothing on cancel.
local function ask_value(field, current, what, cb)
  if field == 'tool' then
    local choices = planner_choices()
    if #choices == 0 then
      choices = { 'claude', 'opencode', 'codex', 'script' }
    end
    return vim.ui.select(choices, {
      prompt = ('Planner of %s'):format(what),
      kind = 'planwire.tool',
      format_item = function(tool)
        return tool == current and (tool .. ' (now)') or tool
      end,
    }, function(choice)
      if choice then
        cb(choice)
      end
    end)
  end
  local hint = field == 'title' and '' or ' (empty: none)'
  vim.ui.input({ prompt = ('%s of %s%s: '):format((field:gsub('^%l', string.upper)), what, hint),
    default = current or '' }, function(value)
    if value ~= nil then
      cb(value)
    end
  end)
end

--- :Planwire set [id] {field} [value] — with no value asks for it; with ! clears the field. In a
--- new ticket's description buffer it sets what `:w` creates the ticket with. `cb(err, result)`
--- runs when a ticket was changed (tests).
function M.set(args, clear, cb)
  args = vim.deepcopy(args or {})
  local id = tonumber(args[1] or '')
  if id then
    table.remove(args, 1)
  end
  local field = args[1]
  local value = #args > 1 and table.concat(vim.list_slice(args, 2), ' ') or nil
  if clear then
    value = ''
  end
  if field == nil then
    return vim.ui.select(M.FIELDS, { prompt = 'Set which field of the ticket?', kind = 'planwire.field' }, function(f)
      if f then
        M.set(vim.list_extend(id and { tostring(id) } or {}, { f }), clear, cb)
      end
    end)
  end
  if not vim.tbl_contains(M.FIELDS, field) then
    return client.notify(('not a field: %s (one of %s)'):format(field, table.concat(M.FIELDS, ', ')), vim.log.levels.ERROR)
  end
  local buf = api.nvim_get_current_buf()
  if not id and is_new_buffer(buf) then
    local fields = vim.b[buf].planwire_fields or {}
    local current = field == 'title' and vim.b[buf].planwire_title or fields[field]
    if value then
      return set_on_new(buf, field, value)
    end
    return ask_value(field, current, 'the new ticket', function(v)
      set_on_new(buf, field, v)
    end)
  end
  require('planwire.commands').resolve_ticket(id, function(tid)
    if value then
      return set_on_ticket(tid, field, value, cb)
    end
    local t = client.state.tickets[tid] or {}
    ask_value(field, t[field], ('ticket %d'):format(tid), function(v)
      set_on_ticket(tid, field, v, cb)
    end)
  end)
end

-- The feedback buffer ----------------------------------------------------------------------------

local function write_feedback(buf, id)
  local feedback = vim.trim(table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))
  if feedback == '' then
    return client.notify('write the changes you want to the plan first', vim.log.levels.WARN)
  end
  local err, result = client.request_sync('planwire/plan', { ticketId = id, feedback = feedback }, 20000)
  if err or type(result) ~= 'table' or not result.runId then
    return M.report('its plan cannot be changed', id, err or { message = 'no run returned' })
  end
  vim.bo[buf].modified = false
  client.notify(('planning ticket %d again with your changes (run %d)'):format(id, result.runId))
  local win = vim.fn.win_findbuf(buf)[1]
  vim.schedule(function()
    require('planwire.transcript').open(id, { win = win and api.nvim_win_is_valid(win) and win or nil })
    if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end)
end

--- :Planwire feedback [id] — `planwire://feedback/<id>`: write the changes you want, then `:w`
--- plans the ticket again with them (`planwire/plan { ticketId, feedback }`).
function M.feedback(id)
  local buf = find_or_create(('planwire://feedback/%d'):format(id))
  scratch(buf, id, write_feedback)
  show(buf)
  client.notify(('write the changes you want to the plan of ticket %d, then :w to plan it again'):format(id))
  return buf
end

return M
