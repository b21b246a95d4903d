local H = require('helpers')
local api = vim.api

describe(':Planwire new', function()
  local restore
  before_each(function()
    H.fresh()
  end)
  after_each(function()
    if restore then
      restore()
    end
    H.stop_servers()
  end)

  it('asks a title, opens an acwrite description buffer, and :w creates the ticket', function()
    local calls
    restore, calls = H.stub_ui({ 'Add a greeting' })
    vim.cmd('Planwire new')
    local buf = H.wait('description buffer', function()
      local b = api.nvim_get_current_buf()
      return api.nvim_buf_get_name(b):match('^planwire://new/') and b
    end)
    assert.equals('Ticket title: ', calls.input[1].prompt)
    assert.equals('acwrite', vim.bo[buf].buftype)
    assert.equals('markdown', vim.bo[buf].filetype)
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'Print a greeting on start.', '', 'Keep it short.' })
    assert.is_true(vim.bo[buf].modified)
    vim.cmd('write')
    local tbuf = H.wait('transcript buffer in place of the description', function()
      local b = api.nvim_get_current_buf()
      return api.nvim_buf_get_name(b):match('^planwire://ticket/%d+$') and b
    end)
    local id = tonumber(api.nvim_buf_get_name(tbuf):match('(%d+)$'))
    H.wait('description buffer wiped', function()
      return not api.nvim_buf_is_valid(buf)
    end)
    local got = H.request('planwire/getTicket', { ticketId = id })
    assert.equals('Add a greeting', got.ticket.title)
    assert.equals('Print a greeting on start.\n\nKeep it short.', got.ticket.description)
    assert.equals('script', got.ticket.tool)
    assert.equals('demo', got.ticket.model)
    assert.equals('draft', got.ticket.status)
    assert.equals(H.project, got.ticket.root)
    H.wait('transcript header', function()
      return H.lines(tbuf)[1] == '# Add a greeting'
    end)
    assert.is_false(vim.bo[tbuf].modified)
    assert.equals(id, require('planwire.client').state.last_ticket[H.project])
  end)

  it('a cancelled title creates nothing', function()
    restore = H.stub_ui({ nil })
    local before = api.nvim_get_current_buf()
    vim.cmd('Planwire new')
    vim.wait(200)
    assert.equals(before, api.nvim_get_current_buf())
  end)
end)
