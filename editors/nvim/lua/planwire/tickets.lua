--- The tickets buffer `planwire://tickets`: one line per ticket (id, status word, title, branch)
--- and its open questions. <CR> opens the transcript; p, s and a plan, stop and answer; r refreshes.
local M = {}

local api = vim.api
local client = require('planwire.client')

M.name = 'planwire://tickets'
M.ns = api.nvim_create_namespace('planwire.tickets')

--- The tickets view: { buf, root, tickets = {id -> ticket}, line_ticket = {lnum -> id} }
M.view = nil

local STATUS_HL = {
  planned = 'DiagnosticOk',
  planning = 'DiagnosticInfo',
  queued = 'DiagnosticInfo',
  needs_input = 'DiagnosticWarn',
  failed = 'DiagnosticError',
  stopped = 'Comment',
  draft = 'Comment',
}

local function one_line(s)
  return (tostring(s or ''):gsub('%s*\n%s*', ' '))
end

--- The list in display order: units (a ticket on its own, or the tickets of one breakdown
--- in dependency order under a heading), newest unit first.
--- @return { heading: integer?, ids: integer[] }[]
function M.units(tickets)
  local groups, units = {}, {}
  for id, t in pairs(tickets) do
    local run = t.initiativeRunId
    if run then
      if not groups[run] then
        groups[run] = { heading = run, list = {}, top = id }
        table.insert(units, groups[run])
      end
      table.insert(groups[run].list, t)
      groups[run].top = math.max(groups[run].top, id)
    else
      table.insert(units, { ids = { id }, top = id })
    end
  end
  local transcript = require('planwire.transcript')
  for _, u in ipairs(units) do
    if u.list then
      u.ids = transcript.dependency_order(u.list)
      u.list = nil
    end
  end
  table.sort(units, function(a, b)
    return a.top > b.top
  end)
  return units
end

