--- What a plan becomes after planning: its versions (`planwire/listPlans`, `planwire/getPlan`),
--- each readable as `planwire://plan/<id>/v<version>` and two of them side by side in diff mode;
--- its export into the repository as markdown (`planwire/exportPlan`); and its hand-off to an
--- implementation CLI (`planwire/handoff`), which runs in a `:terminal` of its own.
local M = {}

local api = vim.api
local client = require('planwire.client')
local render = require('planwire.render')

local CONFLICT = -32014

--- The buffer name of a plan version.
function M.bufname(id, version)
  return ('planwire://plan/%d/v%d'):format(id, version)
end

--- The ticket and version of a plan version buffer, or nil.
function M.of_buf(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local id, v = api.nvim_buf_get_name(buf):match('^planwire://plan/(%d+)/v(%d+)$')
  if id then
    return tonumber(id), tonumber(v)
  end
end

local function describe(p, latest)
  local title = type(p.plan) == 'table' and p.plan.title or ''
  return ('v%d · %s%s · %s%s'):format(p.version, render.when(p.createdAt), p.runId and (' · run ' .. p.runId) or '',
    render.one_line(title, 100), p.version == latest and ' (latest)' or '')
end

-- Versions -------------------------------------------------------------------------------------

--- Fills a plan version buffer from `planwire/getPlan`. Returns an error, or nil.
local function load_version(buf, id, version)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.b[buf].planwire_ticket = id
  local err, p = client.request_sync('planwire/getPlan', { ticketId = id, version = version })
  local lines
  if err or type(p) ~= 'table' then
    err = err or { message = 'no plan returned' }
    lines = { '**error:** ' .. client.format_error(err) }
  else
    lines = vim.split((p.markdown or ''):gsub('\n$', '') .. '', '\n', { plain = true })
    vim.b[buf].planwire_plan_loaded = true
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  if vim.bo[buf].filetype ~= 'markdown' then
    vim.bo[buf].filetype = 'markdown'
  end
  local t = client.state.tickets[id]
  if t and t.root then
    vim.b[buf].planwire_root = t.root
  end
  return err
end

--- The buffer of a plan version, loaded (a loaded one is kept: a version never changes).
--- @return integer? buf, any err
function M.version_buf(id, version)
  local name = M.bufname(id, version)
  local buf = require('planwire.transcript').find_buf(name)
  if buf and vim.b[buf].planwire_plan_loaded then
    return buf
  end
  if not buf then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, name)
  end
  local err = load_version(buf, id, version)
  if err then
    client.notify(('plan version %d of ticket %d: %s'):format(version, id, client.format_error(err)), vim.log.levels.ERROR)
    pcall(api.nvim_buf_delete, buf, { force = true })
    return nil, err
  end
  return buf
end

--- Opens a plan version in the current window.
function M.open_version(id, version)
  local buf = M.version_buf(id, version)
  if buf then
    api.nvim_win_set_buf(0, buf)
  end
  return buf
end

--- BufReadCmd of planwire://plan/<id>/v<version>.
function M.on_read(buf, name)
  local id, v = tostring(name):match('^planwire://plan/(%d+)/v(%d+)$')
  if not id then
    return client.notify('not a plan version: ' .. tostring(name), vim.log.levels.ERROR)
  end
  load_version(buf, tonumber(id), tonumber(v))
end

--- `cb(plans)` with the ticket's versions, newest first (nothing, and a message, when it has none).
local function with_versions(id, cb)
  client.request('planwire/listPlans', { ticketId = id }, function(err, result)
    if err then
      return client.notify('listPlans: ' .. client.format_error(err), vim.log.levels.ERROR)
    end
    local plans = vim.deepcopy(result and result.plans or {})
    if #plans == 0 then
      return client.notify(('ticket %d has no plan yet: :Planwire plan %d plans it'):format(id, id), vim.log.levels.WARN)
    end
    table.sort(plans, function(a, b)
      return a.version > b.version
    end)
    cb(plans)
  end)
end

--- :Planwire versions [id] — picks one of the ticket's plan versions and opens it.
function M.versions(id)
  with_versions(id, function(plans)
    local latest = plans[1].version
    vim.ui.select(plans, {
      prompt = ('Plan versions of ticket %d'):format(id),
      kind = 'planwire.plan_version',
      format_item = function(p)
        return describe(p, latest)
      end,
    }, function(p)
      if p then
        M.open_version(id, p.version)
      end
    end)
  end)
end

--- Shows versions `a` and `b` side by side in a new tab page, in diff mode (the older left).
function M.show_diff(id, a, b)
  a, b = math.min(a, b), math.max(a, b)
  local left = M.version_buf(id, a)
  local right = left and M.version_buf(id, b)
  if not right then
    return
  end
  vim.cmd('tab sbuffer ' .. left)
  vim.cmd('diffthis')
  vim.cmd('vertical rightbelow sbuffer ' .. right)
  vim.cmd('diffthis')
  client.notify(('plan versions %d and %d of ticket %d (:tabclose closes them)'):format(a, b, id))
  return left, right
end

--- :Planwire diff [id] [a b] — two plan versions side by side in diff mode. Without versions:
--- the two there are, else both picked with vim.ui.select.
function M.diff(id, a, b)
  if a and b then
    return M.show_diff(id, a, b)
  end
  with_versions(id, function(plans)
    if #plans < 2 then
      return client.notify(('ticket %d has one plan version: nothing to compare yet'):format(id), vim.log.levels.WARN)
    elseif #plans == 2 then
      return M.show_diff(id, plans[2].version, plans[1].version)
    end
    local latest = plans[1].version
    local function fmt(p)
      return describe(p, latest)
    end
    vim.ui.select(plans, { prompt = 'Compare plan version', kind = 'planwire.plan_version', format_item = fmt },
      function(first)
        if not first then
          return
        end
        local others = vim.tbl_filter(function(p)
          return p.version ~= first.version
        end, plans)
        vim.ui.select(others, { prompt = ('Compare version %d with'):format(first.version),
          kind = 'planwire.plan_version', format_item = fmt }, function(second)
          if second then
            M.show_diff(id, first.version, second.version)
          end
        end)
      end)
  end)
