local H = require('helpers')
local api = vim.api

local function line_of(buf, pattern)
  for i, l in ipairs(H.lines(buf)) do
    if l:match(pattern) then
      return i, l
    end
  end
end

local function run_status(id)
  local run = require('planwire.client').state.runs[id]
  return run and run.status
end

--- Wraps client.request to record the params of `method`; returns the list and a restore function.
local function spy(method)
  local client = require('planwire.client')
  local orig = client.request
  local sent = {}
  client.request = function(m, params, cb)
    if m == method then
      table.insert(sent, params)
    end
    return orig(m, params, cb)
  end
  return sent, function()
    client.request = orig
  end
end

describe(':Planwire breakdown', function()
  local restore
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  it('breaks an initiative into three dependent tickets, shown in dependency order', function()
    H.fresh({ model = 'breakdown' })
    vim.cmd('Planwire breakdown')
    local desc = api.nvim_get_current_buf()
    assert.equals('acwrite', vim.bo[desc].buftype)
    assert.truthy(api.nvim_buf_get_name(desc):match('^planwire://breakdown/new/%d+$'))
    api.nvim_buf_set_lines(desc, 0, -1, false, { 'Greetings everywhere.', '', 'API, UI and docs.' })
    vim.cmd('write')
    local buf = api.nvim_get_current_buf()
    local run_id = tonumber(api.nvim_buf_get_name(buf):match('^planwire://run/(%d+)$'))
    assert.is_number(run_id, api.nvim_buf_get_name(buf))
    assert.is_false(api.nvim_buf_is_valid(desc) and vim.bo[desc].modified)
    assert.is_false(vim.bo[buf].modifiable)
    H.wait('the breakdown to complete', function()
      return run_status(run_id) == 'completed'
    end, nil, function()
      return vim.inspect(run_status(run_id)) .. '\n' .. H.text(buf)
    end)
    H.wait('three tickets in the breakdown buffer', function()
      return H.text(buf):find('## Tickets (3, in dependency order)', 1, true)
    end, nil, function()
      return H.text(buf)
    end)
    H.wait('both passes completed in the breakdown buffer', function()
      return H.text(buf):find('- Outline · completed', 1, true) and H.text(buf):find('- Expansion · completed', 1, true)
    end, 5000, function()
      return H.text(buf) .. '\ngetRun: ' .. vim.inspect(H.request('planwire/getRun', { runId = run_id }))
    end)
    local text = H.text(buf)
    assert.truthy(text:find('# Breakdown: Greetings everywhere.', 1, true), text)
    assert.falsy(text:find('<planwire-', 1, true), text)
    -- each pass is its own agent run in the transcript, in order (the script replays the same
    -- stream for both passes, so their text may repeat; the ticket list must not)
    local outline, expansion = text:find('↳ subagent: Outline', 1, true), text:find('↳ subagent: Expansion', 1, true)
    assert.is_true(outline ~= nil and expansion ~= nil and outline < expansion, text)
    local ticket_lines = vim.tbl_filter(function(l)
      return l:match('^%- #%d+ ') ~= nil
    end, H.lines(buf))
    assert.equals(3, #ticket_lines, text)
    assert.same({}, H.duplicates(ticket_lines))

    -- the tickets, as the server has them
    local got = H.request('planwire/listTickets', { root = H.project, initiativeRunId = run_id }).tickets
    assert.equals(3, #got)
    local by_id = {}
    for _, t in ipairs(got) do
      by_id[t.id] = t
      assert.equals(run_id, t.initiativeRunId)
      assert.equals('planned', t.status)
    end
    local deps = vim.tbl_map(function(t)
      return #t.dependsOn
    end, got)
    table.sort(deps)
    assert.same({ 0, 1, 2 }, deps)

    -- <CR> on a ticket line of the breakdown buffer opens its transcript
    local row = line_of(buf, '^%- #%d+ ')
    api.nvim_win_set_cursor(0, { row, 0 })
    local first = tonumber(H.lines(buf)[row]:match('^%- #(%d+)'))
    api.nvim_feedkeys(api.nvim_replace_termcodes('<CR>', true, false, true), 'mx', false)
    assert.equals('planwire://ticket/' .. first, api.nvim_buf_get_name(0))
    assert.same({}, by_id[first].dependsOn, 'the first ticket listed depends on nothing')

    -- the tickets buffer: a breakdown heading, then each ticket after those it depends on
    vim.cmd('Planwire tickets')
    local tbuf = api.nvim_get_current_buf()
    H.wait('the three tickets in the tickets buffer', function()
      for id in pairs(by_id) do
        if not line_of(tbuf, '^#' .. id .. ' ') then
          return false
        end
      end
      return true
    end, nil, function()
      return H.text(tbuf)
    end)
    local heading = line_of(tbuf, '^── breakdown %(run ' .. run_id .. '%)')
    assert.is_number(heading, H.text(tbuf))
    for id, t in pairs(by_id) do
      local row_t, l = line_of(tbuf, '^#' .. id .. ' ')
      assert.is_true(row_t > heading)
      assert.truthy(l:match('planned%s+' .. vim.pesc(t.title)), l)
      if #t.dependsOn > 0 then
        local after = {}
        for _, d in ipairs(t.dependsOn) do
          table.insert(after, '#' .. d)
          assert.is_true(line_of(tbuf, '^#' .. d .. ' ') < row_t, 'ticket ' .. id .. ' is listed before #' .. d)
        end
        assert.truthy(l:find(' · after ' .. table.concat(after, ', '), 1, true), l)
      else
        assert.falsy(l:find('after #', 1, true), l)
      end
    end
  end)

  it(':Planwire stop stops a running breakdown by its runId, from its buffer or elsewhere', function()
    H.fresh({ model = 'slow' })
    local sent
    sent, restore = spy('planwire/stop')
    for _, where in ipairs({ 'breakdown buffer', 'another buffer' }) do
      vim.cmd('Planwire breakdown A long initiative')
      local buf = api.nvim_get_current_buf()
      local run_id = tonumber(api.nvim_buf_get_name(buf):match('^planwire://run/(%d+)$'))
      assert.is_number(run_id)
      H.wait('the breakdown running (' .. where .. ')', function()
        return run_status(run_id) == 'running' and H.text(buf):find('## Transcript', 1, true)
      end, nil, function()
        return vim.inspect(run_status(run_id)) .. '\n' .. H.text(buf)
      end)
      -- a breakdown run has no ticket: status copes with ticketId = null
      local commands = require('planwire.commands')
      commands.last_status = nil
      vim.cmd('Planwire status')
      H.wait('status', function()
        return commands.last_status
      end)
      local lines = commands.status_lines(commands.last_status)
      assert.truthy(vim.tbl_contains(lines, ('run %d (breakdown): running (script slow)'):format(run_id)), vim.inspect(lines))
      if where == 'another buffer' then
        vim.cmd('enew')
      end
      vim.cmd('Planwire stop')
      H.wait('the breakdown cancelled', function()
        return run_status(run_id) == 'cancelled'
      end, nil, function()
        return vim.inspect(run_status(run_id))
      end)
      assert.same({ runId = run_id }, sent[#sent])
      H.wait('the buffer shows it cancelled', function()
        return H.text(buf):find('_breakdown run ' .. run_id .. ' · cancelled', 1, true)
          and H.text(buf):find('no tickets were created', 1, true)
      end, nil, function()
        return H.text(buf)
      end)
      assert.same({}, H.request('planwire/listTickets', { root = H.project, initiativeRunId = run_id }).tickets)
    end
    assert.equals(2, #sent)
  end)
end)
