-- A long run: 20,000 events from the real server (the `script` planner replaying a generated
-- Claude session at full speed, bench/stream.lua), every event's row exactly once, the plan
-- shown, each line written about once (incremental, not re-rendered per batch), and a
-- transcript opened after the run equal to the live one, written in one pass.
local H = require('helpers')
local api = vim.api

local EVENTS = tonumber(vim.env.PLANWIRE_TEST_LARGE_EVENTS or '') or 20000
local LONG = math.max(H.TIMEOUT, 300000)

local stream = dofile(H.plugin_dir .. '/bench/stream.lua')

--- Counts the lines written into `buf` from now on.
local function count_writes(buf)
  local n = { lines = 0, calls = 0 }
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, _, _, first, _, last_new)
      n.lines = n.lines + (last_new - first)
      n.calls = n.calls + 1
    end,
  })
  return n
end

describe('a transcript of ' .. EVENTS .. ' events', function()
  local script = H.tmp_root .. '/large-' .. EVENTS .. '.jsonl'
  local cycles
  before_each(function()
    if vim.fn.filereadable(script) == 0 then
      stream.write(script, { repo = H.repo, events = EVENTS })
    end
    cycles = stream.cycles(EVENTS)
    H.fresh({ model = script })
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('shows every event exactly once and the plan, live and when opened after the run', function()
    local t = H.create_ticket('Long run', 'x', script)
    local buf = require('planwire.transcript').open(t.id)
    local live = count_writes(buf)
    vim.cmd('Planwire plan ' .. t.id)
    H.wait_status(t.id, 'planned', LONG)
    H.wait('the plan and the ticket\'s usage in the transcript', function()
      return H.text(buf):find('\n# Plan: Bench plan done', 1, true) and H.text(buf):find('\n_all runs of the ticket: ', 1, true)
    end, LONG)
    local view = require('planwire.transcript').views[t.id]
    local lines = H.lines(buf)
    assert.same({}, stream.check_rows(lines, cycles))
    local events = 0
    for _, r in pairs(view.runs) do
      events = events + r.last_seq
    end
    assert.is_true(events >= EVENTS - 10, 'events: ' .. events)
    -- every line once, plus each tool line again for its result, plus the head and foot
    local tools = 2 * cycles
    assert.is_true(live.lines <= #lines + tools + 200,
      ('%d lines written for a buffer of %d lines (%d tools)'):format(live.lines, #lines, tools))

    -- opened after the run: the same lines, each written once, page by page
    vim.cmd('bwipeout! ' .. buf)
    local buf2 = require('planwire.transcript').open(t.id)
    local reopened = count_writes(buf2)
    H.wait('the reopened transcript equal to the live one', function()
      return api.nvim_buf_line_count(buf2) == #lines and vim.deep_equal(H.lines(buf2), lines)
    end, LONG, function()
      return ('%d of %d lines'):format(api.nvim_buf_line_count(buf2), #lines)
    end)
    assert.is_true(reopened.lines <= #lines + 50,
      ('%d lines written for a buffer of %d lines'):format(reopened.lines, #lines))
    io.stderr:write(('[large] %d events, %d lines; written live %d lines in %d calls, reopened %d in %d\n'):format(
      events, #lines, live.lines, live.calls, reopened.lines, reopened.calls))
  end)
end)
