--- The transcript buffer `planwire://ticket/<id>`: a live, read-only markdown view of a
--- ticket's runs (and `planwire://run/<id>`, a breakdown's progress). Each run's events become
--- items (`planwire.model`: by seq, no gaps, no doubles; live blocks by delta offset), and each
--- item a block of the buffer's layout (`planwire.layout`), so an update writes only the lines
--- it changes: new items are appended, a tool result or a streamed delta rewrites its own
--- item's lines. This module keeps the views, catches them up (`getTranscript`, with the
--- `openBlocks` of a live run) and renders them.
local M = {}

local api = vim.api
local client = require('planwire.client')
local layout = require('planwire.layout')
local render = require('planwire.render')
local model = require('planwire.model')

M.ns = api.nvim_create_namespace('planwire.transcript')
M.prefix = 'planwire://ticket/'
local PAGE = 1000

--- @type table<integer, table> ticket id -> view
M.views = {}
--- @type table<integer, table> breakdown run id -> view (`planwire://run/<id>`)
M.run_views = {}
M.run_prefix = 'planwire://run/'

--- Buffer name of a ticket's transcript.
function M.bufname(id)
  return M.prefix .. tostring(id)
end

--- The loaded buffer named exactly `name`, or nil.
function M.find_buf(name)
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_valid(b) and api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- The ticket id of a transcript buffer, or nil.
function M.ticket_of(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local id = api.nvim_buf_get_name(bufnr):match('^planwire://ticket/(%d+)$')
  return id and tonumber(id) or nil
end

--- The run id of a breakdown buffer (`planwire://run/<id>`), or nil.
function M.run_of(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local id = api.nvim_buf_get_name(bufnr):match('^planwire://run/(%d+)$')
  return id and tonumber(id) or nil
end

--- The ticket of the cursor line in a breakdown buffer, or nil.
function M.ticket_at_cursor()
  local id = M.run_of(0)
  local view = id and M.run_views[id]
  if not view or view.buf ~= api.nvim_get_current_buf() then
    return nil
  end
  local row = view.layout and view.layout:block_range(view.foot, 1)
  if not row then
    return nil
  end
  return view.foot_tickets[api.nvim_win_get_cursor(0)[1] - row] or nil
end

-- Text (in planwire.render; kept here for callers) ----------------------------------------------

M.strip_plan = render.strip_plan
M.question_lines = render.question_lines
M.answer_lines = render.answer_lines
M.dependency_order = render.dependency_order
M.after_text = render.after_text
local RUN_ACTIVE = render.RUN_ACTIVE

-- Runs ----------------------------------------------------------------------------------------
--
-- A view holds, per run, its model (`planwire.model`): the items its events became, in order.
-- Item `i` of a run is block `i + 1` of the run's layout section (block 1 is the run's heading),
-- so an event that changes an item (a tool result, a delta, the stored text that closes a
-- streamed block) finds its lines through the item. A second section per run is its foot.

--- Inserts the run's sections into the view's layout, in run order: its items (the heading
--- first) and its foot. The view's head is section 1, so the run at `i` takes `2i` and `2i + 1`.
local function add_section(view, r)
  for i, id in ipairs(view.order) do
    if id == r.id then
      r.sec = view.layout:insert_section(2 * i)
      r.foot = view.layout:insert_section(2 * i + 1)
      r.shown, r.changed = 0, {}
      return
    end
  end
end

local function new_run(view, run_id)
  local r = view.runs[run_id]
  if not r then
    r = model.new_run(run_id)
    view.runs[run_id] = r
    table.insert(view.order, run_id)
    table.sort(view.order)
    if view.layout then
      add_section(view, r)
    end
  end
  return r
end

--- A piece of streamed text or reasoning (`planwire/delta`), continued at its `offset`. While
--- the view catches up it is dropped: the page that reaches the run's last seq brings the
--- block as far as it was sent (`openBlocks`). A gap (a piece past what is shown) asks for
--- that page once.
local function add_delta(view, r, agent, kind, text, offset)
  if view.syncing then
    return
  end
  if model.delta(r, agent, kind, text, offset) == 'gap' and model.may_resync(r, agent, kind) then
    M.sync(view)
  end
end

-- Rendering -----------------------------------------------------------------------------------
--
-- Each render writes only what changed since the last one: the head and foot blocks (small,
-- rebuilt and compared), each run's heading, the items touched, and the items added. A view
-- opened on a long transcript writes each page of catch-up once, appended.

--- The text of lines, to tell whether a block changed.
local function signature(lines)
  local parts = {}
  for i, l in ipairs(lines) do
    parts[i] = l[1] .. '\1' .. (l[2] or '') .. (l.spans and vim.inspect(l.spans) or '')
  end
  return table.concat(parts, '\n')
end

--- Sets a block from lines when they differ from what it shows.
local function put(view, sec, i, key, lines, before, after)
  local sig = signature(lines)
  if view.sigs[key] ~= sig then
    view.sigs[key] = sig
    view.layout:set_block(sec, i, { lines = lines, before = before, after = after })
  end
end

--- A fresh layout of the view's buffer, every item to be written again: the one-pass render of
--- a view opened (or reloaded) on a transcript.
local function new_layout(view)
  view.layout = layout.new(view.buf, M.ns)
  view.sigs = {}
  view.head = view.layout:insert_section()
  view.foot = view.layout:insert_section()
  for _, id in ipairs(view.order) do
    add_section(view, view.runs[id])
  end
end

--- The breakdown's tickets, as its foot lists them.
local function breakdown_tickets(view)
  local list = {}
  for _, t in pairs(view.tickets or {}) do
    table.insert(list, client.state.tickets[t.id] or t)
  end
  return list
end

local function render_runs(view)
  for _, id in ipairs(view.order) do
    local r = view.runs[id]
    local run = client.state.runs[id] or {}
    local heading
    if view.run_id then
      heading = #r.items > 0 and { { '## Transcript' } } or {}
    else
      heading = render.run_heading(id, run)
    end
    put(view, r.sec, 1, 'run' .. id, heading, true, true)
    put(view, r.foot, 1, 'runfoot' .. id, render.run_foot(run), true, true)
    for idx in pairs(r.changed) do
      view.layout:set_block(r.sec, idx + 1, render.item_block(r.items[idx]))
    end
    r.changed = {}
    for idx = r.shown + 1, #r.items do
      view.layout:set_block(r.sec, idx + 1, render.item_block(r.items[idx]))
    end
    r.shown = #r.items
  end
end

local function draw(view)
  view.render_scheduled = false
  local buf = view.buf
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  local t = view.ticket_id and client.state.tickets[view.ticket_id] or client.state.runs[view.run_id]
  if t and t.root and vim.b[buf].planwire_root ~= t.root then
    vim.b[buf].planwire_root = t.root -- commands run from here act on the ticket's project
  end
  if not view.layout then
    new_layout(view)
  end
  local head, foot
  if view.run_id then
    local run = client.state.runs[view.run_id] or {}
    head = render.breakdown_head(view.run_id, run, view.description, view.error, view.agent_runs)
    foot = render.breakdown_foot(run, breakdown_tickets(view))
  else
    t = t or {}
    head = render.ticket_head(view.ticket_id, t, view.error)
    foot = render.ticket_foot(t, view.questions, view.usage)
  end
  put(view, view.head, 1, 'head', head, false, true)
  render_runs(view)
  put(view, view.foot, 1, 'foot', foot, true, false)
  view.foot_tickets = vim.tbl_map(function(l)
    return l[3] or false
  end, foot)
  if view.layout:flush() then
    view.rendered = (view.rendered or 0) + 1
  end
end

local function schedule_render(view)
  if not view.render_scheduled then
    view.render_scheduled = true
    vim.schedule(function()
      draw(view)
    end)
  end
end

--- Renders a view now (tests, after a batch).
function M.render_now(id)
  local view = M.views[id]
  if view then
    draw(view)
  end
end

--- Whether `view` is still the registered view of its ticket or run.
local function registered(view)
  if view.run_id then
    return M.run_views[view.run_id] == view
  end
  return M.views[view.ticket_id] == view
end

--- `planwire/getRun` for a breakdown view: records the run and its agent runs (passes). Only
--- the answer to the latest request counts (answers may arrive out of order). When the run
--- has ended while a pass still reads as running, asks again a little later.
function M.get_run(view, cb)
  view.get_run_seq = (view.get_run_seq or 0) + 1
  local seq = view.get_run_seq
  client.request('planwire/getRun', { runId = view.run_id }, function(err, result)
    if not err and result and result.run and seq == view.get_run_seq then
      client.state.runs[result.run.id] = result.run -- (not client.on_run: that would sync again)
      view.agent_runs = result.agentRuns or {}
      local pending = false
      for _, a in ipairs(view.agent_runs) do
        pending = pending or a.status == 'running'
      end
      if pending and not RUN_ACTIVE[result.run.status] and (view.agent_retries or 0) < 20 then
        view.agent_retries = (view.agent_retries or 0) + 1
        vim.defer_fn(function()
          if registered(view) then
            M.refresh_agents(view)
          end
        end, 250)
      end
    end
    cb(err, result)
  end)
end

-- Catch-up ------------------------------------------------------------------------------------

--- Fetches what the view has not seen: the ticket, its runs, and each run's events after the
--- last seq seen (planwire/getTranscript { runId, afterSeq }).
function M.sync(view)
  if view.syncing then
    view.resync = true
    return
  end
  view.syncing = true
  view.resync = false
  local function finish(err)
    view.syncing = false
    if err then
      view.error = client.format_error(err)
    end
    view.synced = (view.synced or 0) + 1
    schedule_render(view)
    if view.resync and registered(view) then
      M.sync(view)
    end
  end
  local function fetch(cb)
    if not view.run_id then
      return client.get_ticket(view.ticket_id, function(err, result)
        if not err and result then
          view.questions = result.questions
          view.usage = result.usage
        end
        cb(err, result)
      end)
    end
    -- a breakdown: the run and its agent runs, then the tickets it created
    M.get_run(view, function(err, result)
      if err or not result or not result.run then
        return cb(err or { message = 'no run' })
      end
      client.request('planwire/listTickets', { root = result.run.root, initiativeRunId = view.run_id }, function(e2, res2)
        if e2 then
          return cb(e2)
        end
        for _, t in ipairs(res2 and res2.tickets or {}) do
          client.state.tickets[t.id] = t
          view.tickets[t.id] = t
        end
        cb(nil, { runs = { result.run } })
      end)
    end)
  end
  fetch(function(err, result)
    if err or not result then
      return finish(err or { message = 'no result' })
    end
    view.error = nil
    local ids = {}
    for _, run in ipairs(result.runs or {}) do
      table.insert(ids, run.id)
    end
    table.sort(ids)
    local i = 0
    local function next_run()
      i = i + 1
      local run_id = ids[i]
      if not run_id then
        return finish()
      end
      local r = new_run(view, run_id)
      local function page()
        client.request('planwire/getTranscript', { runId = run_id, afterSeq = r.last_seq, limit = PAGE }, function(e, res)
          if e or not res then
            return finish(e or { message = 'no transcript' })
          end
          local before = r.last_seq
          if res.openBlocks then
            -- the blocks streaming now follow the events up to lastSeq, not those notified since
            model.feed(r, res.events or {}, res.lastSeq)
            model.open_blocks(r, res.openBlocks)
          end
          model.feed(r, res.events or {})
          schedule_render(view)
          if not res.done and r.last_seq > before and r.last_seq < (res.lastSeq or 0) then
            return page()
          end
          next_run()
        end)
      end
      page()
    end
    next_run()
  end)
end

-- Notifications -------------------------------------------------------------------------------

--- planwire/transcript (`ticket_id` is nil for a breakdown)
function M.on_events(ticket_id, run_id, events)
  local view = (ticket_id and M.views[ticket_id]) or M.run_views[run_id]
  if not view then
    return
  end
  local r = new_run(view, run_id)
  if model.feed(r, events) then
    M.sync(view) -- a gap: fetch what is missing
  end
  if view.run_id then
    for _, ev in ipairs(events) do
      if ev.kind == 'subagent' then
        M.refresh_agents(view) -- a pass started or ended
        break
      end
    end
  end
  schedule_render(view)
end

--- planwire/delta `{ ticketId, runId, agentRunId?, kind, text, offset }` (`ticket_id` is nil for
--- a breakdown): a piece of the open text or reasoning block, shown at once, in place.
function M.on_delta(ticket_id, run_id, agent, kind, text, offset)
  local view = (ticket_id and M.views[ticket_id]) or M.run_views[run_id]
  if not view or (kind ~= 'text' and kind ~= 'reasoning') or type(text) ~= 'string' then
    return
  end
  add_delta(view, new_run(view, run_id), agent, kind, text, offset)
  schedule_render(view)
end

--- Reloads the agent runs (passes) of a breakdown view.
function M.refresh_agents(view)
  M.get_run(view, function(err, result)
    if not err and result and registered(view) then
      schedule_render(view)
    end
  end)
end

--- planwire/ticketChanged (after the client recorded it)
function M.on_ticket(ticket)
  local bview = ticket.initiativeRunId and M.run_views[ticket.initiativeRunId]
  if bview then
    bview.tickets[ticket.id] = ticket
    schedule_render(bview)
  end
  local view = M.views[ticket.id]
  if not view then
    return
  end
  local settled = ticket.status ~= 'planning' and ticket.status ~= 'queued'
  if ((ticket.status == 'planned' or ticket.status == 'needs_input') and ticket.plan == nil)
    or (settled and view.last_status ~= nil and view.last_status ~= ticket.status) then
    M.sync(view) -- also picks up questions answered meanwhile (with their answers)
  end
  view.last_status = ticket.status
  schedule_render(view)
end

--- planwire/runChanged (after the client recorded it)
function M.on_run(run)
  local view = (run.ticketId and M.views[run.ticketId]) or M.run_views[run.id]
  if not view then
    return
  end
  if view.runs[run.id] and not RUN_ACTIVE[run.status or 'running'] then
    model.close_open(view.runs[run.id])
  end
  if view.run_id then
    -- a breakdown: its passes, and at the end its tickets, come with getRun / listTickets
    local ended = not RUN_ACTIVE[run.status or 'running']
    if ended or not view.agent_runs or #view.agent_runs == 0 or view.last_status ~= run.status then
      M.sync(view)
    end
    view.last_status = run.status
    return schedule_render(view)
  end
  local r = view.runs[run.id]
  if not r then
    new_run(view, run.id)
    if (run.lastSeq or 0) > 0 then
      M.sync(view)
    end
  elseif (run.lastSeq or 0) > r.last_seq and run.status ~= 'running' and run.status ~= 'queued' then
    M.sync(view) -- the run ended: make sure every event is here
  end
  schedule_render(view)
end

--- After a server (re)start: catch every open transcript up.
function M.reattach_all()
  for _, views in ipairs({ M.views, M.run_views }) do
    for id, view in pairs(views) do
      if api.nvim_buf_is_valid(view.buf) then
        M.sync(view)
      else
        views[id] = nil
      end
    end
  end
end

-- Buffer --------------------------------------------------------------------------------------

local function setup_buffer(buf, id)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.b[buf].planwire_ticket = id
  if vim.bo[buf].filetype ~= 'markdown' then
    vim.bo[buf].filetype = 'markdown'
  end
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map('gp', function() require('planwire.commands').plan(id) end, 'planwire: plan this ticket')
  map('gs', function() require('planwire.commands').stop(id) end, 'planwire: stop this ticket')
  map('ga', function() require('planwire.questions').answer(id) end, 'planwire: answer its question')
  map('gr', function() M.sync(M.views[id]) end, 'planwire: refresh')
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      local v = M.views[id]
      if v and v.buf == buf then
        M.views[id] = nil
      end
    end,
  })
  local view = M.views[id]
  if not view or view.buf ~= buf then
    view = { ticket_id = id, buf = buf, runs = {}, order = {} }
    M.views[id] = view
  end
  view.layout = nil -- the buffer is (re)read: write it all again, in one pass
  draw(view)
  M.sync(view)
  return view
