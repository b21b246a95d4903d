--- The transcript buffer `planwire://ticket/<id>`: a live, read-only markdown view of a
--- ticket's runs. Events are kept per run by seq (no gaps, no doubles) and the buffer is
--- re-rendered from the first line that changed.
local M = {}

local api = vim.api
local client = require('planwire.client')

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
  return view.line_ticket and view.line_ticket[api.nvim_win_get_cursor(0)[1]] or nil
end

-- Text ----------------------------------------------------------------------------------------

--- Removes the `<planwire-…>` JSON blocks (`plan`, and a breakdown's `outline`, `expansion`,
--- `research-selection`, `research`), and an unfinished one still streaming, from text.
function M.strip_plan(text)
  text = text:gsub('<planwire%-([%w%-]+)>.-</planwire%-%1>', '')
  local open = text:find('<planwire%-[%w%-]+>')
  if open then
    text = text:sub(1, open - 1)
  end
  -- a tag cut in the middle while streaming: "...<planw" or "...<planwire-outl"
  local partial = text:find('<planwire%-[%w%-]*$')
  if partial then
    return text:sub(1, partial - 1)
  end
  local tag = '<planwire-'
  for n = #tag - 1, 2, -1 do
    if text:sub(-n) == tag:sub(1, n) then
      text = text:sub(1, -n - 1)
      break
    end
  end
  return text
end

local function one_line(s, max)
  s = tostring(s or ''):gsub('%s*\n%s*', ' ⏎ '):gsub('%s+$', '')
  max = max or 160
  if vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. '…'
  end
  return s
end

local function split_lines(s)
  return vim.split(s, '\n', { plain = true })
end

-- Model ---------------------------------------------------------------------------------------

local function new_run(view, run_id)
  local r = view.runs[run_id]
  if not r then
    r = { id = run_id, last_seq = 0, pending = {}, items = {}, tools = {}, subagents = {} }
    view.runs[run_id] = r
    table.insert(view.order, run_id)
    table.sort(view.order)
  end
  return r
end

--- Adds one event (already in seq order) to a run's items.
local function add_event(r, ev)
  local agent = ev.agentRunId
  local depth = (agent and r.subagents[agent]) and 1 or 0
  local kind = ev.kind
  if kind == 'text' or kind == 'reasoning' then
    -- the server sends whole blocks (the Claude adapter folds partial deltas into them), so
    -- each event is its own paragraph
    table.insert(r.items, { kind = kind, text = ev.text or '', agent = agent, depth = depth, final = ev.final })
    return
  end
  if kind == 'toolCall' then
    local item = { kind = 'tool', name = ev.name, input = ev.input, depth = depth }
    if ev.callId then
      r.tools[ev.callId] = item
    end
    table.insert(r.items, item)
  elseif kind == 'toolResult' then
    local item = ev.callId and r.tools[ev.callId]
    if item then
      item.status, item.output = ev.status, ev.output
    else
      table.insert(r.items, { kind = 'tool', name = 'result', input = '', status = ev.status, output = ev.output, depth = depth })
    end
  elseif kind == 'subagent' then
    if ev.phase == 'start' then
      if agent then
        r.subagents[agent] = ev.label or true
      end
      table.insert(r.items, { kind = 'line', text = '↳ subagent: ' .. one_line(ev.label), depth = depth + 1, hl = 'Special' })
    else
      table.insert(r.items, {
        kind = 'line',
        text = '↳ subagent done: ' .. one_line(ev.label) .. (ev.status and (' (' .. one_line(ev.status) .. ')') or ''),
        depth = math.max(depth, 1),
        hl = 'Special',
      })
    end
  elseif kind == 'usage' then
    table.insert(r.items, {
      kind = 'line',
      text = ('_usage: %d in · %d out · %d cache read · %d cache write · $%.4f_'):format(
        ev.inputTokens or 0, ev.outputTokens or 0, ev.cacheReadTokens or 0, ev.cacheWriteTokens or 0, ev.costUsd or 0),
      depth = depth,
      hl = 'Comment',
    })
  elseif kind == 'error' then
    table.insert(r.items, {
      kind = 'line',
      text = '**error** (' .. tostring(ev.errorKind or 'unknown') .. '): ' .. one_line(ev.message, 400),
      depth = depth,
      hl = 'DiagnosticError',
      blank_before = true,
    })
  elseif kind == 'question' then
    table.insert(r.items, {
      kind = 'line',
      text = '❓ question ' .. tostring(ev.questionId) .. ' — answer with `:Planwire answer`',
      depth = depth,
      blank_before = true,
      hl = 'DiagnosticWarn',
    })
  elseif kind == 'raw' then
    table.insert(r.items, { kind = 'line', text = '· ' .. one_line(ev.line, 120), depth = depth, hl = 'Comment' })
  end
  -- `session` and unknown kinds are not shown
