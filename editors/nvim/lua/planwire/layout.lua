--- A read-only buffer kept as an ordered list of sections, each an ordered list of blocks, and
--- written incrementally: appending blocks inserts only their lines, and changing a block
--- rewrites only its own lines (from the first line that differs), so the cost of an update is
--- proportional to what changed, not to the length of the buffer. Highlights (extmarks) are
--- set only on the lines written.
---
--- A block is `{ lines = { {text, hl?, spans = { {col, end_col, hl}, ... }?}, ... }, before = bool,
--- after = bool }`: `hl` highlights the whole line, `spans` parts of it (byte columns, 0-based). Between two
--- visible blocks (blocks with lines) goes one blank line when the first has `after` or the
--- second has `before`; a block with no lines is invisible and takes no space. Each block
--- remembers where it starts (relative to its section) and how many lines it takes, so the
--- buffer position of any block is known without looking at the others: that is the map from
--- an event's block to its line range that lets a tool result or a growing text update its own
--- lines in place. Windows whose cursor is on the last line keep following the end; a reader
--- elsewhere keeps their place (Neovim moves the cursor of lines inserted above it).
---
--- Invariant: a line's highlight follows from its text (a line whose text is unchanged keeps
--- its highlight when its block is rewritten).
local M = {}

local api = vim.api

local Layout = {}
Layout.__index = Layout

--- A layout of `buf` (emptied), highlighting in namespace `ns`.
function M.new(buf, ns)
  local self = setmetatable({ buf = buf, ns = ns, sections = {}, total = 0 }, Layout)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  self:_modify(function()
    api.nvim_buf_set_lines(buf, 0, -1, false, {})
  end)
  return self
end

