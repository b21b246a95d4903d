--- :checkhealth planwire
local M = {}

local health = vim.health

--- The OS sandbox of this session's planner processes (`capabilities.experimental.planwire.sandbox`).
function M.sandbox(state, mode)
  if state == 'enforced' then
    health.ok('sandbox: enforced (planners run under Landlock and cannot write to your files)')
  elseif state == 'unavailable' then
    health.warn('sandbox: unavailable: this system has no Landlock, so planners run without the OS sandbox', {
      'Only the planner\'s own plan mode keeps it from writing; planwire still checks the work tree after each pass.',
      'Use Linux 5.13 or later with Landlock enabled, or set init_options = { sandbox = "required" } to refuse to plan without it.',
    })
  elseif state == 'off' then
    health.warn('sandbox: off (init_options.sandbox = "off"): planners run without the OS sandbox', {
      'Remove init_options.sandbox (or set it to "auto") to plan inside the sandbox.',
    })
  else
    health.warn('sandbox: the server did not report its state (' .. tostring(state) .. ')')
  end
  if mode then
    health.info('init_options.sandbox: ' .. tostring(mode))
  end
end

function M.check()
  local planwire = require('planwire')
  local client = require('planwire.client')
  local cfg = planwire.config

  health.start('planwire: Neovim')
  local v = vim.version()
  local vs = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. vs .. ' (0.10 or newer)')
  else
    health.error('Neovim ' .. vs .. ' is too old: planwire needs 0.10 or newer')
  end

  health.start('planwire: server binary')
  local cmd, why = planwire.server_cmd()
  local bin = cmd[1]
  local path = vim.fn.exepath(bin)
  if path == '' then
    health.error(('server binary not found: %s (%s)'):format(tostring(bin), why), {
      'Build it in the plugin root with `cargo build --release -p planwire` (a plugin manager build hook;',
      'see the README), or `cargo install --path server` to put `planwire` on PATH,',
      "or point the plugin at it: require('planwire').setup({ cmd = { '/path/to/planwire', '--stdio' } })",
    })
    return
  end
  local ok, res = pcall(function()
    return vim.system({ path, '--version' }, { text = true }):wait(5000)
  end)
  if ok and res and res.code == 0 then
    health.ok(('%s: %s'):format(path, vim.trim(res.stdout or '')))
  else
    health.warn(('%s --version failed: %s'):format(path, ok and vim.trim((res and res.stderr) or '') or tostring(res)))
  end
  health.info('uses it because it is ' .. why)
  health.info('command: ' .. table.concat(cmd, ' '))

  health.start('planwire: server')
  local err, status = client.request_sync('planwire/status', {}, 10000)
  if err then
    health.error('the server did not answer planwire/status: ' .. client.format_error(err), {
      client.state.last_error or 'See :LspLog for the server log.',
    })
    return
  end
  local info = client.get() and client.get().server_info
  if info then
    health.ok(('server running: %s %s'):format(info.name or 'planwire', info.version or ''))
  else
    health.ok('server running')
  end
  local caps = client.server_capabilities()
  if caps and caps.protocolVersion then
    health.info('protocol version ' .. tostring(caps.protocolVersion))
  end
  M.sandbox(caps and caps.sandbox, (cfg.init_options or {}).sandbox)

  local store = status.store or {}
  if store.path then
    health.ok(('database: %s (schema %s, %s tickets, %s runs)'):format(
      store.path, tostring(store.schemaVersion), tostring(store.tickets), tostring(store.runs)))
  else
    health.warn('the server reported no database path')
  end
  if cfg.db_path then
    health.info('db_path from setup(): ' .. cfg.db_path)
  end

  health.start('planwire: planners')
  local planners = status.planners or (caps and caps.planners) or {}
  local usable = 0
  for _, p in ipairs(planners) do
    local label = p.tool .. (p.version and (' ' .. p.version) or '') .. (p.path and (' (' .. p.path .. ')') or '')
    if p.found and p.supported then
      usable = usable + 1
      health.ok(label .. ': found, supported')
    elseif p.found then
      health.warn(label .. ': found but not supported', p.hint and { p.hint } or nil)
    else
      health.warn(p.tool .. ': not found', p.hint and { p.hint } or nil)
    end
  end
  if #planners == 0 then
    health.error('the server reported no planners')
  elseif usable == 0 then
    health.error('no usable planner: install Claude Code, OpenCode or Codex')
  end
  if cfg.tool then
    health.info('new tickets use tool: ' .. cfg.tool .. (cfg.model and (' model ' .. cfg.model) or ''))
  end
end

return M