end

--- Feeds events of one run, dropping those already seen and holding those after a gap.
--- @return boolean gap true when events are missing before some held one
local function feed(view, r, events)
  for _, ev in ipairs(events) do
    if type(ev.seq) == 'number' and ev.seq > r.last_seq then
      r.pending[ev.seq] = ev
    end
  end
  while r.pending[r.last_seq + 1] do
    local ev = r.pending[r.last_seq + 1]
    r.pending[r.last_seq + 1] = nil
    r.last_seq = r.last_seq + 1
    add_event(r, ev)
  end
  for seq in pairs(r.pending) do
    if seq <= r.last_seq then
      r.pending[seq] = nil
    end
  end
  return next(r.pending) ~= nil
end

-- Rendering -----------------------------------------------------------------------------------

local STATUS_WORD = {
  needs_input = 'needs input',
}

local function indent(depth)
  return string.rep('  ', depth or 0)
end

local function render_item(item, out)
  local pad = indent(item.depth)
  if item.kind == 'text' or item.kind == 'reasoning' then
    local text = item.kind == 'text' and M.strip_plan(item.text) or item.text
    text = text:gsub('^%s*\n', ''):gsub('%s+$', '')
    if text == '' then
      return
    end
    local quote = item.kind == 'reasoning' and '> ' or ''
    if #out > 0 and out[#out][1] ~= '' then
      table.insert(out, { '' })
    end
    for _, l in ipairs(split_lines(text)) do
      table.insert(out, { pad .. quote .. l, item.kind == 'reasoning' and 'Comment' or nil })
    end
    table.insert(out, { '' })
  elseif item.kind == 'tool' then
    local mark = ({ completed = '✓', error = '✗', running = '…' })[item.status or 'running'] or '…'
    local s = ('%s▸ %s %s %s'):format(pad, one_line(item.name, 40), one_line(item.input, 100), mark)
    if item.status == 'error' and item.output and item.output ~= '' then
      s = s .. ' ' .. one_line(item.output, 120)
    end
    table.insert(out, { s, item.status == 'error' and 'DiagnosticError' or 'Comment' })
  else
    if item.blank_before and #out > 0 and out[#out][1] ~= '' then
      table.insert(out, { '' })
    end
    table.insert(out, { pad .. item.text, item.hl })
  end
end

local function bullet_list(out, heading, list, checkbox)
  if type(list) ~= 'table' or #list == 0 then
    return
  end
  table.insert(out, { '## ' .. heading })
  table.insert(out, { '' })
  for _, s in ipairs(list) do
    local lines = split_lines(tostring(s))
    table.insert(out, { (checkbox and '- [ ] ' or '- ') .. lines[1] })
    for i = 2, #lines do
      table.insert(out, { '  ' .. lines[i] })
    end
  end
  table.insert(out, { '' })
end

