-- Live deltas continued exactly by their `offset`: a transcript opened mid-block starts the
-- block from `getTranscript`'s `openBlocks` and goes on from there; pieces already seen, or
-- overlapping, add nothing twice; a gap asks for the block again; the stored text replaces the
-- growing block in place, and the reader keeps their line.
local H = require('helpers')
local api = vim.api

local model = require('planwire.model')

describe('live deltas against the server', function()
  local gate
  after_each(function()
    if gate then
      vim.fn.writefile({}, gate) -- never leave a replay waiting
    end
    H.stop_servers()
  end)

  it('a transcript opened mid-block starts it from openBlocks and continues it by offset', function()
    H.fresh()
    gate = H.tempdir('gate') .. '/open'
    local pieces = { 'Reading ', 'the ', 'cöde.', ' Done', ' with ', 'it.' }
    local script, whole = H.claude_script('live', { title = 'Live plan', deltas = pieces, gate = gate, gate_after = 3 })
    local t = H.create_ticket('Live', 'x', script)
    -- planning starts with no transcript open: nothing in this Neovim sees the first pieces
    local run = H.request('planwire/plan', { ticketId = t.id }).runId
    local page = H.poll('the open block held mid-way by the gate', function()
      local p = H.request('planwire/getTranscript', { runId = run })
      return p.openBlocks and p.openBlocks[1] and p.openBlocks[1].text == 'Reading the cöde.' and p
    end)
    assert.is_false(page.done)

    vim.cmd('Planwire transcript ' .. t.id)
    local buf = api.nvim_get_current_buf()
    local view = require('planwire.transcript').views[t.id]
    H.wait('the open block from openBlocks', function()
      return vim.tbl_contains(H.lines(buf), 'Reading the cöde.')
    end, nil, function()
      return H.text(buf)
    end)
    local live = view.runs[run].open['main:text']
    assert.is_table(live, 'the block is live, not stored')
    assert.equals(model.chars('Reading the cöde.'), live.len)

    -- a reader in a second window, on the title above the block
    vim.cmd('split')
    local reader = api.nvim_get_current_win()
    api.nvim_win_set_cursor(reader, { 1, 3 })
    local reading = H.lines(buf)[1]

    -- from now on, every state of the buffer: the block shown once, never twice, never gone,
    -- and while it is live its text is exactly the start of the whole text
    local states, bad, continued = 0, {}, false
    api.nvim_buf_attach(buf, false, {
      on_lines = function()
        states = states + 1
        local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
        local n = 0
        for _, l in ipairs(lines) do
          if l:find('Reading the cöde.', 1, true) then
            n = n + 1
          end
        end
        if n ~= 1 then
          table.insert(bad, ('%d blocks in:\n%s'):format(n, table.concat(lines, '\n')))
        end
        local open = view.runs[run] and view.runs[run].open['main:text']
        if open then
          if whole:sub(1, #open.text) ~= open.text then
            table.insert(bad, 'live text is not a start of the whole: ' .. open.text)
          end
          continued = continued or open.len > model.chars('Reading the cöde.')
        end
      end,
    })
    vim.fn.writefile({}, gate)
    H.wait_status(t.id, 'planned', nil, buf)
    H.wait('the plan', function()
      return H.text(buf):find('\n# Plan: Live plan', 1, true)
    end, nil, function()
      return H.text(buf)
    end)
    assert.same({}, bad)
    assert.is_true(states > 0)
    assert.is_true(continued, 'the deltas after the gate continued the block')
    -- the stored text replaced the block: one paragraph, the whole text, no longer live
    assert.is_nil(view.runs[run].open['main:text'])
    assert.equals(1, #vim.tbl_filter(function(l)
      return l == 'Reading the cöde. Done with it.'
    end, H.lines(buf)), H.text(buf))
    assert.same({}, H.duplicates(H.lines(buf)))
    -- the reader never moved off their line
    assert.equals(reading, H.lines(buf)[api.nvim_win_get_cursor(reader)[1]])
  end)
end)

