--- A long Claude Code stream-json session as a `script` planner file (`planwire replay FILE`):
--- cycles of assistant text, a Read call and its result, more text, a Bash call and its result,
--- then the final answer with its plan. The shapes are those of `server/scripts/demo.jsonl`
--- (the init, text, tool_use, tool_result, final and result lines of a recorded run), with
--- unique ids and texts, so that every event's row can be found exactly once.
---
--- Used by the benchmark (`bench.lua`, paced at 1,000 lines/s with the plan's title stamped)
--- and by the large-transcript test (at full speed).
local M = {}

--- The token `planwire replay` replaces with CLOCK_MONOTONIC ns as it writes the line.
M.STAMP = '@@PWNS@@'

local json = vim.json

--- The `out` lines of demo.jsonl, decoded, by role.
local function shapes(repo)
  local path = repo .. '/server/scripts/demo.jsonl'
  local s = {}
  for _, l in ipairs(vim.fn.readfile(path)) do
    local d = l ~= '' and json.decode(l) or {}
    local ok, v = pcall(json.decode, d.out or '')
    if ok and type(v) == 'table' then
      local block = type(v.message) == 'table' and v.message.content and v.message.content[1] or {}
      if v.subtype == 'init' then
        s.init = v
      elseif v.type == 'result' then
        s.result = v
      elseif v.type == 'assistant' and block.type == 'text' and block.text:find('<planwire-plan>', 1, true) then
        s.final = v
      elseif v.type == 'assistant' and block.type == 'text' then
        s.text = v
      elseif v.type == 'assistant' and block.type == 'tool_use' then
        s.tool_use = v
      elseif v.type == 'user' then
        s.tool_result = v
      end
    end
  end
  for _, k in ipairs({ 'init', 'result', 'final', 'text', 'tool_use', 'tool_result' }) do
    assert(s[k], 'no ' .. k .. ' line in ' .. path)
  end
  s.tool_result.tool_use_result = nil
  return s
end

--- The text of step `k`: two or three lines, the first naming the step.
function M.text_of(k)
  local body = ('Step %d: the module `src/mod_%d.rs` holds part of the greeting logic.'):format(k, k)
  if k % 3 == 0 then
    return body .. '\nIt is called from `main` and has no tests yet.\nNext I check its callers.'
  end
  return body .. '\nNext I look at what it calls.'
end

--- The input summary of the Read call of step `k` and the Bash call of step `k`.
function M.read_path(k)
  return ('/home/dev/project/src/mod_%d.rs'):format(k)
end
function M.bash_command(k)
  return ('rg -n "greet_%d" src'):format(k)
end

local function with(line, fn)
  local v = vim.deepcopy(line)
  fn(v)
  return json.encode(v)
end

--- The plan the final answer carries; its title holds the stamp when `stamp` is set.
function M.plan(stamp)
  return {
    title = 'Bench plan ' .. (stamp and M.STAMP or 'done'),
    description = '## Context\nA long planning session.\n\n## Steps\n1. Change the greeting.',
    acceptanceCriteria = { '`cargo run` prints the new greeting' },
    openQuestions = {},
    dependencies = {},
  }
end

--- The cycles (pairs of steps) of a stream of about `events` events.
function M.cycles(events)
  return math.max(1, math.floor((events - 3) / 6))
end

--- Writes the script for about `events` transcript events to `path`.
--- @param opts { repo: string, events: integer, pace_ms?: number, stamp?: boolean }
--- @return integer cycles, integer lines
function M.write(path, opts)
  local s = shapes(opts.repo)
  local out = { json.encode({ format = 'claude' }) }
  local n = 0
  local function emit(line, extra)
    local d = { out = line }
    if opts.pace_ms then
      d.atMs = math.floor(100 + n * opts.pace_ms)
    end
    for k, v in pairs(extra or {}) do
      d[k] = v
    end
    n = n + 1
    table.insert(out, json.encode(d))
  end
  emit(json.encode(s.init))
  -- 6 events a cycle (text, Read, result, text, Bash, result); plus session, final text, usage
  local cycles = M.cycles(opts.events)
  for k = 1, cycles do
    for half = 0, 1 do
      local id = ('%d_%d'):format(k, half)
      local step = 2 * k - 1 + half
      emit(with(s.text, function(v)
        v.message.id = 'msg_bench_' .. id
        v.uuid = 'bench-t-' .. id
        v.message.content[1].text = M.text_of(step)
      end))
      emit(with(s.tool_use, function(v)
        v.message.id = 'msg_bench_' .. id
        v.uuid = 'bench-u-' .. id
        local b = v.message.content[1]
        b.id = 'toolu_bench_' .. id
        if half == 0 then
          b.name, b.input = 'Read', { file_path = M.read_path(step) }
        else
          b.name, b.input = 'Bash', { command = M.bash_command(step), description = 'find callers' }
        end
      end))
      emit(with(s.tool_result, function(v)
        v.uuid = 'bench-r-' .. id
        local b = v.message.content[1]
        b.tool_use_id = 'toolu_bench_' .. id
        b.content = half == 0 and ('1\tpub fn greet_%d() {\n2\t    println!("hello");\n3\t}'):format(step)
          or ('src/main.rs:%d:    greet_%d();'):format(step, step)
        b.is_error = false
      end))
    end
  end
  local answer = 'I have read enough to plan the change.\n\n<planwire-plan>' .. json.encode(M.plan(opts.stamp))
    .. '</planwire-plan>'
  local last = {}
  if opts.stamp then
    last.stamp = M.STAMP
  end
  emit(with(s.final, function(v)
    v.message.content[1].text = answer
  end), last)
  -- the planner's last line: the result, written with the same pace as the answer before it
  if opts.pace_ms then
    n = n - 1
  end
  emit(with(s.result, function(v)
    v.result = answer
  end), last)
  table.insert(out, json.encode({ exit = 0 }))
  local tmp = path .. '.tmp'
  vim.fn.mkdir(vim.fs.dirname(path), 'p')
  assert(vim.fn.writefile(out, tmp) == 0, 'cannot write ' .. tmp)
  assert(os.rename(tmp, path))
  return cycles, n
end

--- Rows every event of the stream should have, each exactly once: "text:K", "read:K",
--- "bash:K", plus the usage line and the plan's heading.
function M.check_rows(lines, cycles)
  local count = {}
  local function bump(k)
    count[k] = (count[k] or 0) + 1
  end
  for _, l in ipairs(lines) do
    local step = l:match('^Step (%d+): ')
    if step then
      bump('text:' .. step)
    elseif l:find('^▸ Read ') then
      bump('read:' .. (l:match('/mod_(%d+)%.rs ✓$') or ('unfinished ' .. l)))
    elseif l:find('^▸ Bash ') then
      bump('bash:' .. (l:match('greet_(%d+).- ✓$') or ('unfinished ' .. l)))
    elseif l:find('^_usage: ') then
      bump('usage')
    elseif l:find('^# Plan: ') then
      bump('plan')
    end
  end
  local bad = {}
  local want = { usage = true, plan = true }
  for k = 1, 2 * cycles do
    want['text:' .. k] = true
    want[(k % 2 == 1 and 'read:' or 'bash:') .. k] = true
  end
  for k in pairs(want) do
    if count[k] ~= 1 then
      table.insert(bad, ('%s shown %d times'):format(k, count[k] or 0))
    end
  end
  for k, n in pairs(count) do
    if not want[k] then
      table.insert(bad, ('unexpected row %s (%d times)'):format(k, n))
    end
  end
  table.sort(bad)
  return bad
end

return M
