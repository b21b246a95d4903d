-- The Neovim transcript benchmark: `nvim -l bench.lua [--sizes 2000,20000] [--runs 3]
-- [--ui tmux|headless] [--quick] [--json FILE]` (run.sh sets the environment up).
--
-- For each size it writes a `script` planner file that replays a long Claude session at
-- 1,000 lines/s (bench/stream.lua), then, `--runs` times: starts a fresh Neovim (in tmux, so a
-- real TUI draws, or headless) with the plugin and `--listen`, creates a ticket, opens its
-- transcript and plans it. It reports, per run and as median (min–max):
--   - plan shown: from the planner's last line (stamped by the replayer) to the plan's heading
--     appearing in the buffer, both on CLOCK_MONOTONIC;
--   - CPU per event of the Neovim server process, of the TUI process, and of both, from
--     /proc/PID/stat, between `:Planwire plan` and the plan shown;
--   - RPC round trip p95 and max from a second process (probe.lua) during the stream;
--   - peak memory (VmHWM) of the server and the TUI;
--   - and checks every event's row is in the buffer exactly once.
-- It exits 1 only when a row is missing or doubled or the plan is never shown; timing never
-- fails it.
local uv = vim.uv
local here = vim.fs.dirname(vim.fs.normalize(debug.getinfo(1, 'S').source:sub(2)))
local plugin = vim.fs.dirname(here)
local repo = vim.fs.dirname(vim.fs.dirname(plugin))
package.path = here .. '/?.lua;' .. package.path
local stream = require('stream')

local function say(fmt, ...)
  io.stdout:write(fmt:format(...) .. '\n')
  io.stdout:flush()
end

-- options -----------------------------------------------------------------------------------

local opts = { sizes = { 2000, 20000 }, runs = 3, ui = 'tmux', json = nil }
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == '--sizes' then
      opts.sizes = vim.tbl_map(tonumber, vim.split(arg[i + 1], ',', { plain = true }))
      i = i + 1
    elseif a == '--runs' then
      opts.runs = tonumber(arg[i + 1])
      i = i + 1
    elseif a == '--ui' then
      opts.ui = arg[i + 1]
      i = i + 1
    elseif a == '--json' then
      opts.json = arg[i + 1]
      i = i + 1
    elseif a == '--quick' then
      opts.sizes, opts.runs, opts.quick = { 300 }, 1, true
    else
      error('unknown option ' .. a)
    end
    i = i + 1
  end
end
if opts.ui == 'tmux' and vim.fn.executable('tmux') ~= 1 then
  say('tmux not found: measuring a headless Neovim')
  opts.ui = 'headless'
end

local nvim = vim.env.NVIM_BIN or vim.v.progpath
local bin = assert(vim.env.PLANWIRE_BIN, 'PLANWIRE_BIN is not set (run bench/run.sh)')
local tmp = assert(vim.env.PLANWIRE_BENCH_TMP, 'PLANWIRE_BENCH_TMP is not set (run bench/run.sh)')
local cache = repo .. '/target/bench-cache'
local CLK_TCK = tonumber(vim.trim(vim.fn.system({ 'getconf', 'CLK_TCK' }))) or 100

-- /proc ---------------------------------------------------------------------------------------

--- CPU seconds (user + system) of a process.
local function cpu(pid)
  local f = pid and io.open('/proc/' .. pid .. '/stat')
  if not f then
    return 0
  end
  local s = f:read('*a')
  f:close()
  local fields = vim.split(s:match('%) (.*)$'), ' ', { plain = true })
  return (tonumber(fields[12]) + tonumber(fields[13])) / CLK_TCK
end

--- VmHWM (peak resident set) of a process, in MiB.
local function hwm(pid)
  for _, l in ipairs(pid and vim.fn.readfile('/proc/' .. pid .. '/status') or {}) do
    local kb = l:match('^VmHWM:%s+(%d+) kB')
    if kb then
      return tonumber(kb) / 1024
    end
  end
end

--- The pid of a child of `ppid` whose command is `comm`.
local function child(ppid, comm)
  for _, d in ipairs(vim.fn.readdir('/proc')) do
    if d:match('^%d+$') then
      local f = io.open('/proc/' .. d .. '/stat')
      local s = f and f:read('*a')
      if f then
        f:close()
      end
      local c, rest = (s or ''):match('^%d+ %((.-)%) (.*)$')
      local parent = rest and tonumber(vim.split(rest, ' ', { plain = true })[2])
      if parent == ppid and c == comm then
        return tonumber(d)
      end
    end
  end
end

-- stats -----------------------------------------------------------------------------------------