end

local function setup_run_buffer(buf, run_id, opts)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.b[buf].planwire_run = run_id
  if opts and opts.root then
    vim.b[buf].planwire_root = opts.root
  end
  if vim.bo[buf].filetype ~= 'markdown' then
    vim.bo[buf].filetype = 'markdown'
  end
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map('<CR>', function()
    local id = M.ticket_at_cursor()
    if id then
      M.open(id)
    end
  end, 'planwire: open the ticket under the cursor')
  map('gs', function() require('planwire.commands').stop_run(run_id) end, 'planwire: stop this breakdown')
  map('gt', function() require('planwire.tickets').open() end, 'planwire: tickets')
  map('gr', function() M.sync(M.run_views[run_id]) end, 'planwire: refresh')
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      local v = M.run_views[run_id]
      if v and v.buf == buf then
        M.run_views[run_id] = nil
      end
    end,
  })
  local view = M.run_views[run_id]
  if not view or view.buf ~= buf then
    view = { run_id = run_id, buf = buf, runs = {}, order = {}, tickets = {} }
    M.run_views[run_id] = view
  end
  if opts and opts.description then
    view.description = opts.description
  end
  new_run(view, run_id)
  view.layout = nil -- the buffer is (re)read: write it all again, in one pass
  draw(view)
  M.sync(view)
  return view