--- Renders the list.
function M.render()
  local view = M.view
  if not view or not api.nvim_buf_is_valid(view.buf) then
    return
  end
  local waiting = 0
  for _, t in pairs(view.tickets) do
    waiting = waiting + (t.status == 'needs_input' and 1 or 0)
  end
  local lines = {
    'planwire tickets · ' .. view.root .. (waiting > 0 and (' · %d need%s input (a answers)'):format(waiting,
      waiting == 1 and 's' or '') or ''),
    '<CR> transcript · p plan · s stop · a answer · e edit · d delete · r refresh · q close',
    '',
  }
  local hls = {}
  view.line_ticket = {}
  if view.error then
    table.insert(lines, 'error: ' .. view.error)
  elseif next(view.tickets) == nil then
    table.insert(lines, view.loaded and 'no tickets yet: :Planwire new (or :Planwire breakdown)' or 'loading…')
  end
  local after_text = require('planwire.transcript').after_text
  for _, unit in ipairs(M.units(view.tickets)) do
    if unit.heading then
      local run = client.state.runs[unit.heading]
      table.insert(lines, ('── breakdown (run %d)%s, in dependency order ──'):format(unit.heading,
        run and run.status and (' · ' .. run.status) or ''))
      table.insert(hls, { #lines - 1, 0, #lines[#lines], 'Special' })
    end
    for _, id in ipairs(unit.ids) do
      local t = view.tickets[id]
      local idcol = ('#%-4d'):format(id)
      local status = ('%-12s'):format(t.status or '?')
      local head = ('%s %s %s'):format(idcol, status, one_line(t.title))
      local branch = t.branch and (' · branch ' .. one_line(t.branch)) or ''
      table.insert(lines, head .. branch .. after_text(t))
      view.line_ticket[#lines] = id
      table.insert(hls, { #lines - 1, #idcol + 1, #idcol + 1 + #(t.status or '?'), STATUS_HL[t.status] or 'Normal' })
      if branch ~= '' then
        table.insert(hls, { #lines - 1, #head + #' · ', #head + #branch, 'Special' })
      end
      for _, q in ipairs(t.openQuestions or {}) do
        for _, item in ipairs(q.items or {}) do
          local head = (item.header and item.header ~= '') and (one_line(item.header) .. ': ') or ''
          table.insert(lines, ('      ? question %d · %s%s'):format(q.id, head, one_line(item.question)))
          view.line_ticket[#lines] = id
          table.insert(hls, { #lines - 1, 0, #lines[#lines], 'DiagnosticWarn' })
        end
      end
    end
  end
  local buf = view.buf
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  api.nvim_buf_set_extmark(buf, M.ns, 0, 0, { end_col = #lines[1], hl_group = 'Title' })
  api.nvim_buf_set_extmark(buf, M.ns, 1, 0, { end_col = #lines[2], hl_group = 'Comment' })
  for _, h in ipairs(hls) do
    api.nvim_buf_set_extmark(buf, M.ns, h[1], h[2], { end_col = h[3], hl_group = h[4] })
  end
  view.rendered = (view.rendered or 0) + 1
end

--- Reloads the list from the server (planwire/listTickets { root }).
function M.refresh(cb)
  local view = M.view
  if not view then
    return
  end
  client.request('planwire/listTickets', { root = view.root }, function(err, result)
    if M.view ~= view then
      return
    end
    view.loaded = true
    if err then
      view.error = client.format_error(err)
    else
      view.error = nil
      view.tickets = {}
      for _, t in ipairs(result and result.tickets or {}) do
        view.tickets[t.id] = t
        client.state.tickets[t.id] = t
      end
      client.needs_input_changed()
    end
    M.render()
    if cb then
      cb(err)
    end
  end)
end

function M.refresh_all()
  if M.view and api.nvim_buf_is_valid(M.view.buf) then
    M.refresh()
  end
end

--- planwire/ticketChanged
function M.on_ticket(ticket)
  local view = M.view
  if not view or not api.nvim_buf_is_valid(view.buf) then
    return
  end
  if ticket.root ~= view.root and not view.tickets[ticket.id] then
    return
  end
  view.tickets[ticket.id] = ticket
  vim.schedule(M.render)
end

--- planwire/runChanged: a breakdown's heading shows its status.
function M.on_run(run)
  local view = M.view
  if run.kind ~= 'breakdown' or not view or not api.nvim_buf_is_valid(view.buf) then
    return
  end
  for _, t in pairs(view.tickets) do
    if t.initiativeRunId == run.id then
      return vim.schedule(M.render)
    end
  end
end

--- The ticket of the cursor line when the current buffer is the tickets buffer.
function M.ticket_at_cursor()
  local view = M.view
  if not view or api.nvim_get_current_buf() ~= view.buf then
    return nil
  end
  return view.line_ticket and view.line_ticket[api.nvim_win_get_cursor(0)[1]] or nil
end

local function with_ticket(fn)
  return function()
    local id = M.ticket_at_cursor()
    if id then
      fn(id)
    else
      client.notify('no ticket on this line', vim.log.levels.WARN)
    end
  end
end

local function setup_buffer(buf, root)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'planwire-tickets'
  vim.b[buf].planwire_root = root
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  local commands = require('planwire.commands')
  map('<CR>', with_ticket(function(id)
    require('planwire.transcript').open(id)
  end), 'planwire: open transcript')
  map('p', with_ticket(function(id)
    commands.plan(id, { split = true })
  end), 'planwire: plan')
  map('s', with_ticket(function(id)
    commands.stop(id)
  end), 'planwire: stop')
  map('a', with_ticket(function(id)
    require('planwire.questions').answer(id)
  end), 'planwire: answer')
  map('d', with_ticket(function(id)
    commands.delete(id)
  end), 'planwire: delete (asks first)')
  map('e', with_ticket(function(id)
    require('planwire.edit').edit(id)
  end), 'planwire: edit the title and description')
  map('r', function()
    M.refresh()
  end, 'planwire: refresh')
  map('q', function()
    if #api.nvim_list_wins() > 1 then
      api.nvim_win_close(0, false)
    else
      vim.cmd('bprevious')
    end
  end, 'planwire: close')
  if not M.view or M.view.buf ~= buf or M.view.root ~= root then
    M.view = { buf = buf, root = root, tickets = {} }
  end
  M.render()
  M.refresh()
end

--- BufReadCmd of planwire://tickets (`:edit planwire://tickets`).
function M.on_read(buf)
  setup_buffer(buf, client.root(buf))
end

--- Opens the tickets buffer of the current project in the current window.
function M.open(root)
  root = root or client.root()
  local buf = require('planwire.transcript').find_buf(M.name)
  if not buf then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, M.name)
  end
  setup_buffer(buf, root)
  api.nvim_win_set_buf(0, buf)
  return buf
end

return M
