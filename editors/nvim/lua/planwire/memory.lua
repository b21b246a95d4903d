--- The project memory buffer `planwire://memory`: the project's memory entries (facts and
--- conventions put into every planning prompt) and the suggestions plans made, waiting for a
--- decision. Keys: a add, d delete, y accept, n reject, r refresh, q close.
local M = {}

local api = vim.api
local client = require('planwire.client')

M.name = 'planwire://memory'
M.ns = api.nvim_create_namespace('planwire.memory')

--- { buf, root, data = memory/list result?, line_item = {lnum -> {kind, id}} }
M.view = nil

local function one_line(s)
  return (tostring(s or ''):gsub('%s*\n%s*', ' '))
end

local function day(ts)
  return tostring(ts or ''):match('^(%d+%-%d+%-%d+)') or ''
end

--- Renders the buffer.
function M.render()
  local view = M.view
  if not view or not api.nvim_buf_is_valid(view.buf) then
    return
  end
  local lines = {
    'planwire memory · ' .. view.root,
    'a add · d delete · y accept · n reject · r refresh · q close',
    '',
  }
  local hls = { { 0, 0, #lines[1], 'Title' }, { 1, 0, #lines[2], 'Comment' } }
  view.line_item = {}
  local data = view.data
  if view.error then
    table.insert(lines, 'error: ' .. view.error)
    table.insert(hls, { #lines - 1, 0, #lines[#lines], 'DiagnosticError' })
  end
  if not data then
    table.insert(lines, view.error and '' or 'loading…')
  else
    local entries = data.entries or {}
    table.insert(lines, ('Entries (%d)'):format(#entries))
    table.insert(hls, { #lines - 1, 0, #lines[#lines], 'Title' })
    if #entries == 0 then
      table.insert(lines, '  none yet: a adds one')
    end
    for _, e in ipairs(entries) do
      table.insert(lines, ('  #%-4d %s  (%s · %s)'):format(e.id, one_line(e.text), tostring(e.source or '?'), day(e.createdAt)))
      view.line_item[#lines] = { kind = 'entry', id = e.id }
    end
    local open, decided = {}, 0
    for _, sg in ipairs(data.suggestions or {}) do
      if sg.status == 'open' then
        table.insert(open, sg)
      else
        decided = decided + 1
      end
    end
    table.insert(lines, '')
    table.insert(lines, ('Suggestions waiting (%d)%s'):format(#open, decided > 0 and (' · %d decided'):format(decided) or ''))
    table.insert(hls, { #lines - 1, 0, #lines[#lines], 'Title' })
    if #open == 0 then
      table.insert(lines, '  none: plans suggest entries as they learn about the project')
    end
    for _, sg in ipairs(open) do
      local from = sg.ticketId and (' (from ticket #' .. tostring(sg.ticketId) .. ')') or ''
      table.insert(lines, ('  ?%-4d %s%s'):format(sg.id, one_line(sg.text), from))
      view.line_item[#lines] = { kind = 'suggestion', id = sg.id }
      table.insert(hls, { #lines - 1, 2, 3 + #tostring(sg.id), 'DiagnosticWarn' })
    end
  end
  local buf = view.buf
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  for _, h in ipairs(hls) do
    if h[3] > h[2] then
      api.nvim_buf_set_extmark(buf, M.ns, h[1], h[2], { end_col = math.min(h[3], #lines[h[1] + 1]), hl_group = h[4] })
    end
  end
  view.rendered = (view.rendered or 0) + 1
end

--- Reloads from the server (planwire/memory/list { root }).
function M.refresh(cb)
  local view = M.view
  if not view then
    return cb and cb()
  end
  client.request('planwire/memory/list', { root = view.root }, function(err, result)
    if M.view ~= view then
      return cb and cb(err)
    end
    if err then
      view.error = client.format_error(err)
    else
      view.error = nil
      view.data = result or { entries = {}, suggestions = {} }
      client.state.memory[view.root] = view.data
    end
    view.loaded = (view.loaded or 0) + 1
    M.render()
    if cb then
      cb(err)
    end
  end)
end

local function after(what, cb)
  return function(err, result)
    if err then
      client.notify(what .. ': ' .. client.format_error(err), vim.log.levels.ERROR)
    end
    M.refresh(function()
      if cb then
        cb(err, result)
      end
    end)
  end
end

--- Adds an entry (asks the text with vim.ui.input when none is given).
function M.add(root, text, cb)
  root = root or (M.view and M.view.root) or client.root()
  local function go(t)
    t = t and vim.trim(t) or ''
    if t == '' then
      return cb and cb({ message = 'cancelled' })
    end
    client.request('planwire/memory/add', { root = root, text = t }, after('memory/add', function(err, entry)
      if not err then
        client.notify(('remembered (entry %d): %s'):format(entry and entry.id or -1, t))
      end
      if cb then
        cb(err, entry)
      end
    end))
  end
  if text and vim.trim(text) ~= '' then
    return go(text)
  end
  vim.ui.input({ prompt = 'Remember about this project: ' }, go)
end

--- Removes an entry.
function M.remove(entry_id, cb)
  if not entry_id then
    return client.notify('usage: :Planwire memory remove {id}', vim.log.levels.ERROR)
  end
  client.request('planwire/memory/remove', { entryId = entry_id }, after('memory/remove', function(err, result)
    if not err then
      client.notify(result and result.removed and ('memory entry %d removed'):format(entry_id)
        or ('no memory entry %d'):format(entry_id))
    end
    if cb then
      cb(err, result)
    end
  end))
end

--- Accepts (yes) or rejects a suggestion.
function M.decide(suggestion_id, accept, cb)
  local method = accept and 'planwire/memory/accept' or 'planwire/memory/reject'
  client.request(method, { suggestionId = suggestion_id }, after(method:sub(10), cb))
end

--- The entry or suggestion on the cursor line, when the current buffer is the memory buffer.
function M.item_at_cursor()
  local view = M.view
  if not view or api.nvim_get_current_buf() ~= view.buf then
    return nil
  end
  return view.line_item and view.line_item[api.nvim_win_get_cursor(0)[1]] or nil
end

local function on_item(kind, fn)
  return function()
    local item = M.item_at_cursor()
    if item and item.kind == kind then
      fn(item.id)
    else
      client.notify(kind == 'entry' and 'no memory entry on this line' or 'no waiting suggestion on this line',
        vim.log.levels.WARN)
    end
  end
end

--- Entry ids of the current project's memory, for completion.
function M.cached_entry_ids()
  local data = client.state.memory[client.root()] or {}
  local ids = {}
  for _, e in ipairs(data.entries or {}) do
    table.insert(ids, tostring(e.id))
  end
  return ids
end

local function setup_buffer(buf, root)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'planwire-memory'
  vim.b[buf].planwire_root = root
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map('a', function()
    M.add(root)
  end, 'planwire: add a memory entry')
  map('d', on_item('entry', function(id)
    M.remove(id)
  end), 'planwire: delete the memory entry')
  map('y', on_item('suggestion', function(id)
    M.decide(id, true)
  end), 'planwire: accept the suggestion')
  map('n', on_item('suggestion', function(id)
    M.decide(id, false)
  end), 'planwire: reject the suggestion')
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
    M.view = { buf = buf, root = root }
  end
  M.render()
  M.refresh()
end

--- BufReadCmd of planwire://memory.
function M.on_read(buf)
  setup_buffer(buf, client.root(buf))
end

--- Opens the memory buffer of the current project in the current window.
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