end

--- Opens (or focuses) the progress buffer of a breakdown run, `planwire://run/<id>`.
--- @param run_id integer
--- @param opts { win?: integer, description?: string, root?: string }?
function M.open_run(run_id, opts)
  opts = opts or {}
  local name = M.run_prefix .. tostring(run_id)
  local buf = M.find_buf(name)
  if not buf then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, name)
    setup_run_buffer(buf, run_id, opts)
  elseif not M.run_views[run_id] then
    setup_run_buffer(buf, run_id, opts)
  else
    if opts.description then
      M.run_views[run_id].description = opts.description
    end
    M.sync(M.run_views[run_id])
  end
  local win = opts.win
  if not win then
    for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
      if api.nvim_win_get_buf(w) == buf then
        win = w
        break
      end
    end
  end
  win = win or api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) ~= buf then
    api.nvim_win_set_buf(win, buf)
  end
  api.nvim_set_current_win(win)
  return buf
end

--- BufReadCmd of planwire://run/<id>.
function M.on_read_run(buf, name)
  local id = tonumber(tostring(name):match('^planwire://run/(%d+)$'))
  if not id then
    client.notify('not a run: ' .. tostring(name), vim.log.levels.ERROR)
    return
  end
  setup_run_buffer(buf, id)
end

--- BufReadCmd of planwire://ticket/<id> (`:edit planwire://ticket/3`).
function M.on_read(buf, name)
  local id = tonumber(tostring(name):match('^planwire://ticket/(%d+)$'))
  if not id then
    client.notify('not a ticket: ' .. tostring(name), vim.log.levels.ERROR)
    return
  end
  setup_buffer(buf, id)
end

--- Opens (or focuses) the transcript buffer of a ticket. Returns the buffer.
--- @param id integer
--- @param opts { win?: integer, focus?: boolean, split?: boolean }?
function M.open(id, opts)
  opts = opts or {}
  local name = M.bufname(id)
  local buf = M.find_buf(name)
  if not buf then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, name)
    setup_buffer(buf, id)
  elseif not M.views[id] then
    setup_buffer(buf, id)
  else
    M.sync(M.views[id]) -- catch up (also starts the server when it is not running)
  end
  if opts.focus ~= false then
    local win = opts.win
    if not win then
      for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
        if api.nvim_win_get_buf(w) == buf then
          win = w
          break
        end
      end
    end
    if not win and opts.split then
      vim.cmd('belowright split')
    end
    win = win or api.nvim_get_current_win()
    if api.nvim_win_get_buf(win) ~= buf then
      api.nvim_win_set_buf(win, buf)
    end
    api.nvim_set_current_win(win)
  end
  return buf
end

return M