end

-- Export ---------------------------------------------------------------------------------------

local function export_to(id, version, path, overwrite, force)
  client.request('planwire/exportPlan', { ticketId = id, version = version, path = path, overwrite = overwrite },
    function(err, result)
      if err and err.code == CONFLICT and not overwrite then
        if force then
          return export_to(id, version, path, true)
        end
        return require('planwire.commands').confirm(('%s exists. Overwrite it?'):format(path), 'Overwrite', function()
          export_to(id, version, path, true)
        end)
      elseif err then
        return client.notify('exportPlan: ' .. client.format_error(err), vim.log.levels.ERROR)
      end
      client.notify(('plan version %d of ticket %d exported to %s (%d bytes)'):format(result.version, id, result.path,
        result.bytes))
    end)
end

--- An absolute path: relative to the current directory, as `:w` takes it.
local function absolute(path)
  return vim.fn.fnamemodify(vim.fn.expand(path), ':p')
end

--- :Planwire export [path] — writes a plan version (the one shown, else the latest) into the
--- repository as markdown. Without a path it asks, offering the server's default
--- (`.planwire/plans/<id>-<slug>.md`); an existing file is replaced only after a confirmation
--- (none with !).
function M.export(path, force)
  local shown_id, shown_version = M.of_buf(0)
  local function go(id, version)
    if path and vim.trim(path) ~= '' then
      return export_to(id, version, absolute(vim.trim(path)), false, force)
    end
    client.request('planwire/exportPlan', { ticketId = id, version = version, dryRun = true }, function(err, result)
      if err then
        return client.notify('exportPlan: ' .. client.format_error(err), vim.log.levels.ERROR)
      end
      vim.ui.input({ prompt = ('Export plan version %d of ticket %d to: '):format(result.version, id),
        default = result.path, completion = 'file' }, function(answer)
        if answer == nil or vim.trim(answer) == '' then
          return client.notify('export cancelled')
        end
        export_to(id, result.version, absolute(vim.trim(answer)), false, force)
      end)
    end)
  end
  if shown_id then
    return go(shown_id, shown_version)
  end
  require('planwire.commands').resolve_ticket(nil, function(id)
    go(id, nil)
  end)
end

-- Hand-off -------------------------------------------------------------------------------------

--- Runs `argv` (no shell) in a new `:terminal` window below, in `cwd`. Returns the buffer and job.
function M.terminal(argv, cwd)
  vim.cmd('botright new')
  local buf = api.nvim_get_current_buf()
  local ok, job
  if vim.fn.has('nvim-0.11') == 1 then
    ok, job = pcall(vim.fn.jobstart, argv, { term = true, cwd = cwd })
  else
    ok, job = pcall(vim.fn.termopen, argv, { cwd = cwd })
  end
  if not ok or type(job) ~= 'number' or job <= 0 then
    client.notify(('could not start %s: %s'):format(tostring(argv[1]), tostring(ok and job or job)), vim.log.levels.ERROR)
    return buf, nil
  end
  vim.b[buf].planwire_handoff = { argv = argv, cwd = cwd }
  vim.cmd('startinsert')
  return buf, job
end

local function handoff_with(id, tool)
  client.request('planwire/handoff', { ticketId = id, tool = tool }, function(err, result)
    if err then
      local hint = err.code == -32011 and (' (:Planwire plan %d makes one)'):format(id) or ''
      return client.notify('handoff: ' .. client.format_error(err) .. hint, vim.log.levels.ERROR)
    end
    local buf = M.terminal(result.argv, result.cwd)
    M.last_handoff = { result = result, buf = buf }
    local t = client.state.tickets[id]
    client.notify(('plan version %d of ticket %d handed off to %s in %s'):format(result.version, id,
      tostring(tool or (t and t.tool) or vim.fs.basename(result.argv[1])), result.cwd))
  end)
end

--- :Planwire handoff [tool] — hands the ticket's latest plan to an implementation CLI (claude,
--- opencode or codex) and runs it in a terminal split. Without a tool: the ticket's own
--- planner when it can implement, else one picked among the CLIs found.
function M.handoff(tool)
  require('planwire.commands').resolve_ticket(nil, function(id)
    if tool and tool ~= '' then
      return handoff_with(id, tool)
    end
    local t = client.state.tickets[id]
    local implementers = require('planwire.edit').IMPLEMENTERS
    if t and implementers[t.tool] then
      return handoff_with(id, nil)
    end
    client.request('planwire/status', {}, function(err, status)
      if err then
        return client.notify('status: ' .. client.format_error(err), vim.log.levels.ERROR)
      end
      local found = {}
      for _, p in ipairs(status.planners or {}) do
        if p.found and implementers[p.tool] then
          table.insert(found, p.tool)
        end
      end
      if #found == 0 then
        return client.notify('no implementation CLI found: install Claude Code, OpenCode or Codex (see :checkhealth planwire)',
          vim.log.levels.ERROR)
      end
      vim.ui.select(found, { prompt = ('Hand ticket %d\'s plan off to'):format(id), kind = 'planwire.handoff' },
        function(choice)
          if choice then
            handoff_with(id, choice)
          end
        end)
    end)
  end)
end

return M
