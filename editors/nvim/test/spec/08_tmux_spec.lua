-- A real Neovim in a real terminal (tmux): keys in, screen out.
local H = require('helpers')

local function tmux(sock, ...)
  local r = vim.system({ 'tmux', '-S', sock, ... }, { text = true }):wait(10000)
  return r.stdout or '', r.code
end

describe('a real nvim in tmux', function()
  local sock, session

  after_each(function()
    if sock then
      tmux(sock, 'kill-server')
    end
  end)

  it(':Planwire new, :w, :Planwire plan, edit, set and tickets, as typed', function()
    assert.equals(1, vim.fn.executable('tmux'), 'tmux is not installed')
    H.stop_servers()
    local dir = H.tempdir('tmux')
    local project = dir .. '/project'
    vim.fn.mkdir(project, 'p')
    H.git_branches(project, { 'typed/branch' })
    local init = dir .. '/init.lua'
    vim.fn.writefile({
      'vim.opt.runtimepath:prepend(' .. vim.inspect(H.plugin_dir) .. ')',
      'vim.o.swapfile = false',
      'vim.o.shadafile = "NONE"',
      'vim.o.cmdheight = 2',
      'vim.o.shortmess = vim.o.shortmess .. "I"',
      'require("planwire").setup({',
      '  cmd = { ' .. vim.inspect(H.bin) .. ', "--stdio" },',
      '  db_path = ' .. vim.inspect(dir .. '/planwire.db') .. ',',
      '  tool = "script", model = "demo",',
      '})',
    }, init)
    sock = dir .. '/tmux.sock'
    session = 'planwire'
    local nvim = vim.env.NVIM_BIN or vim.v.progpath
    local _, code = tmux(sock, 'new-session', '-d', '-s', session, '-x', '140', '-y', '45', '-c', project,
      vim.fn.shellescape(nvim) .. ' -u ' .. vim.fn.shellescape(init))
    assert.equals(0, code)

    local function screen()
      return (tmux(sock, 'capture-pane', '-p', '-t', session))
    end
    local function wait_screen(what, pattern)
      return H.wait(what .. ' on screen', function()
        return screen():find(pattern, 1, true)
      end, nil, screen)
    end
    local function keys(text, ...)
      if text and text ~= '' then
        tmux(sock, 'send-keys', '-t', session, '-l', text)
      end
      if select('#', ...) > 0 then
        tmux(sock, 'send-keys', '-t', session, ...)
      end
    end

    wait_screen('nvim started', '~')
    keys(':Planwire new', 'Enter')
    wait_screen('the title prompt', 'Ticket title:')
    keys('Typed in tmux', 'Enter')
    wait_screen('the description buffer', 'planwire://new/')
    keys('iPlease change the greeting.', 'Escape')
    keys(':w', 'Enter')
    wait_screen('the transcript buffer', '# Typed in tmux')
    keys(':Planwire plan', 'Enter')
    wait_screen('the rendered plan', '# Plan: Change the greeting printed by main')
    local s = screen()
    assert.falsy(s:find('<planwire-plan>', 1, true), s)
    -- the living plan, as typed: edit the title in its buffer, :w, and the list follows
    keys(':Planwire edit', 'Enter')
    wait_screen('the edit buffer', '# Typed in tmux')
    keys('ggA, edited', 'Escape')
    keys(':w', 'Enter')
    wait_screen('the edit saved', 'updated; :Planwire plan plans it again')
    keys(':Planwire set branch typed/branch', 'Enter')
    wait_screen('the branch set', 'branch set to typed/branch')
    keys(':Planwire tickets', 'Enter')
    H.wait('the ticket planned in the tickets buffer', function()
      return screen():match('#%d+%s+planned%s+Typed in tmux, edited · branch typed/branch')
    end, nil, screen)
    keys(':qa!', 'Enter')
    H.wait('nvim quits', function()
      local _, c = tmux(sock, 'has-session', '-t', session)
      return c ~= 0
    end, 15000, screen)
  end)
end)
