-- Incremental rendering of the transcript: what each update writes, and that it always equals
-- the buffer a one-pass render of the same items gives. Events and deltas are fed to the
-- handlers directly (a run id the server does not know, so nothing else writes to the view).
local H = require('helpers')
local api = vim.api

local RUN = 9001

local transcript, view, buf, writes

--- Opens the transcript of a new ticket and waits until its first sync is done.
local function open_ticket(title)
  local t = H.create_ticket(title or 'Render', 'x')
  transcript = require('planwire.transcript')
  buf = transcript.open(t.id)
  view = transcript.views[t.id]
  H.wait('the first sync', function()
    return (view.synced or 0) > 0 and not view.syncing
  end)
  writes = {}
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, _, _, first, last_old, last_new)
      table.insert(writes, { first = first, old = last_old - first, new = last_new - first })
    end,
  })
  return t
end

local seq = 0
local function events(list)
  for _, ev in ipairs(list) do
    seq = seq + 1
    ev.seq = seq
  end
  transcript.on_events(view.ticket_id, RUN, list)
  transcript.render_now(view.ticket_id)
end

local function delta(kind, text, agent)
  transcript.on_delta(view.ticket_id, RUN, agent, kind, text)
  transcript.render_now(view.ticket_id)
end

local function row_of(pattern)
  for i, l in ipairs(H.lines(buf)) do
    if l:find(pattern) then
      return i
    end
  end
end

local function count(pattern)
  local n = 0
  for _, l in ipairs(H.lines(buf)) do
    if l:find(pattern) then
      n = n + 1
    end
  end
  return n
end

--- Highlights as { row → hl_group }.
local function highlights()
  local out = {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, transcript.ns, 0, -1, { details = true })) do
    out[m[2] + 1] = m[4].hl_group
  end
  return out
end

--- The buffer a one-pass render of the view's items gives; the view keeps it.
local function one_pass()
  view.layout = nil
  transcript.render_now(view.ticket_id)
  return H.lines(buf), highlights()
end

local function assert_one_pass_equal()
  local lines, hls = H.lines(buf), highlights()
  local lines2, hls2 = one_pass()
  assert.same(lines2, lines)
  assert.same(hls2, hls)
end

