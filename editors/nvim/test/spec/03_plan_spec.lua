local H = require('helpers')
local api = vim.api

--- Plans ticket `id` with :Planwire plan and waits until it is planned; returns the transcript buffer.
local function plan_and_wait(id)
  vim.cmd('Planwire plan')
  local buf = api.nvim_get_current_buf()
  assert.equals('planwire://ticket/' .. id, api.nvim_buf_get_name(buf))
  H.wait_status(id, 'planned', nil, buf)
  H.wait('the plan and the ticket\'s usage rendered in the transcript', function()
    return H.text(buf):find('\n# Plan: ', 1, true) and H.text(buf):find('\n_all runs of the ticket: ', 1, true)
  end, nil, function()
    return H.text(buf)
  end)
  return buf
end

describe(':Planwire plan', function()
  local progress
  local au
  before_each(function()
    H.fresh()
    progress = {}
    au = api.nvim_create_autocmd('LspProgress', {
      callback = function(ev)
        table.insert(progress, ev.data)
      end,
    })
  end)
  after_each(function()
    pcall(api.nvim_del_autocmd, au)
    H.stop_servers()
  end)

  it('plans the last ticket and streams the transcript into planwire://ticket/<id>', function()
    local t = H.create_ticket('Add a greeting', 'Print hello when the app starts.')
    local buf = plan_and_wait(t.id)
    local lines = H.lines(buf)
    local text = table.concat(lines, '\n')

    assert.equals('markdown', vim.bo[buf].filetype)
    assert.is_false(vim.bo[buf].modifiable)
    assert.is_false(vim.bo[buf].modified)
    assert.equals('# Add a greeting', lines[1])
    assert.truthy(text:find('## Run %d+ · completed'), text)

    -- streamed text is there, between the run heading and the plan
    local run_at = vim.fn.match(lines, '^## Run ') + 1
    local plan_at = vim.fn.match(lines, '^# Plan: ') + 1
    local streamed = 0
    for i = run_at + 1, plan_at - 1 do
      if lines[i]:match('%a') and not lines[i]:match('^%s*▸') and not lines[i]:match('^_usage') then
        streamed = streamed + 1
      end
    end
    assert.is_true(streamed > 0, 'no streamed text in:\n' .. text)

    -- the plan is rendered as markdown, never as the raw block
    local plan = H.ticket(t.id).plan
    assert.is_table(plan)
    assert.equals('# Plan: ' .. plan.title, lines[plan_at])
    assert.truthy(text:find('## Acceptance criteria', 1, true))
    for _, c in ipairs(plan.acceptanceCriteria) do
      assert.truthy(text:find('- [ ] ' .. c, 1, true), 'criterion missing: ' .. c)
    end
    assert.falsy(text:find('<planwire-plan>', 1, true))
    assert.falsy(text:find('</planwire-plan>', 1, true))
    assert.falsy(text:find('"acceptanceCriteria"', 1, true))
    assert.same({}, H.duplicates(lines))
  end)

  it('the transcript buffer cannot be modified', function()
    local t = H.create_ticket('Read only', 'x')
    local buf = plan_and_wait(t.id)
    assert.has_error(function()
      api.nvim_buf_set_lines(buf, 0, 1, false, { 'changed' })
    end)
    local ok = pcall(vim.cmd, 'normal! ggdd')
    assert.is_false(ok)
    assert.equals('# Read only', H.lines(buf)[1])
  end)

  it('reopening, and reattaching after a server restart, catch up with no gaps and no doubles', function()
    local t = H.create_ticket('Catch up', 'x')
    local buf = plan_and_wait(t.id)
    local before = H.lines(buf)

    -- reopen: wipe the buffer, open it again (planwire/getTranscript from seq 0)
    vim.cmd('bwipeout! ' .. buf)
    vim.cmd('Planwire transcript ' .. t.id)
    local buf2 = api.nvim_get_current_buf()
    H.wait('reopened transcript equal to the live one', function()
      return vim.deep_equal(H.lines(buf2), before)
    end, nil, function()
      return H.text(buf2) .. '\n---- live was:\n' .. table.concat(before, '\n')
    end)

    -- restart the server: the open buffer catches up again and stays the same
    H.stop_servers()
    vim.cmd('Planwire transcript ' .. t.id)
    H.wait('a new server', function()
      return #vim.lsp.get_clients({ name = 'planwire' }) == 1 and require('planwire.client').state.initialized
    end)
    local view = require('planwire.transcript').views[t.id]
    local synced = view.synced or 0
    H.wait('catch-up after restart', function()
      return (view.synced or 0) > synced and not view.syncing
    end)
    vim.wait(100)
    assert.same(before, H.lines(buf2))
    assert.same({}, H.duplicates(H.lines(buf2)))
  end)

  it('reports LSP progress to vim.lsp.status() and LspProgress', function()
    local t = H.create_ticket('Progress', 'x')
    plan_and_wait(t.id)
    local status = vim.lsp.status()
    assert.is_true(status ~= '', 'vim.lsp.status() is empty')
    H.wait('LspProgress events', function()
      for _, d in ipairs(progress) do
        local v = d.params and d.params.value
        if v and v.kind == 'end' then
          return true
        end
      end
    end, 5000, function()
      return vim.inspect(progress)
    end)
    local tokens = {}
    for _, d in ipairs(progress) do
      tokens[tostring(d.params.token)] = true
    end
    assert.is_true(next(tokens) ~= nil)
    for token in pairs(tokens) do
      assert.truthy(token:match('^planwire/run/%d+$'), token)
    end
    io.stderr:write('[progress] vim.lsp.status(): ' .. status .. '\n')
  end)
end)

describe(':Planwire retry', function()
  before_each(function()
    H.fresh()
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('plans again as a second run in the same transcript', function()
    local t = H.create_ticket('Twice', 'x')
    vim.cmd('Planwire plan')
    local buf = vim.api.nvim_get_current_buf()
    H.wait_status(t.id, 'planned', nil, buf)
    local first = H.request('planwire/getTicket', { ticketId = t.id }).runs[1].id
    vim.cmd('Planwire retry')
    H.wait('a second run, completed', function()
      local runs = H.request('planwire/getTicket', { ticketId = t.id }).runs
      return #runs == 2 and runs[1].id ~= first and runs[1].status == 'completed'
    end)
    H.wait_status(t.id, 'planned', nil, buf)
    H.wait('two run headings', function()
      local n = 0
      for _, l in ipairs(H.lines(buf)) do
        if l:match('^## Run %d+ · completed') then
          n = n + 1
        end
      end
      return n == 2
    end, nil, function()
      return H.text(buf)
    end)
  end)
end)

describe('a failing plan', function()
  before_each(function()
    H.fresh({ model = 'fail' })
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('shows the failure and highlights the error', function()
    local t = H.create_ticket('Will fail', 'x', 'fail')
    vim.cmd('Planwire plan')
    local buf = vim.api.nvim_get_current_buf()
    H.wait_status(t.id, 'failed', nil, buf)
    local row
    H.wait('the error line and the failed run', function()
      row = vim.fn.match(H.lines(buf), '^\\*\\*error\\*\\* ')
      return row >= 0 and H.text(buf):find('## Run %d+ · failed')
    end, nil, function()
      return H.text(buf)
    end)
    local marks = vim.api.nvim_buf_get_extmarks(buf, require('planwire.transcript').ns, { row, 0 }, { row, -1 }, { details = true })
    local hls = vim.tbl_map(function(m)
      return m[4].hl_group
    end, marks)
    assert.is_true(vim.tbl_contains(hls, 'DiagnosticError'), vim.inspect(marks))
  end)
end)
