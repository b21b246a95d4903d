--- What the transcript and breakdown buffers say: model items, tickets, runs and questions as
--- markdown lines (`{text, hl?, ticket?}`), in the blocks `planwire.layout` writes. Pure: no
--- buffer, no state.
local M = {}

-- Text ----------------------------------------------------------------------------------------

--- Removes the `<planwire-…>` JSON blocks (`plan`, and a breakdown's `outline`, `expansion`,
--- `research-selection`, `research`: any name, by one rule), and an unfinished one still
--- streaming, from text.
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

function M.one_line(s, max)
  s = tostring(s or ''):gsub('%s*\n%s*', ' ⏎ '):gsub('%s+$', '')
  max = max or 160
  if #s > max and vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. '…'
  end
  return s
end
local one_line = M.one_line

function M.split_lines(s)
  return vim.split(s, '\n', { plain = true })
end
local split_lines = M.split_lines

local function indent(depth)
  return string.rep('  ', depth or 0)
end

-- Items ---------------------------------------------------------------------------------------

--- The block of one transcript item: a paragraph of text or reasoning (blank lines around it),
--- a tool call with its result's mark, or a one-line note.
--- @return { lines: table[], before: boolean, after: boolean }
function M.item_block(item)
  local pad = indent(item.depth)
  local lines = {}
  if item.hidden then
    return { lines = lines, before = false, after = false }
  end
  if item.kind == 'text' or item.kind == 'reasoning' then
    local text = item.kind == 'text' and M.strip_plan(item.text) or item.text
    text = text:gsub('^%s*\n', ''):gsub('%s+$', '')
    if text ~= '' then
      local quote = item.kind == 'reasoning' and '> ' or ''
      local hl = item.kind == 'reasoning' and 'Comment' or nil
      for _, l in ipairs(split_lines(text)) do
        lines[#lines + 1] = { pad .. quote .. l, hl }
      end
    end
    return { lines = lines, before = true, after = true }
  elseif item.kind == 'tool' then
    local mark = ({ completed = '✓', error = '✗', running = '…' })[item.status or 'running'] or '…'
    local s = ('%s▸ %s %s %s'):format(pad, one_line(item.name, 40), one_line(item.input, 100), mark)
    if item.status == 'error' and item.output and item.output ~= '' then
      s = s .. ' ' .. one_line(item.output, 120)
    end
    lines[1] = { s, item.status == 'error' and 'DiagnosticError' or 'Comment' }
    return { lines = lines, before = false, after = false }
  end
  lines[1] = { pad .. item.text, item.hl }
  return { lines = lines, before = item.blank_before or false, after = false }
end

-- Blocks of lines -------------------------------------------------------------------------------

--- Lines joined with one blank line between groups, the way the blocks of a layout are: a list
--- of groups `{ lines, before, after }`, empty groups skipped.
function M.join(groups)
  local out, prev = {}, nil
  for _, g in ipairs(groups) do
    if #g.lines > 0 then
      if prev ~= nil and (prev or g.before) then
        out[#out + 1] = { '' }
      end
      vim.list_extend(out, g.lines)
      prev = g.after
    end
  end
  return out
end

local function bullet_list(out, heading, list, checkbox)
  if type(list) ~= 'table' or #list == 0 then
    return
  end
  table.insert(out, { '' })
  table.insert(out, { '## ' .. heading })
  table.insert(out, { '' })
  for _, s in ipairs(list) do
    local lines = split_lines(tostring(s))
    table.insert(out, { (checkbox and '- [ ] ' or '- ') .. lines[1] })
    for i = 2, #lines do
      table.insert(out, { '  ' .. lines[i] })
    end
  end
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

--- Drops trailing blank lines.
local function trim(out)
  while #out > 0 and out[#out][1] == '' do
    table.remove(out)
  end
  return out
end

-- Tickets ---------------------------------------------------------------------------------------

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

local STATUS_WORD = {
  needs_input = 'needs input',
}

-- A ticket's transcript -------------------------------------------------------------------------

--- "2026-11-30 12:25 UTC" of an RFC 3339 time, else the text as it is.
function M.when(ts)
  local d, hm = tostring(ts or ''):match('^(%d+%-%d+%-%d+)T(%d+:%d+)')
  return d and (d .. ' ' .. hm .. ' UTC') or tostring(ts or '')
end

--- A duration in milliseconds, for people: "389 ms", "1.2 s", "3 min 12 s".
function M.duration(ms)
  ms = tonumber(ms) or 0
  if ms < 1000 then
    return ('%d ms'):format(ms)
  elseif ms < 60000 then
    return ('%.1f s'):format(ms / 1000)
  end
  local s = math.floor(ms / 1000 + 0.5)
  return ('%d min %d s'):format(math.floor(s / 60), s % 60)
end

--- The planner of a ticket or run: "claude opus (high)".
local function planner_text(x)
  if not x.tool then
    return ''
  end
  return x.tool .. (x.model and (' ' .. x.model) or '') .. (x.variant and (' (' .. x.variant .. ')') or '')
end

--- The head of a ticket's transcript: title, status, planner, branch, plan version, where it
--- came from, its hand-off, a sync error.
function M.ticket_head(ticket_id, t, error)
  local lines = {}
  table.insert(lines, { '# ' .. one_line(t.title or ('Ticket ' .. ticket_id), 200) })
  local status = t.status and (STATUS_WORD[t.status] or t.status) or 'loading'
  local parts = { ('ticket %d'):format(ticket_id), status }
  local tool = planner_text(t)
  if tool ~= '' then
    table.insert(parts, tool)
  end
  if t.branch then
    table.insert(parts, 'branch ' .. one_line(t.branch, 100))
  end
  if t.planVersion then
    table.insert(parts, 'plan v' .. tostring(t.planVersion))
  end
  table.insert(lines, { '_' .. table.concat(parts, ' · ') .. '_' })
  if t.handedOffAt then
    table.insert(lines, { ('_handed off to %s · %s_'):format(tostring(t.handedOffTool or '?'), M.when(t.handedOffAt)),
      'Comment' })
  end
  if t.initiativeRunId then
    table.insert(lines, { ('_from breakdown run %d%s_'):format(t.initiativeRunId, M.after_text(t)), 'Comment' })
  end
  local groups = { { lines = lines, after = true } }
  if error then
    table.insert(groups, { lines = { { '**error:** ' .. one_line(error, 400), 'DiagnosticError' } }, before = true, after = true })
  end
  return M.join(groups)
end

--- What a run's `sandbox` says in its heading, and whether it warns (the planner ran without
--- the OS sandbox). Nil before the planner started (and for runs recorded without it).
function M.sandbox_word(sandbox)
  if sandbox == 'enforced' then
    return 'sandbox enforced', false
  elseif type(sandbox) == 'string' then
    return '⚠ sandbox ' .. sandbox, true
  end
  return nil, false
end

--- `text .. ' · ' .. word`, with a span highlighting the word when it warns.
local function with_sandbox(text, sandbox)
  local word, warn = M.sandbox_word(sandbox)
  if not word then
    return text, nil
  end
  local col = #text + #' · '
  text = text .. ' · ' .. word
  return text, warn and { { col, #text, 'DiagnosticWarn' } } or nil
end

--- The heading of one run of a ticket: status, sandbox, failure.
function M.run_heading(run_id, run)
  local head, spans = with_sandbox(('## Run %d · %s'):format(run_id, run.status or 'running'), run.sandbox)
  if type(run.failure) == 'table' then
    head = head .. ' · ' .. one_line((run.failure.code or '') .. ': ' .. (run.failure.message or ''), 200)
  end
  return { { head, type(run.failure) == 'table' and run.status == 'failed' and 'DiagnosticError' or nil, spans = spans } }
end

--- The foot of one run: the files it changed in the work tree (it must never), its timing.
function M.run_foot(run)
  local out = {}
  local violation = type(run.readonlyViolation) == 'table' and run.readonlyViolation.paths
  if type(violation) == 'table' and #violation > 0 then
    table.insert(out, { '**Planning changed files in the work tree** (it must never; the plan is kept, review '
      .. 'them before you build on it):', 'DiagnosticError' })
    for _, path in ipairs(violation) do
      table.insert(out, { '- `' .. one_line(path, 400) .. '`', 'DiagnosticError' })
    end
  end
  local timing = run.timing
  if type(timing) == 'table' and timing.totalMs then
    local parts = { 'took ' .. M.duration(timing.totalMs) }
    if timing.firstOutputMs then
      table.insert(parts, 'first output after ' .. M.duration(timing.firstOutputMs))
    end
    if timing.firstFinalMs then
      table.insert(parts, 'answer after ' .. M.duration(timing.firstFinalMs))
    end
    table.insert(out, { '_' .. table.concat(parts, ' · ') .. '_', 'Comment' })
  end
  return out
end

--- "_all runs: 200 in · 40 out · … · $0.0020_" of a ticket's summed usage (nil when none).
function M.usage_total(usage)
  if type(usage) ~= 'table' then
    return nil
  end
  local tokens = (usage.inputTokens or 0) + (usage.outputTokens or 0) + (usage.cacheReadTokens or 0)
    + (usage.cacheWriteTokens or 0)
  if tokens == 0 and (usage.costUsd or 0) == 0 then
    return nil
  end
  return ('_all runs of the ticket: %d in · %d out · %d cache read · %d cache write · $%.4f_'):format(
    usage.inputTokens or 0, usage.outputTokens or 0, usage.cacheReadTokens or 0, usage.cacheWriteTokens or 0,
    usage.costUsd or 0)
end

--- The foot of a ticket's transcript: the ticket's usage, the plan, answered questions, open
--- questions.
function M.ticket_foot(t, questions, usage)
  local out = {}
  local total = M.usage_total(usage)
  if total then
    table.insert(out, { total, 'Comment' })
    table.insert(out, { '' })
  end
  local plan = t.plan
  if type(plan) == 'table' then
    table.insert(out, { '---' })
    table.insert(out, { '' })
    table.insert(out, { '# Plan: ' .. one_line(plan.title or t.title or '', 200) })
    local desc = tostring(plan.description or ''):gsub('%s+$', '')
    if desc ~= '' then
      table.insert(out, { '' })
      for _, l in ipairs(split_lines(desc)) do
        table.insert(out, { l })
      end
    end
    bullet_list(out, 'Acceptance criteria', plan.acceptanceCriteria, true)
    if not (t.openQuestions and #t.openQuestions > 0) then
      bullet_list(out, 'Open questions', plan.openQuestions)
    end
    bullet_list(out, 'Dependencies', plan.dependencies)
    table.insert(out, { '' })
  end
  local answered = {}
  for _, q in ipairs(questions or {}) do
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
  return trim(out)
end

-- A breakdown -----------------------------------------------------------------------------------

--- The head of a breakdown buffer: title, status, the description, errors, the passes.
function M.breakdown_head(run_id, run, description, error, agent_runs)
  local out = {}
  local desc = description or ''
  local first = vim.split(vim.trim(desc), '\n', { plain = true })[1] or ''
  table.insert(out, { '# Breakdown' .. (first ~= '' and (': ' .. one_line(first, 200)) or (' ' .. run_id)) })
  local tool = planner_text(run)
  local text, spans = with_sandbox(('_breakdown run %d · %s%s'):format(run_id, run.status or 'loading',
    tool ~= '' and (' · ' .. tool) or ''), run.sandbox)
  table.insert(out, { text .. '_', nil, spans = spans })
  table.insert(out, { '' })
  if vim.trim(desc) ~= '' then
    for _, l in ipairs(split_lines(vim.trim(desc))) do
      table.insert(out, { '> ' .. l, 'Comment' })
    end
    table.insert(out, { '' })
  end
  if error then
    table.insert(out, { '**error:** ' .. one_line(error, 400), 'DiagnosticError' })
    table.insert(out, { '' })
  end
  if type(run.failure) == 'table' then
    table.insert(out, { ('**%s** (%s): %s'):format(run.status or 'failed', tostring(run.failure.code or '?'),
      one_line(run.failure.message, 400)), 'DiagnosticError' })
    table.insert(out, { '' })
  end
  if agent_runs and #agent_runs > 0 then
    table.insert(out, { '## Passes' })
    table.insert(out, { '' })
    for _, a in ipairs(agent_runs) do
      local pad = a.parentId and '  ' or ''
      table.insert(out, { ('%s- %s · %s'):format(pad, one_line(a.label, 80), tostring(a.status)),
        a.status == 'failed' and 'DiagnosticError' or nil })
    end
  end
  return trim(out)
end

local RUN_ACTIVE = { queued = true, running = true }
M.RUN_ACTIVE = RUN_ACTIVE

--- The foot of a breakdown buffer: the tickets it created (each line knows its ticket).
--- @param list table[] the tickets
function M.breakdown_foot(run, list)
  local out = {}
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
  return out
end

return M
