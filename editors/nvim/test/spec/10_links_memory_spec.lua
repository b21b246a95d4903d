local H = require('helpers')
local api = vim.api

local function line_of(buf, pattern)
  for i, l in ipairs(H.lines(buf)) do
    if l:match(pattern) then
      return i, l
    end
  end
end

local function notified(pattern)
  for _, n in ipairs(_G.planwire_test_notifications) do
    if tostring(n.msg):find(pattern, 1, true) then
      return n
    end
  end
end

local function feed(keys)
  api.nvim_feedkeys(api.nvim_replace_termcodes(keys, true, false, true), 'mx', false)
end

describe('linked projects', function()
  after_each(function()
    H.stop_servers()
  end)

  it(':Planwire link, :Planwire links and :Planwire unlink', function()
    H.fresh()
    local backend = H.tempdir('backend')
    local links = require('planwire.links')
    vim.cmd('Planwire link ' .. vim.fn.fnameescape(backend) .. ' backend the API server the web app calls')
    H.wait('the link made', function()
      return links.last and #links.last.links == 1
    end)
    local l = links.last.links[1]
    assert.equals('backend', l.name)
    assert.equals(vim.fn.resolve(backend), vim.fn.resolve(l.linkedRoot))
    assert.equals('the API server the web app calls', l.role)
    assert.same(links.last.links, H.request('planwire/listLinks', { root = H.project }).links)

    -- a relative path is taken from the cwd; a missing role is asked for
    local other = H.tempdir('docs-site')
    local restore = H.stub_ui({ 'the documentation site' })
    links.last = nil
    vim.cmd('Planwire link ../' .. vim.fn.fnamemodify(other, ':t') .. ' docs')
    H.wait('the second link', function()
      return links.last and #links.last.links == 2
    end)
    restore()

    _G.planwire_test_notifications = {}
    links.last = nil
    vim.cmd('Planwire links')
    H.wait('the list', function()
      return links.last
    end)
    assert.truthy(notified('backend → '), vim.inspect(_G.planwire_test_notifications))
    assert.truthy(notified('docs → '))
    assert.truthy(notified('the documentation site'))

    -- completion: link completes directories, unlink the names
    assert.same({ 'backend', 'docs' }, vim.fn.getcompletion('Planwire unlink ', 'cmdline'))
    assert.same({ 'docs' }, vim.fn.getcompletion('Planwire unlink d', 'cmdline'))
    local dirs = vim.fn.getcompletion('Planwire link ../backend', 'cmdline')
    assert.is_true(#dirs > 0 and vim.startswith(dirs[1], '../backend'), vim.inspect(dirs))

    links.last = nil
    vim.cmd('Planwire unlink backend')
    H.wait('the link removed', function()
      return links.last and #links.last.links == 1
    end)
    assert.equals('docs', links.last.links[1].name)
    assert.same({ 'docs' }, vim.tbl_map(function(x)
      return x.name
    end, H.request('planwire/listLinks', { root = H.project }).links))
  end)
end)

--- A `script` planner file whose plan carries memory suggestions.
local function suggesting_script(suggestions)
  local plan = {
    title = 'Change the greeting',
    description = '## Context\nThe greeting is in src/main.rs.',
    acceptanceCriteria = { 'prints hi' },
    openQuestions = {},
    dependencies = {},
    memorySuggestions = suggestions,
  }
  local text = 'I read src/main.rs.\n\n<planwire-plan>' .. vim.json.encode(plan) .. '</planwire-plan>'
  local session = '5a1d6c4e-0b7e-4f0e-9d7c-3f1b2a9e8d70'
  local assistant = { type = 'assistant', message = { id = 'm1', content = { { type = 'text', text = text } } },
    parent_tool_use_id = vim.NIL, session_id = session }
  local result = { type = 'result', subtype = 'success', is_error = false, result = text, session_id = session,
    usage = { input_tokens = 1, output_tokens = 1 }, total_cost_usd = 0 }
  local path = H.tempdir('scripts') .. '/suggesting.jsonl'
  vim.fn.writefile({
    vim.json.encode({ format = 'claude' }),
    vim.json.encode({ out = vim.json.encode(assistant) }),
    vim.json.encode({ out = vim.json.encode(result) }),
    vim.json.encode({ exit = 0 }),
  }, path)
  return path
end

describe(':Planwire memory', function()
  local restore
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  it('lists entries, adds with a, deletes with d, and :Planwire memory add/remove', function()
    H.fresh()
    local memory = require('planwire.memory')
    vim.cmd('Planwire memory')
    local buf = api.nvim_get_current_buf()
    assert.equals('planwire://memory', api.nvim_buf_get_name(buf))
    H.wait('the empty list', function()
      return line_of(buf, '^Entries %(0%)') and line_of(buf, '^Suggestions waiting %(0%)')
    end, nil, function()
      return H.text(buf)
    end)
    assert.is_false(vim.bo[buf].modifiable)

    restore = H.stub_ui({ 'Uses clap for argument parsing.' })
    local n = memory.view.loaded
    feed('a')
    H.wait('the entry added', function()
      return line_of(buf, '^  #%d+%s+Uses clap for argument parsing%.  %(user · ')
    end, nil, function()
      return H.text(buf)
    end)
    assert.is_true(memory.view.loaded > n)
    local list = H.request('planwire/memory/list', { root = H.project })
    assert.equals(1, #list.entries)
    assert.equals('Uses clap for argument parsing.', list.entries[1].text)
    assert.equals('user', list.entries[1].source)

    vim.cmd('Planwire memory add Tests live in tests/.')
    H.wait('the second entry', function()
      return line_of(buf, '^Entries %(2%)') and line_of(buf, 'Tests live in tests/%.')
    end, nil, function()
      return H.text(buf)
    end)
    local ids = vim.fn.getcompletion('Planwire memory remove ', 'cmdline')
    assert.equals(2, #ids, vim.inspect(ids))
    assert.same({ 'add', 'remove' }, vim.fn.getcompletion('Planwire memory ', 'cmdline'))

    -- d on the first entry's line deletes it
    local row = line_of(buf, 'Uses clap')
    api.nvim_set_current_buf(buf)
    api.nvim_win_set_cursor(0, { row, 0 })
    feed('d')
    H.wait('the entry deleted', function()
      return line_of(buf, '^Entries %(1%)') and not line_of(buf, 'Uses clap')
    end, nil, function()
      return H.text(buf)
    end)
    list = H.request('planwire/memory/list', { root = H.project })
    assert.equals(1, #list.entries)
    assert.equals('Tests live in tests/.', list.entries[1].text)

    vim.cmd('Planwire memory remove ' .. list.entries[1].id)
    H.wait('the last entry removed', function()
      return line_of(buf, '^Entries %(0%)')
    end, nil, function()
      return H.text(buf)
    end)
    assert.same({}, H.request('planwire/memory/list', { root = H.project }).entries)
  end)

  it('accepts a plan\'s suggestion with y and rejects one with n', function()
    local script = suggesting_script({ 'The CLI uses clap.', 'Greetings are in English.' })
    H.fresh({ model = script })
    local t = H.create_ticket('Suggest', 'x', script)
    vim.cmd('Planwire plan')
    H.wait_status(t.id, { 'planned', 'failed' })
    assert.equals('planned', H.ticket(t.id).status)
    vim.cmd('Planwire memory')
    local buf = api.nvim_get_current_buf()
    H.wait('two suggestions waiting', function()
      return line_of(buf, '^Suggestions waiting %(2%)')
    end, nil, function()
      return H.text(buf)
    end)
    local row, l = line_of(buf, 'The CLI uses clap%.')
    assert.truthy(l:find('(from ticket #' .. t.id .. ')', 1, true), l)
    api.nvim_win_set_cursor(0, { row, 0 })
    feed('y')
    H.wait('accepted: an entry', function()
      return line_of(buf, '^Entries %(1%)') and line_of(buf, '^  #%d+%s+The CLI uses clap%.  %(suggestion · ')
    end, nil, function()
      return H.text(buf)
    end)
    row = line_of(buf, 'Greetings are in English%.')
    api.nvim_win_set_cursor(0, { row, 0 })
    feed('n')
    H.wait('rejected: nothing waits', function()
      return line_of(buf, '^Suggestions waiting %(0%) · 2 decided')
    end, nil, function()
      return H.text(buf)
    end)
    local list = H.request('planwire/memory/list', { root = H.project })
    local status = {}
    for _, s in ipairs(list.suggestions) do
      status[s.text] = s.status
    end
    assert.same({ ['The CLI uses clap.'] = 'accepted', ['Greetings are in English.'] = 'rejected' }, status)
    assert.same({ 'The CLI uses clap.' }, vim.tbl_map(function(e)
      return e.text
    end, list.entries))
  end)
end)

describe(':Planwire delete', function()
  local restore
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  it('asks first, then deletes the ticket everywhere; ! does not ask', function()
    H.fresh()
    local a = H.create_ticket('Keep me', 'a')
    local b = H.create_ticket('Delete me', 'b')
    local c = H.create_ticket('Delete me too', 'c')
    vim.cmd('Planwire transcript ' .. b.id)
    vim.cmd('Planwire edit ' .. b.id) -- its other buffers go with it too
    vim.cmd('Planwire feedback ' .. b.id)
    vim.cmd('Planwire tickets')
    local tbuf = api.nvim_get_current_buf()
    H.wait('three tickets listed', function()
      return line_of(tbuf, '^#' .. a.id .. ' ') and line_of(tbuf, '^#' .. b.id .. ' ') and line_of(tbuf, '^#' .. c.id .. ' ')
    end, nil, function()
      return H.text(tbuf)
    end)
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire delete ', 'cmdline'), tostring(b.id)))

    -- cancelled: nothing happens
    local calls
    restore, calls = H.stub_ui({}, { function(items)
      return items[2]
    end })
    local done
    require('planwire.commands').delete(tostring(b.id), false, function(err)
      done = err or true
    end)
    vim.wait(500, function()
      return done ~= nil
    end)
    assert.is_nil(done)
    assert.equals(1, #calls.select)
    assert.truthy(calls.select[1].opts.prompt:find('"Delete me"', 1, true), calls.select[1].opts.prompt)
    assert.equals(b.id, H.request('planwire/getTicket', { ticketId = b.id }).ticket.id)
    restore()

    -- confirmed
    restore, calls = H.stub_ui({}, { function(items)
      return items[1]
    end })
    vim.cmd('Planwire delete ' .. b.id)
    H.wait('the ticket gone from the tickets buffer', function()
      return not line_of(tbuf, '^#' .. b.id .. ' ')
    end, nil, function()
      return H.text(tbuf)
    end)
    local err = require('planwire.client').request_sync('planwire/getTicket', { ticketId = b.id })
    assert.equals(-32011, err and err.code, vim.inspect(err))
    assert.is_nil(H.find_buf('planwire://ticket/' .. b.id))
    assert.is_nil(H.find_buf('planwire://edit/' .. b.id))
    assert.is_nil(H.find_buf('planwire://feedback/' .. b.id))
    assert.is_false(vim.tbl_contains(vim.fn.getcompletion('Planwire delete ', 'cmdline'), tostring(b.id)))
    restore()

    -- d in the tickets buffer asks too; :Planwire delete! does not
    restore, calls = H.stub_ui({}, { function(items)
      return items[1]
    end })
    api.nvim_set_current_buf(tbuf)
    api.nvim_win_set_cursor(0, { line_of(tbuf, '^#' .. c.id .. ' '), 0 })
    feed('d')
    H.wait('c deleted with d', function()
      return not line_of(tbuf, '^#' .. c.id .. ' ')
    end, nil, function()
      return H.text(tbuf)
    end)
    assert.equals(1, #calls.select)
    vim.cmd('Planwire delete! ' .. a.id)
    H.wait('a deleted without asking', function()
      return not line_of(tbuf, '^#' .. a.id .. ' ')
    end, nil, function()
      return H.text(tbuf)
    end)
    assert.equals(1, #calls.select)
    assert.same({}, H.request('planwire/listTickets', { root = H.project }).tickets)
  end)
end)