describe('delta offsets', function()
  local RUN = 9101
  local transcript, view, buf, seq

  before_each(function()
    H.fresh()
    seq = 0
    local t = H.create_ticket('Offsets', 'x')
    transcript = require('planwire.transcript')
    buf = transcript.open(t.id)
    view = transcript.views[t.id]
    H.wait('the first sync', function()
      return (view.synced or 0) > 0 and not view.syncing
    end)
  end)
  after_each(function()
    H.stop_servers()
  end)

  local function delta(text, offset, kind)
    transcript.on_delta(view.ticket_id, RUN, nil, kind or 'text', text, offset)
    transcript.render_now(view.ticket_id)
  end

  local function count(line)
    return #vim.tbl_filter(function(l)
      return l == line
    end, H.lines(buf))
  end

  it('drop what was seen, add only the new part of an overlap, and drop a gap', function()
    delta('Hél', 0)
    delta('lo', 3)
    assert.equals(1, count('Héllo'), H.text(buf))
    delta('lo', 3) -- the same piece again
    delta('Hé', 0) -- an old one
    assert.equals(1, count('Héllo'), H.text(buf))
    delta('llo wö', 2) -- overlaps: only " wö" is new
    assert.equals(1, count('Héllo wö'), H.text(buf))
    local synced = view.synced or 0
    delta('zzz', 40) -- a gap: dropped, and the view asks for the open blocks again
    assert.equals(1, count('Héllo wö'), H.text(buf))
    H.wait('the resync a gap asks for', function()
      return (view.synced or 0) > synced and not view.syncing
    end)
    delta('rld', 8)
    assert.equals(1, count('Héllo wörld'), H.text(buf))
    assert.equals(model.chars('Héllo wörld'), view.runs[RUN].open['main:text'].len)
    -- the stored event closes it, in place
    seq = seq + 1
    transcript.on_events(view.ticket_id, RUN, { { seq = seq, kind = 'text', text = 'Héllo wörld, stored.' } })
    transcript.render_now(view.ticket_id)
    assert.equals(0, count('Héllo wörld'))
    assert.equals(1, count('Héllo wörld, stored.'))
    -- a new block starts at offset 0; a piece past its start without the start is a gap
    synced = view.synced or 0
    delta('Next', 4)
    assert.is_nil(H.row_of(buf, '^Next'), H.text(buf))
    H.wait('the resync', function()
      return (view.synced or 0) > synced and not view.syncing
    end)
    delta('Next', 0, 'reasoning')
    assert.equals(1, count('> Next'))
  end)

  it('openBlocks starts a block, and extends one only when it holds more', function()
    local r = model.new_run(1)
    model.open_blocks(r, { { kind = 'text', text = 'Abc' }, { kind = 'reasoning', agentRunId = 4, text = 'Th' } })
    assert.equals(2, #r.items)
    assert.equals('Abc', r.open['main:text'].text)
    assert.equals('Th', r.open['4:reasoning'].text)
    assert.equals('seen', model.delta(r, nil, 'text', 'bc', 1))
    assert.equals('shown', model.delta(r, nil, 'text', 'cde', 2))
    assert.equals('Abcde', r.open['main:text'].text)
    model.open_blocks(r, { { kind = 'text', text = 'Abc' } }) -- older than what is shown: kept
    assert.equals('Abcde', r.open['main:text'].text)
    model.open_blocks(r, { { kind = 'text', text = 'Abcdef' } })
    assert.equals('Abcdef', r.open['main:text'].text)
    assert.equals(2, #r.items, 'no second block')
    assert.equals('gap', model.delta(r, 4, 'reasoning', 'x', 5))
    assert.is_true(model.may_resync(r, 4, 'reasoning'))
    assert.is_false(model.may_resync(r, 4, 'reasoning'), 'once per block')
    assert.equals(3, model.chars('aé€'))
    assert.equals('€x', model.drop_chars('aé€x', 2))
    assert.equals('', model.drop_chars('ab', 5))
  end)
end)