local function percentile(list, p)
  local s = vim.deepcopy(list)
  table.sort(s)
  if #s == 0 then
    return 0
  end
  return s[math.max(1, math.ceil(#s * p))]
end

local function summary(list, fmt)
  local s = vim.deepcopy(list)
  table.sort(s)
  if #s == 0 then
    return '-'
  end
  local med = s[math.floor((#s + 1) / 2)]
  if #s == 1 then
    return fmt:format(med)
  end
  return (fmt .. ' (' .. fmt .. '–' .. fmt .. ')'):format(med, s[1], s[#s])
end

-- one run -----------------------------------------------------------------------------------------

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then
    f:close()
  end
  return tonumber(s:match('^(%S+)')) or 0
end

local function wait_for(what, timeout_ms, cond)
  local deadline = uv.hrtime() + timeout_ms * 1e6
  while uv.hrtime() < deadline do
    local v = cond()
    if v then
      return v
    end
    vim.wait(50)
  end
  error('timed out waiting for ' .. what)
end

local function run_once(size, script, cycles, n)
  local dir = ('%s/run-%d-%d'):format(tmp, size, n)
  vim.fn.mkdir(dir .. '/project/.git', 'p')
  local sock = dir .. '/nvim.sock'
  local env = {
    PLANWIRE_PLUGIN_DIR = plugin,
    XDG_STATE_HOME = dir .. '/state',
    XDG_DATA_HOME = dir .. '/data',
    XDG_CACHE_HOME = dir .. '/cache',
    XDG_CONFIG_HOME = dir .. '/config',
  }
  local argv = { nvim, '--listen', sock, '-u', here .. '/target.lua', '-i', 'NONE' }
  local tmux_label, proc
  if opts.ui == 'tmux' then
    tmux_label = ('planwire-bench-%d-%d'):format(vim.fn.getpid(), n)
    local cmd = { 'tmux', '-L', tmux_label, '-f', '/dev/null', 'new-session', '-d', '-x', '160', '-y', '48' }
    for k, v in pairs(env) do
      vim.list_extend(cmd, { '-e', k .. '=' .. v })
    end
    vim.list_extend(cmd, argv)
    local r = vim.system(cmd):wait()
    assert(r.code == 0, 'tmux: ' .. (r.stderr or ''))
  else
    table.insert(argv, 2, '--headless')
    proc = vim.system(argv, { env = env, stdin = false })
  end
  local chan
  local stopfile, rttfile = dir .. '/probe.stop', dir .. '/probe.rtt'
  local function measure()
    chan = wait_for('the Neovim socket', 20000, function()
      local ok, c = pcall(vim.fn.sockconnect, 'pipe', sock, { rpc = true })
      return ok and c > 0 and c or nil
    end)
    local function lua(code, ...)
      return vim.rpcrequest(chan, 'nvim_exec_lua', code, { ... })
    end
    local info = lua('return planwire_bench.prepare(...)', {
      bin = bin,
      db = dir .. '/planwire.db',
      script = script,
      project = dir .. '/project',
      events = size,
    })
    local server = info.pid
    local tui
    if tmux_label then
      local r = vim.system({ 'tmux', '-L', tmux_label, 'display', '-p', '#{pane_pid}' }):wait()
      tui = tonumber(vim.trim(r.stdout or ''))
      if tui == server then
        tui = nil
      end
    end
    -- the sidecar's CPU is shown for reference (not found when PLANWIRE_BIN is a wrapper)
    local sidecar = pcall(wait_for, 'the planwire sidecar', 5000, function()
      return child(server, vim.fs.basename(bin):sub(1, 15))
    end) and child(server, vim.fs.basename(bin):sub(1, 15)) or nil
    local probe = vim.system({ nvim, '-l', here .. '/probe.lua', sock, rttfile, stopfile }, { stdin = false })
    vim.wait(500)
    local load0 = loadavg()
    local c0 = { server = cpu(server), tui = cpu(tui), sidecar = cpu(sidecar) }
    lua('planwire_bench.plan()')
    local res = wait_for('the plan shown', 60000 + size * 5, function()
      local r = lua('return planwire_bench.result()')
      return r ~= vim.NIL and r or nil
    end)
    local c1 = { server = cpu(server), tui = cpu(tui), sidecar = cpu(sidecar) }
    local fd = io.open(stopfile, 'w')
    if fd then
      fd:close()
    end
    probe:wait(20000)
    local rtts = vim.tbl_map(tonumber, vim.fn.filereadable(rttfile) == 1 and vim.fn.readfile(rttfile) or {})
    local lines = lua('return planwire_bench.lines()')
    local bad = stream.check_rows(lines, cycles)
    local mem = { server = hwm(server), tui = hwm(tui) }
    return res, c0, c1, rtts, bad, mem, load0
  end
  local ok, res, c0, c1, rtts, bad, mem, load0 = pcall(measure)
  -- whatever happened, nothing this run started outlives it
  local fd = io.open(stopfile, 'w')
  if fd then
    fd:close()
  end
  if chan then
    pcall(vim.rpcnotify, chan, 'nvim_command', 'qa!')
    pcall(vim.fn.chanclose, chan)
  end
  if tmux_label then
    vim.system({ 'tmux', '-L', tmux_label, 'kill-server' }):wait()
  elseif proc and not pcall(proc.wait, proc, 10000) then
    pcall(proc.kill, proc, 9)
  end
  if not ok then
    error(res, 0)
  end
  local events = res.events
  local r = {
    size = size,
    events = events,
    status = res.status,
    lines = res.lines,
    shown_ms = (res.shown_ns - (res.stamp_ns or res.shown_ns)) / 1e6,
    cpu_server_ms = (c1.server - c0.server) * 1000 / events,
    cpu_tui_ms = (c1.tui - c0.tui) * 1000 / events,
    cpu_sidecar_ms = (c1.sidecar - c0.sidecar) * 1000 / events,
    rtt_p95 = percentile(rtts, 0.95),
    rtt_max = percentile(rtts, 1),
    rtt_n = #rtts,
    hwm_server = mem.server,
    hwm_tui = mem.tui,
    load = (load0 + loadavg()) / 2,
    bad = bad,
  }
  r.cpu_total_ms = r.cpu_server_ms + r.cpu_tui_ms
  say('  run %d: %d events, %d lines, plan shown %.0f ms after the last line; CPU/event %.3f ms (server %.3f, TUI %.3f;'
    .. ' sidecar %.3f); RPC p95 %.1f ms, max %.1f ms (%d probes); VmHWM server %.1f MiB, TUI %s; load %.1f; rows: %s',
    n, events, r.lines, r.shown_ms, r.cpu_total_ms, r.cpu_server_ms, r.cpu_tui_ms, r.cpu_sidecar_ms, r.rtt_p95,
    r.rtt_max, r.rtt_n, r.hwm_server or 0, r.hwm_tui and ('%.1f MiB'):format(r.hwm_tui) or '-', r.load,
    #bad == 0 and 'every event exactly once' or (#bad .. ' wrong: ' .. table.concat(vim.list_slice(bad, 1, 5), '; ')))
  return r
end

-- main ------------------------------------------------------------------------------------------

say('planwire Neovim transcript benchmark: %s, %s, UI %s, %d run(s) per size', nvim, bin, opts.ui, opts.runs)
local all, failed = {}, false
local per_size = {}
for _, size in ipairs(opts.sizes) do
  local script = ('%s/nvim-stream-%d-v1.jsonl'):format(cache, size)
  local cycles = stream.cycles(size)
  if vim.fn.filereadable(script) == 0 then
    stream.write(script, { repo = repo, events = size, pace_ms = 1, stamp = true })
  end
  say('%d events (%s)', size, script)
  local runs = {}
  for n = 1, opts.runs do
    local ok, r = pcall(run_once, size, script, cycles, n)
    if not ok then
      say('  run %d FAILED: %s', n, tostring(r))
      failed = true
    else
      table.insert(runs, r)
      table.insert(all, r)
      failed = failed or #r.bad > 0 or r.status ~= 'planned'
    end
  end
  local function col(k)
    return vim.tbl_map(function(r)
      return r[k]
    end, runs)
  end
  per_size[size] = { cpu = col('cpu_total_ms'), server = col('cpu_server_ms') }
  say('  median (min–max): plan shown %s ms · CPU/event %s ms (server %s, TUI %s) · RPC p95 %s ms, max %s ms'
    .. ' · VmHWM server %s MiB, TUI %s MiB',
    summary(col('shown_ms'), '%.0f'), summary(col('cpu_total_ms'), '%.3f'), summary(col('cpu_server_ms'), '%.3f'),
    summary(col('cpu_tui_ms'), '%.3f'), summary(col('rtt_p95'), '%.1f'), summary(col('rtt_max'), '%.1f'),
    summary(col('hwm_server'), '%.1f'), summary(col('hwm_tui'), '%.1f'))
end
if #opts.sizes == 2 and per_size[opts.sizes[1]] and per_size[opts.sizes[2]] then
  local function med(l)
    local s = vim.deepcopy(l)
    table.sort(s)
    return s[math.floor((#s + 1) / 2)]
  end
  local a, b = per_size[opts.sizes[1]], per_size[opts.sizes[2]]
  if #a.cpu > 0 and #b.cpu > 0 then
    say('CPU/event ratio %d : %d = %.2f (server alone %.2f)', opts.sizes[2], opts.sizes[1], med(b.cpu) / med(a.cpu),
      med(b.server) / med(a.server))
  end
end
if opts.json then
  vim.fn.writefile({ vim.json.encode(all) }, opts.json)
end
say(failed and 'FAILED: a row missing or doubled, or a plan not shown' or 'ok: every event shown exactly once')
os.exit(failed and 1 or 0)