--- Renders a question record as markdown lines.
function M.question_lines(q, out)
  out = out or {}
  table.insert(out, { ('### Question %d (%s)'):format(q.id, q.status or 'open'), 'DiagnosticWarn' })
  table.insert(out, { '' })
  for _, item in ipairs(q.items or {}) do
    local head = (item.header and item.header ~= '') and ('**' .. one_line(item.header) .. '**: ') or ''
    table.insert(out, { '- ' .. head .. one_line(item.question, 400) })
    for _, opt in ipairs(item.options or {}) do
      local d = (opt.description and opt.description ~= '') and (' — ' .. one_line(opt.description)) or ''
      table.insert(out, { '  - `' .. one_line(opt.label) .. '`' .. d })
    end
  end
  table.insert(out, { '' })
  return out
end

--- Renders what was answered to a question (its `answers`, one per item) as markdown lines.
function M.answer_lines(q, out)
  out = out or {}
  for i, item in ipairs(q.items or {}) do
    local a = (q.answers or {})[i] or {}
    local parts = {}
    for _, label in ipairs(type(a.selected) == 'table' and a.selected or {}) do
      table.insert(parts, '`' .. one_line(label) .. '`')
    end
    if type(a.other) == 'string' and a.other ~= '' then
      table.insert(parts, one_line(a.other, 400))
    end
    local head = (item.header and item.header ~= '') and ('**' .. one_line(item.header) .. '**: ') or ''
    table.insert(out, { '- ' .. head .. one_line(item.question, 400) })
    table.insert(out, { '  → ' .. (#parts > 0 and table.concat(parts, ', ') or '(no answer)') })
  end
  return out
end

--- Ticket ids of `tickets` (a list) so that every ticket comes after those it depends on
--- (ties: lower id first). Dependencies outside the list are ignored; cycles cannot stall it.
function M.dependency_order(tickets)
  local by_id, ids = {}, {}
  for _, t in ipairs(tickets) do
    by_id[t.id] = t
    table.insert(ids, t.id)
  end
  table.sort(ids)
  local done, order = {}, {}
  local function visit(id, stack)
    if done[id] or stack[id] then
      return
    end
    stack[id] = true
    local deps = vim.deepcopy(type(by_id[id].dependsOn) == 'table' and by_id[id].dependsOn or {})
    table.sort(deps, function(a, b)
      return tostring(a) < tostring(b)
    end)
    for _, d in ipairs(deps) do
      if by_id[d] then
        visit(d, stack)
      end
    end
    stack[id] = nil
    done[id] = true
    table.insert(order, id)
  end
  for _, id in ipairs(ids) do
    visit(id, {})
  end
  return order
end

--- " · after #3, #4" for a ticket with dependencies, else "".
function M.after_text(ticket)
  local deps = type(ticket.dependsOn) == 'table' and ticket.dependsOn or {}
  if #deps == 0 then
    return ''
  end
  local parts = {}
  for _, d in ipairs(deps) do
    table.insert(parts, '#' .. tostring(d))
  end
  return ' · after ' .. table.concat(parts, ', ')
end

local RUN_ACTIVE = { queued = true, running = true }

--- All lines of a breakdown view (`planwire://run/<id>`): { {text, hl?, ticket?}, ... }.
local function build_run(view)
  local run = client.state.runs[view.run_id] or {}
  local out = {}
  local desc = view.description or ''
  local first = vim.split(vim.trim(desc), '\n', { plain = true })[1] or ''
  table.insert(out, { '# Breakdown' .. (first ~= '' and (': ' .. one_line(first, 200)) or (' ' .. view.run_id)) })
  local tool = run.tool and (run.tool .. (run.model and (' ' .. run.model) or '')) or ''
  table.insert(out, { ('_breakdown run %d · %s%s_'):format(view.run_id, run.status or 'loading',
    tool ~= '' and (' · ' .. tool) or '') })
  table.insert(out, { '' })
  if vim.trim(desc) ~= '' then
    for _, l in ipairs(split_lines(vim.trim(desc))) do
      table.insert(out, { '> ' .. l, 'Comment' })
    end
    table.insert(out, { '' })
  end
  if view.error then
    table.insert(out, { '**error:** ' .. one_line(view.error, 400), 'DiagnosticError' })
    table.insert(out, { '' })
  end
  if type(run.failure) == 'table' then
    table.insert(out, { ('**%s** (%s): %s'):format(run.status or 'failed', tostring(run.failure.code or '?'),
      one_line(run.failure.message, 400)), 'DiagnosticError' })
    table.insert(out, { '' })
  end
  if view.agent_runs and #view.agent_runs > 0 then
    table.insert(out, { '## Passes' })
    table.insert(out, { '' })
    for _, a in ipairs(view.agent_runs) do
      local pad = a.parentId and '  ' or ''
      table.insert(out, { ('%s- %s · %s'):format(pad, one_line(a.label, 80), tostring(a.status)),
        a.status == 'failed' and 'DiagnosticError' or nil })
    end
    table.insert(out, { '' })
  end
  local r = view.runs[view.run_id]
  if r and #r.items > 0 then
    table.insert(out, { '## Transcript' })
    table.insert(out, { '' })
    for _, item in ipairs(r.items) do
      render_item(item, out)
    end
    if out[#out][1] ~= '' then
      table.insert(out, { '' })
    end
  end
  local list = {}
  for _, t in pairs(view.tickets or {}) do
    table.insert(list, client.state.tickets[t.id] or t)
  end
  if #list > 0 then
    table.insert(out, { ('## Tickets (%d, in dependency order)'):format(#list) })
    table.insert(out, { '' })
    local by_id = {}
    for _, t in ipairs(list) do
      by_id[t.id] = t
    end
    for _, id in ipairs(M.dependency_order(list)) do
      local t = by_id[id]
      table.insert(out, { ('- #%d %s · %s%s'):format(id, one_line(t.title, 200), tostring(t.status or '?'),
        M.after_text(t)), nil, id })
    end
    table.insert(out, { '' })
    table.insert(out, { '_<CR> on a ticket opens its transcript · :Planwire tickets lists them all_', 'Comment' })
  elseif run.status and not RUN_ACTIVE[run.status] then
    table.insert(out, { '_no tickets were created_', 'Comment' })
  end
  while #out > 1 and out[#out][1] == '' do
    table.remove(out)
  end
  return out
end

--- All lines of a view: { {text, hl?}, ... }.
local function build(view)
  if view.run_id then
    return build_run(view)
  end
  local t = client.state.tickets[view.ticket_id] or {}
  local out = {}
  table.insert(out, { '# ' .. one_line(t.title or ('Ticket ' .. view.ticket_id), 200) })
  local status = t.status and (STATUS_WORD[t.status] or t.status) or 'loading'
  local tool = t.tool and (t.tool .. (t.model and (' ' .. t.model) or '')) or ''
  table.insert(out, { ('_ticket %d · %s%s_'):format(view.ticket_id, status, tool ~= '' and (' · ' .. tool) or '') })
  if t.initiativeRunId then
    table.insert(out, { ('_from breakdown run %d%s_'):format(t.initiativeRunId, M.after_text(t)), 'Comment' })
  end
  table.insert(out, { '' })
  if view.error then
    table.insert(out, { '**error:** ' .. one_line(view.error, 400), 'DiagnosticError' })
    table.insert(out, { '' })
  end
  for _, run_id in ipairs(view.order) do
    local r = view.runs[run_id]
    local run = client.state.runs[run_id] or {}
    local head = ('## Run %d · %s'):format(run_id, run.status or 'running')
    if type(run.failure) == 'table' then
      head = head .. ' · ' .. one_line((run.failure.code or '') .. ': ' .. (run.failure.message or ''), 200)
    end
    table.insert(out, { head, type(run.failure) == 'table' and run.status == 'failed' and 'DiagnosticError' or nil })
    table.insert(out, { '' })
    for _, item in ipairs(r.items) do
      render_item(item, out)
    end
    if out[#out][1] ~= '' then
      table.insert(out, { '' })
    end
  end
  local plan = t.plan
  if type(plan) == 'table' then
    table.insert(out, { '---' })
    table.insert(out, { '' })
    table.insert(out, { '# Plan: ' .. one_line(plan.title or t.title or '', 200) })
    table.insert(out, { '' })
    local desc = tostring(plan.description or ''):gsub('%s+$', '')
    if desc ~= '' then
      for _, l in ipairs(split_lines(desc)) do
        table.insert(out, { l })
      end
      table.insert(out, { '' })
    end
    bullet_list(out, 'Acceptance criteria', plan.acceptanceCriteria, true)
    if not (t.openQuestions and #t.openQuestions > 0) then
      bullet_list(out, 'Open questions', plan.openQuestions)
    end
    bullet_list(out, 'Dependencies', plan.dependencies)
  end
  local answered = {}
  for _, q in ipairs(view.questions or {}) do
    if q.status == 'answered' and type(q.answers) == 'table' then
      table.insert(answered, q)
    end
  end
  if #answered > 0 then
    table.insert(out, { '## Answered questions' })
    table.insert(out, { '' })
    for _, q in ipairs(answered) do
      M.answer_lines(q, out)
    end
    table.insert(out, { '' })
  end
  if type(t.openQuestions) == 'table' and #t.openQuestions > 0 then
    table.insert(out, { '## Questions waiting for an answer (`:Planwire answer`)', 'DiagnosticWarn' })
    table.insert(out, { '' })
    for _, q in ipairs(t.openQuestions) do
      M.question_lines(q, out)
    end
  end
  while #out > 1 and out[#out][1] == '' do
    table.remove(out)
  end
  return out
end

local function render(view)
  view.render_scheduled = false
  local buf = view.buf
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  local t = view.ticket_id and client.state.tickets[view.ticket_id] or client.state.runs[view.run_id]
  if t and t.root and vim.b[buf].planwire_root ~= t.root then
    vim.b[buf].planwire_root = t.root -- commands run from here act on the ticket's project
  end
  local out = build(view)
  local lines = {}
  view.line_ticket = {}
  for i, l in ipairs(out) do
    lines[i] = l[1]
    view.line_ticket[i] = l[3]
  end
  local old = view.lines or api.nvim_buf_get_lines(buf, 0, -1, false)
  local from = 1
  while from <= #lines and from <= #old and lines[from] == old[from] do
    from = from + 1
  end
  if from > #lines and from > #old then
    return -- nothing changed
  end
  -- windows that follow the end of the transcript keep following it
  local followers = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local row = api.nvim_win_get_cursor(win)[1]
    if row >= #old or #old <= 3 then
      table.insert(followers, win)
    end
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, from - 1, -1, false, vim.list_slice(lines, from))
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  view.lines = lines
  api.nvim_buf_clear_namespace(buf, M.ns, from - 1, -1)
  for i = from, #out do
    local hl = out[i][2]
    if hl and #lines[i] > 0 then
      api.nvim_buf_set_extmark(buf, M.ns, i - 1, 0, { end_col = #lines[i], hl_group = hl, priority = 200 })
    end
  end
  for _, win in ipairs(followers) do
    if api.nvim_win_is_valid(win) then
      api.nvim_win_set_cursor(win, { #lines, 0 })
    end
  end
end

local function schedule_render(view)
  if not view.render_scheduled then
    view.render_scheduled = true
    vim.schedule(function()
      render(view)
    end)
  end
end

--- Renders a view now (tests, after a batch).
function M.render_now(id)
  local view = M.views[id]
  if view then
    render(view)
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
          feed(view, r, res.events or {})
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
  if feed(view, r, events) then
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
  view.lines = nil
  render(view)
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
  view.lines = nil
  render(view)
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
