local H = require('helpers')
local api = vim.api

local function line_of(buf, pattern)
  for i, l in ipairs(H.lines(buf)) do
    if l:match(pattern) then
      return i, l
    end
  end
end

describe(':Planwire tickets', function()
  before_each(function()
    H.fresh()
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('lists tickets with status and title, plans with p and refreshes itself', function()
    local a = H.create_ticket('First ticket', 'a')
    local b = H.create_ticket('Second ticket', 'b')
    vim.cmd('Planwire tickets')
    local buf = api.nvim_get_current_buf()
    assert.equals('planwire://tickets', api.nvim_buf_get_name(buf))
    H.wait('both tickets listed', function()
      return line_of(buf, '^#' .. a.id .. '%s+draft%s+First ticket$') and line_of(buf, '^#' .. b.id .. '%s+draft%s+Second ticket$')
    end, nil, function()
      return H.text(buf)
    end)
    assert.is_false(vim.bo[buf].modifiable)

    local row = line_of(buf, '^#' .. a.id .. ' ')
    api.nvim_win_set_cursor(0, { row, 0 })
    api.nvim_feedkeys('p', 'mx', false)
    H.wait('first ticket planned in the list (refreshed by planwire/ticketChanged)', function()
      return line_of(buf, '^#' .. a.id .. '%s+planned%s+First ticket$')
    end, nil, function()
      return H.text(buf)
    end)
    assert.truthy(line_of(buf, '^#' .. b.id .. '%s+draft%s+Second ticket$'))

    -- <CR> opens the transcript of the line's ticket
    local win = vim.fn.win_findbuf(buf)[1]
    api.nvim_set_current_win(win)
    row = line_of(buf, '^#' .. a.id .. ' ')
    api.nvim_win_set_cursor(0, { row, 0 })
    api.nvim_feedkeys(api.nvim_replace_termcodes('<CR>', true, false, true), 'mx', false)
    assert.equals('planwire://ticket/' .. a.id, api.nvim_buf_get_name(0))
  end)
end)