describe('incremental transcript rendering', function()
  before_each(function()
    H.fresh()
    seq = 0
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('appends new events, and a tool result rewrites only its own line', function()
    open_ticket()
    events({
      { kind = 'toolCall', callId = 'a', name = 'Read', input = 'src/a.rs' },
      { kind = 'text', text = 'Reading **a**.' },
      { kind = 'toolCall', callId = 'b', name = 'Bash', input = 'ls' },
    })
    local before = H.lines(buf)
    local a = row_of('▸ Read src/a.rs …')
    assert.is_number(a, H.text(buf))
    writes = {}
    events({ { kind = 'toolResult', callId = 'a', status = 'completed', output = 'fn a() {}' } })
    assert.same({ { first = a - 1, old = 1, new = 1 } }, writes)
    assert.equals('▸ Read src/a.rs ✓', H.lines(buf)[a])
    assert.equals(#before, #H.lines(buf))
    assert.equals(1, count('▸ Bash ls …'))

    -- an error result shows its output, highlighted, on the same line
    writes = {}
    events({ { kind = 'toolResult', callId = 'b', status = 'error', output = 'no such dir' } })
    local b = row_of('▸ Bash ls ✗ no such dir')
    assert.same({ { first = b - 1, old = 1, new = 1 } }, writes)
    assert.equals('DiagnosticError', highlights()[b])
    assert.equals('Comment', highlights()[a])

    -- appending writes only the new lines, at the end
    local n = #H.lines(buf)
    writes = {}
    events({ { kind = 'toolCall', callId = 'c', name = 'Grep', input = 'greet' } })
    assert.same({ { first = n, old = 0, new = 1 } }, writes)
    assert.equals('▸ Grep greet …', H.lines(buf)[n + 1])
    assert.same({}, H.duplicates(H.lines(buf)))
    assert_one_pass_equal()
  end)

  it('a delta grows one block in place and the stored text replaces it, keeping the reader in place', function()
    open_ticket()
    events({
      { kind = 'toolCall', callId = 'a', name = 'Read', input = 'src/a.rs' },
      { kind = 'toolCall', callId = 'b', name = 'Bash', input = 'ls' },
    })
    -- a reader in a second window, on a tool line (above the growing block, not the last line)
    vim.cmd('split')
    local reader = api.nvim_get_current_win()
    local a = row_of('▸ Read src/a.rs')
    api.nvim_win_set_cursor(reader, { a, 2 })

    delta('text', 'Hel')
    delta('text', 'lo wor')
    delta('text', 'ld.\nSecond li')
    assert.equals(1, count('^Hello world%.$'), H.text(buf))
    assert.equals(1, count('^Second li$'))
    -- the second line grew: only the block's last line was rewritten
    writes = {}
    delta('text', 'ne.')
    assert.equals(1, #writes)
    assert.equals(row_of('^Second line%.$') - 1, writes[1].first)
    assert.equals(1, writes[1].old)
    assert.equals(1, writes[1].new)

    -- a subagent's tool call comes after the open block; the block keeps growing above it
    events({ { kind = 'toolCall', callId = 'g', name = 'Grep', input = 'greet', agentRunId = 7 } })
    delta('text', '\nThird line.')
    local third, grep = row_of('^Third line%.$'), row_of('▸ Grep greet')
    assert.is_true(third < grep, H.text(buf))
    assert.equals('Comment', highlights()[grep])

    -- the stored text that closes the block replaces it
    events({ { kind = 'text', text = 'Hello world.\nSecond line.\nThird line, final.' } })
    assert.equals(1, count('^Hello world%.$'))
    assert.equals(0, count('^Third line%.$'))
    assert.equals(1, count('^Third line, final%.$'))
    assert.is_true(row_of('^Third line, final%.$') < row_of('▸ Grep greet'))
    -- a new delta opens a new block; reasoning streams on its own
    delta('reasoning', 'Thinking')
    delta('reasoning', ' more')
    assert.equals(1, count('^> Thinking more$'))
    assert.equals('Comment', highlights()[row_of('^> Thinking more$')])
    events({ { kind = 'reasoning', text = 'Thinking more, done.' } })
    assert.equals(0, count('^> Thinking more$'))
    assert.equals(1, count('^> Thinking more, done%.$'))

    -- the reader never moved off the line they were reading
    assert.equals('▸ Read src/a.rs …', H.lines(buf)[api.nvim_win_get_cursor(reader)[1]])
    assert.same({}, H.duplicates(H.lines(buf)))
    assert_one_pass_equal()
  end)

  it('a reader below a growing block keeps their line; a window at the end follows it', function()
    open_ticket()
    events({ { kind = 'text', text = 'First paragraph.' } })
    delta('text', 'Streaming')
    events({ { kind = 'toolCall', callId = 'z', name = 'Read', input = 'z.rs', agentRunId = 3 } })
    local follower = api.nvim_get_current_win()
    api.nvim_win_set_cursor(follower, { api.nvim_buf_line_count(buf), 0 })
    vim.cmd('split')
    local reader = api.nvim_get_current_win()
    local z = row_of('▸ Read z.rs')
    api.nvim_win_set_cursor(reader, { z, 0 })
    vim.fn.winrestview({ topline = z })
    delta('text', ' one\ntwo\nthree')
    assert.equals('▸ Read z.rs …', H.lines(buf)[api.nvim_win_get_cursor(reader)[1]])
    -- and their scroll: the same line is at the top of the window
    assert.equals('▸ Read z.rs …', H.lines(buf)[vim.fn.line('w0', reader)])
    events({ { kind = 'toolCall', callId = 'y', name = 'Bash', input = 'make', agentRunId = 3 } })
    assert.equals(api.nvim_buf_line_count(buf), api.nvim_win_get_cursor(follower)[1])
    assert_one_pass_equal()
  end)

  it('a block still open when its run ends is hidden: the stored transcript has no such block', function()
    open_ticket()
    events({ { kind = 'text', text = 'Stored.' } })
    delta('text', 'Never stored')
    assert.equals(1, count('^Never stored$'))
    transcript.on_run({ id = RUN, ticketId = view.ticket_id, status = 'cancelled', lastSeq = seq })
    transcript.render_now(view.ticket_id)
    assert.equals(0, count('Never stored'))
    assert.equals(1, count('^Stored%.$'))
    assert_one_pass_equal()
  end)

  it('random streams of events and deltas always equal their one-pass render', function()
    open_ticket()
    local rng = 12345
    local function rand(n)
      rng = (rng * 1103515245 + 12345) % 2147483648
      return rng % n + 1
    end
    local calls = {}
    for step = 1, 400 do
      local agent = rand(3) == 1 and 5 or nil
      local r = rand(10)
      if r <= 3 then
        delta(rand(2) == 1 and 'text' or 'reasoning', rand(4) == 1 and '\n' or ('w' .. step .. (rand(3) == 1 and '\n' or ' ')), agent)
      elseif r == 4 then
        events({ { kind = 'text', text = rand(5) == 1 and '   ' or ('closed ' .. step), agentRunId = agent } })
      elseif r == 5 then
        events({ { kind = 'reasoning', text = 'thought ' .. step, agentRunId = agent } })
      elseif r == 6 then
        local id = 'c' .. step
        table.insert(calls, id)
        events({ { kind = 'toolCall', callId = id, name = 'Read', input = 'f' .. step, agentRunId = agent } })
      elseif r == 7 and #calls > 0 then
        events({ { kind = 'toolResult', callId = table.remove(calls, rand(#calls)), status = rand(4) == 1 and 'error' or 'completed', output = 'out ' .. step } })
      elseif r == 8 then
        events({ { kind = 'error', errorKind = 'network', message = 'blip ' .. step } })
      elseif r == 9 then
        events({ { kind = 'subagent', agentRunId = 5, phase = rand(2) == 1 and 'start' or 'end', label = 'helper' } })
      else
        events({ { kind = 'question', questionId = step } })
      end
      if step % 50 == 0 then
        assert_one_pass_equal()
      end
    end
    assert_one_pass_equal()
  end)
end)

describe('<planwire-…> blocks', function()
  it('are all hidden by one rule, also while one is still streaming', function()
    local strip = require('planwire.render').strip_plan
    for _, name in ipairs({ 'plan', 'outline', 'expansion', 'research-selection', 'research', 'anything-new' }) do
      local text = ('Before.\n<planwire-%s>{"a": [1, 2]}</planwire-%s>\nAfter.'):format(name, name)
      assert.equals('Before.\n\nAfter.', strip(text))
      assert.equals('Before.\n', strip(('Before.\n<planwire-%s>{"a": '):format(name)))
    end
    assert.equals('Text ', strip('Text <planwire-resea'))
    assert.equals('Text ', strip('Text <plan'))
    assert.equals('a < b', strip('a < b'))
  end)
end)
