--- The model of one run in a transcript: its events, kept by seq (no gaps, no doubles), each
--- turned into an item, and the blocks streaming live (`planwire/delta`) continued exactly by
--- their `offset`. Pure: no buffer, no server. `planwire.transcript` renders the items (item
--- `i` of a run is block `i + 1` of the run's layout section) and writes the items marked in
--- `r.changed` again.
---
--- A live block is an item with `live = true` and `len`, the characters (Unicode scalar
--- values, as the server counts them) it holds. A piece at `offset` extends it: a piece wholly
--- seen is dropped, an overlapping one adds only its new characters, and one past the end (a
--- gap) is dropped and reported, so the caller fetches the block again (`getTranscript`'s
--- `openBlocks`). The stored `text` or `reasoning` event that closes a block replaces it in
--- place.
local M = {}

local one_line = require('planwire.render').one_line

--- A new, empty run model.
function M.new_run(run_id)
  return {
    id = run_id,
    last_seq = 0,
    pending = {}, -- seq -> event held after a gap
    items = {},
    tools = {}, -- callId -> item
    subagents = {}, -- agentRunId -> label
    open = {}, -- open_key -> live item
    resynced = {}, -- open_key -> true once a gap in that block asked for openBlocks
    changed = {}, -- item idx -> true: written items to write again
    shown = 0, -- items written so far
  }
end

-- Characters --------------------------------------------------------------------------------

--- The number of characters (code points) of UTF-8 text.
function M.chars(s)
  local _, n = s:gsub('[^\128-\191]', '')
  return n
end

--- `s` without its first `n` characters.
function M.drop_chars(s, n)
  if n <= 0 then
    return s
  end
  local seen = 0
  for i = 1, #s do
    local b = s:byte(i)
    if b < 128 or b >= 192 then
      if seen == n then
        return s:sub(i)
      end
      seen = seen + 1
    end
  end
  return ''
end

-- Items ---------------------------------------------------------------------------------------

local function append(r, item)
  r.items[#r.items + 1] = item
  item.idx = #r.items
  return item
end

--- Marks an item whose lines must be written again.
local function touch(r, item)
  if item.idx <= r.shown then
    r.changed[item.idx] = true
  end
end

local function depth_of(r, agent)
  return (agent and r.subagents[agent]) and 1 or 0
end

--- The key of the open streamed block of one agent and kind.
local function open_key(agent, kind)
  return tostring(agent or 'main') .. ':' .. kind
end
M.open_key = open_key

local function line(r, text, depth, hl, blank_before)
  append(r, { kind = 'line', text = text, depth = depth, hl = hl, blank_before = blank_before })
end

--- Adds one event (already in seq order) to a run's items.
local function add_event(r, ev)
  local agent = ev.agentRunId
  local depth = depth_of(r, agent)
  local kind = ev.kind
  if kind == 'text' or kind == 'reasoning' then
    local key = open_key(agent, kind)
    r.resynced[key] = nil
    local open = r.open[key]
    if open then
      -- the stored block that closes a streamed one replaces it, in place
      r.open[key] = nil
      open.text, open.final, open.live, open.len = ev.text or '', ev.final, nil, nil
      return touch(r, open)
    end
    append(r, { kind = kind, text = ev.text or '', agent = agent, depth = depth, final = ev.final })
    return
  end
  if kind == 'toolCall' then
    local item = append(r, { kind = 'tool', name = ev.name, input = ev.input, depth = depth })
    if ev.callId then
      r.tools[ev.callId] = item
    end
  elseif kind == 'toolResult' then
    local item = ev.callId and r.tools[ev.callId]
    if item then
      item.status, item.output = ev.status, ev.output
      touch(r, item)
    else
      append(r, { kind = 'tool', name = 'result', input = '', status = ev.status, output = ev.output, depth = depth })
    end
  elseif kind == 'subagent' then
    if ev.phase == 'start' then
      if agent then
        r.subagents[agent] = ev.label or true
      end
      line(r, '↳ subagent: ' .. one_line(ev.label), depth + 1, 'Special')
    else
      line(r, '↳ subagent done: ' .. one_line(ev.label) .. (ev.status and (' (' .. one_line(ev.status) .. ')') or ''),
        math.max(depth, 1), 'Special')
    end
  elseif kind == 'usage' then
    line(r, ('_usage: %d in · %d out · %d cache read · %d cache write · $%.4f_'):format(ev.inputTokens or 0,
      ev.outputTokens or 0, ev.cacheReadTokens or 0, ev.cacheWriteTokens or 0, ev.costUsd or 0), depth, 'Comment')
  elseif kind == 'error' then
    line(r, '**error** (' .. tostring(ev.errorKind or 'unknown') .. '): ' .. one_line(ev.message, 400), depth,
      'DiagnosticError', true)
  elseif kind == 'warning' then
    line(r, '⚠ **warning**: ' .. one_line(ev.message, 400), depth, 'DiagnosticWarn', true)
  elseif kind == 'question' then
    line(r, '❓ question ' .. tostring(ev.questionId) .. ' — answer with `:Planwire answer`', depth, 'DiagnosticWarn',
      true)
  elseif kind == 'raw' then
    line(r, '· ' .. one_line(ev.line, 120), depth, 'Comment')
  end
  -- `session` and unknown kinds are not shown
end

--- Feeds events of one run, dropping those already seen and holding those after a gap. With
--- `upto`, adds no event past that seq (the rest stays held for the next call).
--- @return boolean gap true when events are missing before some held one
function M.feed(r, events, upto)
  for _, ev in ipairs(events) do
    if type(ev.seq) == 'number' and ev.seq > r.last_seq then
      r.pending[ev.seq] = ev
    end
  end
  while r.pending[r.last_seq + 1] and (upto == nil or r.last_seq < upto) do
    local ev = r.pending[r.last_seq + 1]
    r.pending[r.last_seq + 1] = nil
    r.last_seq = r.last_seq + 1
    add_event(r, ev)
  end
  for seq in pairs(r.pending) do
    if seq <= r.last_seq then
      r.pending[seq] = nil
    end
  end
  return upto == nil and next(r.pending) ~= nil
end

-- Live blocks ---------------------------------------------------------------------------------

local function open_block(r, agent, kind, text)
  local item = append(r, { kind = kind, text = text, agent = agent, depth = depth_of(r, agent), live = true,
    len = M.chars(text) })
  r.open[open_key(agent, kind)] = item
  return item
end

--- A piece of streamed text or reasoning (`planwire/delta`) at `offset` (characters of the block
--- sent before it; nil counts as the end of what is shown).
--- @return 'shown'|'seen'|'gap'
function M.delta(r, agent, kind, text, offset)
  local key = open_key(agent, kind)
  local open = r.open[key]
  local len = open and open.len or 0
  offset = type(offset) == 'number' and offset or len
  if offset > len or (not open and offset ~= 0) then
    return 'gap'
  end
  local n = M.chars(text)
  if offset + n <= len or n == 0 then
    return 'seen'
  end
  if not open then
    r.resynced[key] = nil
    open_block(r, agent, kind, text)
    return 'shown'
  end
  open.text = open.text .. M.drop_chars(text, len - offset)
  open.len = offset + n
  touch(r, open)
  return 'shown'
end

--- Whether a gap in `key`'s block may ask for the open blocks again (once per block).
function M.may_resync(r, agent, kind)
  local key = open_key(agent, kind)
  if r.resynced[key] then
    return false
  end
  r.resynced[key] = true
  return true
end

--- The blocks streaming now, as `getTranscript` gives them (`openBlocks`), applied after the
--- page that reached the run's last seq: each extends (or opens) its block as far as it was sent.
function M.open_blocks(r, blocks)
  for _, b in ipairs(type(blocks) == 'table' and blocks or {}) do
    if (b.kind == 'text' or b.kind == 'reasoning') and type(b.text) == 'string' and b.text ~= '' then
      local open = r.open[open_key(b.agentRunId, b.kind)]
      if not open then
        open_block(r, b.agentRunId, b.kind, b.text)
      else
        local n = M.chars(b.text)
        if n > open.len then
          open.text, open.len = b.text, n
          touch(r, open)
        end
      end
    end
  end
end

--- Hides the blocks still open when a run ends: they were never stored.
function M.close_open(r)
  for key, item in pairs(r.open) do
    r.open[key] = nil
    item.hidden = true
    touch(r, item)
  end
  r.resynced = {}
end

return M