--- Inserts a new, empty section at `index` (default: the end) and returns it.
function Layout:insert_section(index)
  local sec = { blocks = {}, written = 0, len = 0, dirty = {} }
  table.insert(self.sections, index or (#self.sections + 1), sec)
  return sec
end

--- Sets block `i` of `sec` (an existing block, or `#sec.blocks + 1` to append one). Written at
--- the next flush.
function Layout:set_block(sec, i, block)
  assert(i >= 1 and i <= #sec.blocks + 1, 'block index out of range')
  local old = sec.blocks[i]
  if old then
    old.lines, old.before, old.after = block.lines, block.before, block.after
  else
    sec.blocks[i] = { lines = block.lines, before = block.before, after = block.after, n = 0, sep = 0, row = 0 }
  end
  if i <= sec.written then
    sec.dirty[i] = true
  end
end

--- Number of blocks of `sec`.
function Layout:count(sec)
  return #sec.blocks
end

--- The 0-based buffer row of the first line of `sec`.
function Layout:section_row(sec)
  local row = 0
  for _, s in ipairs(self.sections) do
    if s == sec then
      return row
    end
    row = row + s.len
  end
  error('not a section of this layout')
end

--- The 0-based buffer row of the first text line of block `i` of `sec` (after its blank
--- separator), and its number of text lines, as last written.
function Layout:block_range(sec, i)
  local b = sec.blocks[i]
  if not b or i > sec.written then
    return nil
  end
  return self:section_row(sec) + b.row + b.sep, b.n - b.sep
end

-- Writing -------------------------------------------------------------------------------------

function Layout:_modify(fn)
  local buf = self.buf
  local was = vim.bo[buf].modifiable
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn)
  vim.bo[buf].modifiable = was
  vim.bo[buf].modified = false
  if not ok then
    error(err, 0)
  end
end

--- Replaces buffer rows [from, to) with `lines` ({text, hl?, spans?}), highlights them.
function Layout:_write(from, to, lines)
  local buf, ns = self.buf, self.ns
  local texts = {}
  for i, l in ipairs(lines) do
    texts[i] = l[1]
  end
  if to > from then
    api.nvim_buf_clear_namespace(buf, ns, from, to)
  end
  if self.total == 0 then
    api.nvim_buf_set_lines(buf, 0, -1, false, texts) -- the buffer's one empty line goes too
  else
    api.nvim_buf_set_lines(buf, from, to, false, texts)
  end
  self.total = self.total + #texts - (to - from)
  for i, l in ipairs(lines) do
    local hl = l[2]
    if hl and #texts[i] > 0 then
      api.nvim_buf_set_extmark(buf, ns, from + i - 1, 0, { end_col = #texts[i], hl_group = hl, priority = 200 })
    end
    for _, span in ipairs(l.spans or {}) do
      api.nvim_buf_set_extmark(buf, ns, from + i - 1, span[1], { end_col = math.min(span[2], #texts[i]),
        hl_group = span[3], priority = 201 })
    end
  end
end

local BLANK = { '' }

--- The `after` of the last visible block of `sec` before block `i`, else `enter`.
local function after_before(sec, i, enter)
  for j = i - 1, 1, -1 do
    local b = sec.blocks[j]
    if b.vis then
      return b.after
    end
  end
  return enter
end

local function separator(prev_after, block, visible)
  if visible and prev_after ~= nil and (prev_after or block.before) then
    return 1
  end
  return 0
end

--- Rewrites written block `i` of `sec` (section starting at row `start`); returns the change
--- in its line count and whether the next block's separator may change.
function Layout:_rewrite(sec, i, start, enter)
  local b = sec.blocks[i]
  local lines = b.lines
  local vis = lines == nil and b.vis or (lines ~= nil and #lines > 0)
  local sep = separator(after_before(sec, i, enter), b, vis)
  local row = start + b.row
  if lines then
    local new = {}
    if sep == 1 then
      new[1] = BLANK
    end
    for _, l in ipairs(lines) do
      new[#new + 1] = l
    end
    local old = b.n > 0 and api.nvim_buf_get_lines(self.buf, row, row + b.n, false) or {}
    local k = 0
    while k < #old and k < #new and old[k + 1] == new[k + 1][1] do
      k = k + 1
    end
    if k < #old or k < #new then
      self:_write(row + k, row + b.n, vim.list_slice(new, k + 1))
    end
  elseif sep ~= b.sep then
    -- only the separator changed (a block before this one appeared or went away)
    self:_write(row, row + b.sep, sep == 1 and { BLANK } or {})
  end
  local n = vis and ((lines and #lines or (b.n - b.sep)) + sep) or 0
  local delta = n - b.n
  local flags_changed = vis ~= b.vis or (vis and b.after ~= b.was_after)
  b.n, b.sep, b.vis, b.lines, b.was_after = n, sep, vis, nil, b.after
  return delta, flags_changed
end

--- Appends blocks `sec.written + 1 ..` at the end of the section (row `start + sec.len`).
function Layout:_append(sec, start, enter)
  local out = {}
  local prev = after_before(sec, sec.written + 1, enter)
  local row = sec.len
  for i = sec.written + 1, #sec.blocks do
    local b = sec.blocks[i]
    local lines = b.lines or {}
    local vis = #lines > 0
    local sep = separator(prev, b, vis)
    if sep == 1 then
      out[#out + 1] = BLANK
    end
    for _, l in ipairs(lines) do
      out[#out + 1] = l
    end
    b.row, b.sep, b.vis, b.lines, b.was_after = row, sep, vis, nil, b.after
    b.n = vis and (#lines + sep) or 0
    row = row + b.n
    if vis then
      prev = b.after
    end
  end
  if #out > 0 then
    self:_write(start + sec.len, start + sec.len, out)
  end
  sec.len = row
  sec.written = #sec.blocks
end

--- Marks the first visible block after block `i` of section `si` (in it or in a later
--- section) for a separator check.
function Layout:_touch_next(si, i)
  for s = si, #self.sections do
    local sec = self.sections[s]
    for j = (s == si) and (i + 1) or 1, sec.written do
      if sec.blocks[j].vis then
        sec.dirty[j] = true
        return
      end
    end
    if sec.written < #sec.blocks then
      return -- appended blocks work their separators out as they are written
    end
  end
end

--- Takes the keys of `set` out of it, lowest first, including keys added meanwhile.
local function lowest_first(set)
  return function()
    local low
    for k in pairs(set) do
      if not low or k < low then
        low = k
      end
    end
    if low then
      set[low] = nil
    end
    return low
  end
end

--- Writes every pending change. Returns true when the buffer changed.
function Layout:flush()
  local pending = false
  for _, sec in ipairs(self.sections) do
    if next(sec.dirty) or sec.written < #sec.blocks then
      pending = true
      break
    end
  end
  if not pending then
    return false
  end
  local buf = self.buf
  local followers = {}
  local last = self.total
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local row = api.nvim_win_get_cursor(win)[1]
    if row >= last or last <= 3 then
      table.insert(followers, win)
    end
  end
  self:_modify(function()
    local start, enter = 0, nil
    for si, sec in ipairs(self.sections) do
      -- lowest first: a rewrite may mark a later block of the same section
      for i in lowest_first(sec.dirty) do
        local delta, flags_changed = self:_rewrite(sec, i, start, enter)
        if delta ~= 0 then
          for j = i + 1, sec.written do
            sec.blocks[j].row = sec.blocks[j].row + delta
          end
          sec.len = sec.len + delta
        end
        if flags_changed then
          self:_touch_next(si, i)
        end
      end
      if sec.written < #sec.blocks then
        self:_append(sec, start, enter)
      end
      enter = after_before(sec, #sec.blocks + 1, enter)
      start = start + sec.len
    end
  end)
  if self.total ~= last then
    local n = api.nvim_buf_line_count(buf)
    for _, win in ipairs(followers) do
      if api.nvim_win_is_valid(win) then
        api.nvim_win_set_cursor(win, { n, 0 })
      end
    end
  end
  return true
end

return M
