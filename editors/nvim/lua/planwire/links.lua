--- Linked projects: other repositories the planner researches before planning this project
--- (`planwire/linkProject`, `planwire/unlinkProject`, `planwire/listLinks`).
local M = {}

local client = require('planwire.client')

--- Lines describing a project's links.
function M.format(root, links)
  local lines = { ('linked projects of %s:'):format(root) }
  if #links == 0 then
    table.insert(lines, '  none (:Planwire link {path} {name} {role…})')
  end
  for _, l in ipairs(links) do
    table.insert(lines, ('  %s → %s — %s'):format(l.name, l.linkedRoot, l.role))
  end
  return lines
end

local function done(root, what, cb)
  return function(err, result)
    if err then
      client.notify(what .. ': ' .. client.format_error(err), vim.log.levels.ERROR)
    else
      client.state.links[root] = result and result.links or {}
      M.last = { root = root, links = client.state.links[root] }
      client.notify(table.concat(M.format(root, client.state.links[root]), '\n'))
    end
    if cb then
      cb(err, result)
    end
  end
end

--- An absolute directory path without a trailing slash.
local function absolute(path)
  local p = vim.fn.fnamemodify(vim.fn.expand(path), ':p'):gsub('/+$', '')
  return p == '' and '/' or p
end

--- :Planwire link {path} {name} {role…} — links the repository at {path} to this project as
--- {name}; asks the role with vim.ui.input when it is not given.
function M.link(path, name, role, cb)
  if not path or path == '' or not name or name == '' then
    return client.notify('usage: :Planwire link {path} {name} {role…}', vim.log.levels.ERROR)
  end
  local root = client.root()
  local linked = absolute(path)
  if vim.fn.isdirectory(linked) == 0 then
    return client.notify('not a directory: ' .. linked, vim.log.levels.ERROR)
  end
  local function go(r)
    r = r and vim.trim(r) or ''
    if r == '' then
      return client.notify('a link needs a role, e.g. "the backend serving /api"', vim.log.levels.WARN)
    end
    client.request('planwire/linkProject', { root = root, linkedRoot = linked, name = name, role = r },
      done(root, 'linkProject', cb))
  end
  if role and vim.trim(role) ~= '' then
    return go(role)
  end
  vim.ui.input({ prompt = ('Role of %s (one line): '):format(name) }, go)
end

--- :Planwire unlink {name}
function M.unlink(name, cb)
  if not name or name == '' then
    return client.notify('usage: :Planwire unlink {name}', vim.log.levels.ERROR)
  end
  local root = client.root()
  client.request('planwire/unlinkProject', { root = root, name = name }, done(root, 'unlinkProject', cb))
end

--- :Planwire links — shows the project's linked repositories.
function M.list(cb)
  local root = client.root()
  client.request('planwire/listLinks', { root = root }, done(root, 'listLinks', cb))
end

--- Link names of the current project, for completion (from the last answer; refreshed in the
--- background, or fetched now when the server runs and nothing is known yet).
function M.cached_names()
  local root = client.root()
  if not client.state.links[root] and client.get() and client.state.initialized then
    local err, result = client.request_sync('planwire/listLinks', { root = root }, 1000)
    if not err and result then
      client.state.links[root] = result.links or {}
    end
  end
  local names = {}
  for _, l in ipairs(client.state.links[root] or {}) do
    table.insert(names, l.name)
  end
  table.sort(names)
  return names
end

return M
