local H = require('helpers')
local api = vim.api

local notified = H.notified

describe('questions', function()
  local restore
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  it('a plan with open questions reaches the user: notification, ticket, transcript, tickets list', function()
    H.fresh({ model = 'questions' })
    _G.planwire_test_notifications = {}
    local t = H.create_ticket('Ask me', 'x', 'questions')
    assert.equals('', require('planwire').statusline())
    vim.cmd('Planwire plan')
    local buf = api.nvim_get_current_buf()
    local ticket = H.wait_status(t.id, 'needs_input', nil, buf)
    H.wait('the planwire/question notification', function()
      return notified('ticket ' .. t.id .. ' asks:')
    end)
    -- the notification says how to answer, wherever the person is
    assert.truthy(notified('ticket ' .. t.id .. ' asks:').msg:find(':Planwire answer ' .. t.id, 1, true))
    assert.is_true(#ticket.openQuestions > 0)
    local q = ticket.openQuestions[1]
    assert.equals('open', q.status)
    assert.is_true(#q.items > 0)
    H.wait('the question in the transcript', function()
      return H.text(buf):find(q.items[1].question, 1, true)
    end, nil, function()
      return H.text(buf)
    end)
    assert.same({}, H.duplicates(H.lines(buf)))
    vim.cmd('Planwire tickets')
    local tbuf = api.nvim_get_current_buf()
    H.wait('the question in the tickets list', function()
      return H.text(tbuf):find('? question ' .. q.id, 1, true) and H.text(tbuf):find('needs_input', 1, true)
    end, nil, function()
      return H.text(tbuf)
    end)
    -- the count of tickets needing input: the tickets header and the statusline function
    assert.truthy(H.lines(tbuf)[1]:find(' · 1 needs input (a answers)', 1, true), H.lines(tbuf)[1])
    assert.equals('planwire: 1 needs input', require('planwire').statusline())
    vim.o.statusline = "%{v:lua.require'planwire'.statusline()}"
    vim.o.laststatus = 2
    assert.equals('planwire: 1 needs input', vim.api.nvim_eval_statusline(vim.o.statusline, {}).str)
    vim.o.statusline, vim.o.laststatus = '', 2
  end)

  it(':Planwire answer asks through vim.ui and sends a later planwire/answer request', function()
    H.fresh({ model = 'questions' })
    local t = H.create_ticket('Answer me', 'x', 'questions')
    vim.cmd('Planwire plan')
    local ticket = H.wait_status(t.id, 'needs_input')
    local q = ticket.openQuestions[1]

    -- one scripted reply per item: a pick for items with options, text for the others
    local inputs, picks = {}, {}
    for i, item in ipairs(q.items) do
      if #(item.options or {}) > 0 then
        table.insert(picks, function(items)
          return items[1]
        end)
      else
        table.insert(inputs, 'answer ' .. i)
      end
    end
    local calls
    restore, calls = H.stub_ui(inputs, picks)

    local client = require('planwire.client')
    local sent, reply
    local orig = client.request
    client.request = function(method, params, cb)
      if method == 'planwire/answer' then
        sent = params
        return orig(method, params, function(err, result)
          reply = { err = err, result = result }
          if cb then
            cb(err, result)
          end
        end)
      end
      return orig(method, params, cb)
    end
    local ok, e = pcall(function()
      vim.cmd('Planwire answer')
      H.wait('the planwire/answer reply', function()
        return reply
      end)
    end)
    client.request = orig
    assert(ok, e)

    assert.equals(#q.items, #calls.input + #calls.select)
    assert.equals(t.id, sent.ticketId)
    assert.equals(q.id, sent.questionId)
    assert.equals(#q.items, #sent.answers)
    for i, item in ipairs(q.items) do
      if #(item.options or {}) > 0 then
        assert.same({ item.options[1].label }, sent.answers[i].selected)
      else
        assert.equals('answer ' .. i, sent.answers[i].other)
      end
    end

    assert.is_nil(reply.err, vim.inspect(reply.err))
    assert.is_number(reply.result.runId)
    -- the question is answered and planning resumed with a run
    H.wait('the question answered', function()
      local got = H.request('planwire/getTicket', { ticketId = t.id })
      for _, gq in ipairs(got.questions) do
        if gq.id == q.id then
          return gq.status == 'answered'
        end
      end
    end)
    local got = H.request('planwire/getTicket', { ticketId = t.id })
    local found = false
    for _, run in ipairs(got.runs) do
      found = found or run.id == reply.result.runId
    end
    assert.is_true(found, 'run ' .. reply.result.runId .. ' not among ' .. vim.inspect(got.runs))
  end)

  it('a live question (the `ask` script) is answered end to end through the choice UI', function()
    H.fresh({ model = 'ask' })
    local t = H.create_ticket('Live question', 'x', 'ask')
    vim.cmd('Planwire plan')
    local buf = api.nvim_get_current_buf()
    local ticket = H.wait_status(t.id, 'needs_input', nil, buf)
    local q = ticket.openQuestions[1]
    assert.equals('live', q.source)
    assert.equals('Which greeting should the program print?', q.items[1].question)
    -- the run waits for the answer meanwhile
    H.wait('the question in the transcript', function()
      return H.text(buf):find('Which greeting should the program print?', 1, true)
    end, nil, function()
      return H.text(buf)
    end)

    local shown
    local calls
    restore, calls = H.stub_ui({}, { function(items, o)
      shown = vim.tbl_map(o.format_item, items)
      for _, it in ipairs(items) do
        if it.label == 'Hi there' then
          return it
        end
      end
    end })
    vim.cmd('Planwire answer ' .. t.id)
    H.wait_status(t.id, { 'planned', 'failed' }, nil, buf)
    assert.equals('planned', H.ticket(t.id).status)
    assert.equals(1, #calls.select)
    assert.equals('Greeting: Which greeting should the program print?', calls.select[1].opts.prompt)
    assert.same({ 'Hello, world (Recommended) — Classic greeting', 'Hi there — Informal greeting', 'Other…' }, shown)

    -- the server keeps the answer; the same run went on to the plan
    local got = H.request('planwire/getTicket', { ticketId = t.id })
    assert.equals(1, #got.runs)
    assert.equals('completed', got.runs[1].status)
    assert.equals('answered', got.questions[1].status)
    assert.same({ { selected = { 'Hi there' } } }, got.questions[1].answers)
    assert.same({}, got.ticket.openQuestions)
    -- the transcript shows the answer and the plan, and no open question
    H.wait('the answer and the plan in the transcript', function()
      local text = H.text(buf)
      return text:find('## Answered questions', 1, true) and text:find('→ `Hi there`', 1, true)
        and text:find('# Plan: ', 1, true)
    end, nil, function()
      return H.text(buf)
    end)
    assert.falsy(H.text(buf):find('Questions waiting for an answer', 1, true))
    assert.same({}, H.duplicates(H.lines(buf)))
  end)

  describe('the choice UI', function()
    local questions
    before_each(function()
      H.unload()
      questions = require('planwire.questions')
    end)

    local function ask(item)
      local got
      questions.ask_item(item, function(a)
        got = a or false
      end)
      H.wait('an answer', function()
        return got ~= nil
      end, 5000)
      return got
    end

    local function pick(label)
      return function(items, o)
        for _, it in ipairs(items) do
          if it.label == label then
            return it
          end
        end
        error('no ' .. label .. ' in ' .. vim.inspect(vim.tbl_map(o.format_item, items)))
      end
    end

    it('single choice with vim.ui.select', function()
      restore = H.stub_ui({}, { pick('b') })
      local a = ask({ header = 'H', question = 'Q?', options = { { label = 'a' }, { label = 'b' } } })
      assert.same({ selected = { 'b' } }, a)
    end)

    it('"Other" asks with vim.ui.input', function()
      restore = H.stub_ui({ 'my own' }, { pick('Other…') })
      local a = ask({ question = 'Q?', options = { { label = 'a' } }, allowOther = true })
      assert.same({ selected = {}, other = 'my own' }, a)
    end)

    it('multi-select by repeated picks, then Done', function()
      restore = H.stub_ui({}, { pick('a'), pick('c'), pick('a'), pick('b'), pick('Done') })
      local a = ask({ question = 'Q?', multiSelect = true, options = { { label = 'a' }, { label = 'b' }, { label = 'c' } } })
      assert.same({ selected = { 'b', 'c' } }, a)
    end)

    it('cancelling gives no answer', function()
      restore = H.stub_ui({}, { function() return nil end })
      assert.is_false(ask({ question = 'Q?', options = { { label = 'a' } } }))
    end)
  end)
end)
