--- Questions the planner asks: vim.ui.select for choices (multi-select by repeated picks),
--- vim.ui.input for "Other" and free text. The answer goes back as a later `planwire/answer`
--- request: Neovim answers server requests at once with a handler's return value, so the
--- person's pick can never be the reply to a server request.
local M = {}

local client = require('planwire.client')

local OTHER = { label = 'Other…', other = true }
local DONE = { label = 'Done', done = true }

local function label_of(item)
  local head = (item.header and item.header ~= '') and (item.header .. ': ') or ''
  return head .. (item.question or '')
end

--- Asks one question item; `cb(answer)` with `{ selected = {...}, other = ? }`, or nil when cancelled.
function M.ask_item(item, cb)
  local prompt = label_of(item)
  local options = item.options or {}
  local function ask_other(selected)
    vim.ui.input({ prompt = prompt .. ' (other): ' }, function(text)
      if text == nil then
        return cb(nil)
      end
      cb({ selected = selected or {}, other = text })
    end)
  end
  if #options == 0 then
    return ask_other({})
  end
  local function fmt(choice)
    if choice.other or choice.done then
      return choice.label
    end
    local d = (choice.description and choice.description ~= '') and (' — ' .. choice.description) or ''
    return choice.label .. d
  end
  if not item.multiSelect then
    local choices = vim.list_extend({}, options)
    if item.allowOther then
      table.insert(choices, OTHER)
    end
    return vim.ui.select(choices, { prompt = prompt, format_item = fmt, kind = 'planwire.question' }, function(choice)
      if choice == nil then
        return cb(nil)
      elseif choice.other then
        return ask_other({})
      end
      cb({ selected = { choice.label } })
    end)
  end
  -- multi-select: pick options one at a time (each pick toggles it), then "Done"
  local chosen = {}
  local function loop()
    local choices = {}
    for _, opt in ipairs(options) do
      table.insert(choices, opt)
    end
    if item.allowOther then
      table.insert(choices, OTHER)
    end
    table.insert(choices, DONE)
    vim.ui.select(choices, {
      prompt = prompt .. ' (pick any, then Done)',
      kind = 'planwire.question.multi',
      format_item = function(choice)
        if choice.other or choice.done then
          return choice.label
        end
        return (chosen[choice.label] and '[x] ' or '[ ] ') .. fmt(choice)
      end,
    }, function(choice)
      if choice == nil then
        return cb(nil)
      end
      local selected = {}
      for _, opt in ipairs(options) do
        if chosen[opt.label] then
          table.insert(selected, opt.label)
        end
      end
      if choice.done then
        return cb({ selected = selected })
      elseif choice.other then
        return ask_other(selected)
      end
      chosen[choice.label] = not chosen[choice.label] or nil
      vim.schedule(loop)
    end)
  end
  loop()
end

--- Asks every item of a question, then sends `planwire/answer`.
--- @param q table question record
--- @param cb fun(err: any, result: any)?
function M.ask(q, cb)
  local answers = {}
  local items = q.items or {}
  local function step(i)
    if i > #items then
      return M.send(q.ticketId, q.id, answers, cb)
    end
    M.ask_item(items[i], function(answer)
      if not answer then
        client.notify('answer cancelled')
        if cb then
          cb({ message = 'cancelled' })
        end
        return
      end
      answers[i] = answer
      step(i + 1)
    end)
  end
  step(1)
end

--- Sends `planwire/answer { ticketId, questionId, answers }`.
function M.send(ticket_id, question_id, answers, cb)
  client.request('planwire/answer', { ticketId = ticket_id, questionId = question_id, answers = answers }, function(err, result)
    if err then
      client.notify('answer: ' .. client.format_error(err), vim.log.levels.ERROR)
    else
      local q = client.state.questions[question_id]
      if q then
        q.status = 'answered'
        q.answers = answers
      end
      client.notify(('answer sent; planning resumes (run %s)'):format(tostring(result and result.runId)))
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Dismisses a question: `planwire/answer { ticketId, questionId, dismiss = true }`.
function M.dismiss(ticket_id, question_id, cb)
  client.request('planwire/answer', { ticketId = ticket_id, questionId = question_id, dismiss = true }, function(err, result)
    if err then
      client.notify('dismiss: ' .. client.format_error(err), vim.log.levels.ERROR)
    end
    if cb then
      cb(err, result)
    end
  end)
end

local function open_questions(result)
  local list = {}
  local seen = {}
  for _, q in ipairs((result.ticket or {}).openQuestions or {}) do
    if not seen[q.id] then
      seen[q.id] = true
      table.insert(list, q)
    end
  end
  for _, q in ipairs(result.questions or {}) do
    if not seen[q.id] and (q.status == 'open' or q.status == 'stale') then
      seen[q.id] = true
      table.insert(list, q)
    end
  end
  return list
end

--- :Planwire answer [id] — picks the ticket's open question (if several) and asks it.
--- With `dismiss`, declines it instead.
function M.answer(ticket_id, opts, cb)
  opts = opts or {}
  client.get_ticket(ticket_id, function(err, result)
    if err then
      client.notify('getTicket: ' .. client.format_error(err), vim.log.levels.ERROR)
      return cb and cb(err)
    end
    local list = open_questions(result or {})
    if #list == 0 then
      client.notify(('ticket %d has no open question'):format(ticket_id), vim.log.levels.WARN)
      return cb and cb({ message = 'no open question' })
    end
    local function go(q)
      if not q then
        return cb and cb({ message = 'cancelled' })
      end
      q.ticketId = q.ticketId or ticket_id
      if opts.dismiss then
        return M.dismiss(ticket_id, q.id, cb)
      end
      M.ask(q, cb)
    end
    if #list == 1 then
      return go(list[1])
    end
    vim.ui.select(list, {
      prompt = 'Question to answer',
      format_item = function(q)
        return ('%d: %s'):format(q.id, label_of((q.items or {})[1] or {}))
      end,
    }, go)
  end)
end

--- planwire/question
function M.on_question(ticket_id, run_id, question)
  if type(question) ~= 'table' then
    return
  end
  question.ticketId = question.ticketId or ticket_id
  client.state.questions[question.id] = question
  local t = client.state.tickets[ticket_id]
  if t then
    t.openQuestions = t.openQuestions or {}
    local known = false
    for _, q in ipairs(t.openQuestions) do
      known = known or q.id == question.id
    end
    if not known and (question.status == nil or question.status == 'open' or question.status == 'stale') then
      table.insert(t.openQuestions, question)
    end
    require('planwire.transcript').on_ticket(t)
    require('planwire.tickets').on_ticket(t)
  end
  -- the person may be anywhere (another buffer, tab or project): say how to answer
  local first = (question.items or {})[1] or {}
  client.notify(('ticket %d asks: %s (answer with :Planwire answer %d)'):format(ticket_id, label_of(first), ticket_id),
    vim.log.levels.WARN)
  if require('planwire').config.ask_on_question then
    vim.schedule(function()
      M.ask(question)
    end)
  end
end

return M
