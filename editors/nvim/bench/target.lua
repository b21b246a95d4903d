-- The init file (`nvim -u`) of the Neovim the benchmark measures: the plugin on the
-- runtimepath and `_G.planwire_bench`, which the driver calls over RPC. It watches the
-- transcript buffer (nvim_buf_attach) and notes, on CLOCK_MONOTONIC like the replayer's stamp,
-- when the plan's heading first appears.
local plugin = vim.env.PLANWIRE_PLUGIN_DIR
vim.opt.runtimepath:prepend(plugin)
vim.o.swapfile = false
vim.o.shadafile = 'NONE'
vim.o.more = false
vim.o.shortmess = vim.o.shortmess .. 'F'
vim.notify = function() end -- nothing may wait for a key press

local B = { shown = nil, stamp = nil, notified = 0 }
_G.planwire_bench = B

--- Sets the plugin up, creates the ticket and opens its transcript in the current window.
--- @return { pid: integer, ticket: integer }
function B.prepare(opts)
  require('planwire').setup({
    cmd = { opts.bin, '--stdio' },
    db_path = opts.db,
    tool = 'script',
    model = opts.script,
  })
  local client = require('planwire.client')
  vim.fn.chdir(opts.project)
  local err, t = client.request_sync('planwire/createTicket', {
    root = opts.project,
    title = 'Bench ' .. opts.events,
    description = 'A long run',
    tool = 'script',
    model = opts.script,
  }, 30000)
  assert(not err, vim.inspect(err))
  client.on_ticket(t)
  client.state.last_ticket[opts.project] = t.id
  B.ticket = t.id
  local buf = require('planwire.transcript').open(t.id)
  B.buf = buf
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first, _, last_new)
      if B.shown then
        return
      end
      local ticket = client.state.tickets[t.id]
      if not (ticket and type(ticket.plan) == 'table') then
        return -- the plan cannot be in the buffer yet: no need to look
      end
      for _, l in ipairs(vim.api.nvim_buf_get_lines(b, first, last_new, false)) do
        if l:find('^# Plan: ') then
          B.shown = vim.uv.hrtime()
          B.stamp = tonumber(ticket.plan.title:match('(%d+)$'))
          if B.profiling then
            vim.schedule(require('jit.p').stop)
          end
          return
        end
      end
    end,
  })
  local orig = require('planwire.transcript').on_events
  require('planwire.transcript').on_events = function(tid, rid, events)
    B.notified = B.notified + #events
    return orig(tid, rid, events)
  end
  return { pid = vim.fn.getpid(), ticket = t.id }
end

--- Starts planning, as `:Planwire plan` does. With PLANWIRE_BENCH_PROFILE=FILE, LuaJIT's
--- profiler (jit.p, by function and line) runs until the plan is shown.
function B.plan()
  if vim.env.PLANWIRE_BENCH_PROFILE then
    require('jit.p').start(vim.env.PLANWIRE_BENCH_PROFILE_MODE or 'Fl', vim.env.PLANWIRE_BENCH_PROFILE)
    B.profiling = true
  end
  vim.cmd('Planwire plan ' .. B.ticket)
end

--- nil until the plan is shown; then what the driver reports.
function B.result()
  if not B.shown then
    return nil
  end
  local ticket = require('planwire.client').state.tickets[B.ticket] or {}
  local events = 0
  for _, r in pairs(require('planwire.transcript').views[B.ticket].runs) do
    events = events + r.last_seq
  end
  return {
    events = events,
    shown_ns = B.shown,
    stamp_ns = B.stamp,
    status = ticket.status,
    lines = vim.api.nvim_buf_line_count(B.buf),
    notified = B.notified,
  }
end

--- The buffer's lines, for the exactly-once check.
function B.lines()
  return vim.api.nvim_buf_get_lines(B.buf, 0, -1, false)
end
