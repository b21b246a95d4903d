local H = require('helpers')
local api = vim.api

describe(':Planwire stop', function()
  before_each(function()
    H.fresh({ model = 'slow' })
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('stops a running plan and keeps what was streamed', function()
    local t = H.create_ticket('Slow one', 'x', 'slow')
    vim.cmd('Planwire plan ' .. t.id)
    local buf = api.nvim_get_current_buf()
    H.wait_status(t.id, 'planning', nil, buf)
    -- wait for some streamed text after the run heading
    local streamed
    H.wait('streamed text', function()
      local lines = H.lines(buf)
      local at = vim.fn.match(lines, '^## Run ') + 1
      if at == 0 then
        return false
      end
      for i = at + 1, #lines do
        if lines[i]:match('%a') then
          streamed = lines[i]
          return true
        end
      end
    end, nil, function()
      return H.text(buf)
    end)
    vim.cmd('Planwire stop')
    H.wait_status(t.id, 'stopped', nil, buf)
    H.wait('run heading says cancelled', function()
      return H.text(buf):find('## Run %d+ · cancelled')
    end, nil, function()
      return H.text(buf)
    end)
    assert.is_true(vim.tbl_contains(H.lines(buf), streamed))
    assert.same({}, H.duplicates(H.lines(buf)))
    local status = H.request('planwire/status', { ticketId = t.id })
    assert.same({}, status.activeRuns)
    -- stopping again: nothing active
    local r = H.request('planwire/stop', { ticketId = t.id })
    assert.is_false(r.stopped)
  end)
end)
