-- Installed the way a plugin manager does it: a copy of the repository (editors/nvim on the
-- runtimepath) whose build hook made target/release/planwire, and nothing on PATH. A second
-- Neovim, with only that copy, plans a ticket and :checkhealth says which binary and why.
local H = require('helpers')

--- A copy of the repository's Neovim plugin with a built binary at target/release/planwire.
local function checkout()
  local root = H.tempdir('checkout')
  vim.fn.mkdir(root .. '/editors', 'p')
  vim.fn.mkdir(root .. '/server', 'p')
  vim.fn.mkdir(root .. '/target/release', 'p')
  local r = vim.system({ 'cp', '-R', H.plugin_dir, root .. '/editors/nvim' }):wait()
  assert(r.code == 0, r.stderr)
  r = vim.system({ 'cp', H.repo .. '/Cargo.toml', root .. '/Cargo.toml' }):wait()
  assert(r.code == 0, r.stderr)
  r = vim.system({ 'cp', H.bin, root .. '/target/release/planwire' }):wait()
  assert(r.code == 0, r.stderr)
  return root
end

-- What the second Neovim runs (`nvim -l`): plan a ticket with the `demo` script through the
-- plugin's commands, then :checkhealth; writes a JSON report to arg[2].
local CHILD = [[
local root, out, project, db = arg[1], arg[2], arg[3], arg[4]
vim.opt.runtimepath:prepend(root .. '/editors/nvim')
local report = { on_path = vim.fn.exepath('planwire'), notes = {} }
vim.notify = function(msg) table.insert(report.notes, msg) end
local planwire = require('planwire').setup({ db_path = db, tool = 'script', model = 'demo' })
local cmd, why = planwire.server_cmd()
report.cmd, report.why = cmd, why
vim.fn.chdir(project)
local client = require('planwire.client')
local err, t = client.request_sync('planwire/createTicket', { root = project, title = 'From a checkout', description = '', tool = 'script', model = 'demo' }, 60000)
report.create_error = err and client.format_error(err) or nil
if t then
  client.on_ticket(t)
  vim.cmd('Planwire plan ' .. t.id)
  vim.wait(120000, function()
    local s = client.state.tickets[t.id]
    return s and s.status == 'planned' and s.plan ~= nil
  end, 50)
  report.status = client.state.tickets[t.id].status
  local c = client.get()
  report.server_cmd = c and c.config.cmd
end
vim.cmd('silent checkhealth planwire')
report.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
vim.fn.writefile({ vim.json.encode(report) }, out)
client.stop(true)
vim.wait(5000, function() return client.get() == nil end, 50)
]]

describe('installed by a plugin manager', function()
  it('uses <plugin root>/target/release/planwire with nothing on PATH, and :checkhealth says so', function()
    local root = checkout()
    local dir = H.tempdir('install')
    local script, out = dir .. '/child.lua', dir .. '/report.json'
    vim.fn.writefile(vim.split(CHILD, '\n'), script)
    vim.fn.mkdir(dir .. '/project/.git', 'p')
    local env = { PATH = dir .. '/empty-path' } -- an empty directory: no planwire, no CLI
    vim.fn.mkdir(env.PATH, 'p')
    local r = vim.system({ vim.v.progpath, '-u', 'NONE', '-i', 'NONE', '-l', script, root, out, dir .. '/project', dir .. '/planwire.db' },
      { env = env, text = true, timeout = 180000 }):wait()
    assert.equals(0, r.code, (r.stdout or '') .. (r.stderr or ''))
    local report = vim.json.decode(table.concat(vim.fn.readfile(out), '\n'))
    local bin = root .. '/target/release/planwire'
    assert.equals('', report.on_path)
    assert.same({ bin, '--stdio' }, report.cmd)
    assert.truthy(report.why:find('built in the plugin root ' .. root, 1, true), report.why)
    assert.is_nil(report.create_error)
    assert.same({ bin, '--stdio' }, report.server_cmd)
    assert.equals('planned', report.status, vim.inspect(report.notes))
    assert.truthy(report.health:find('OK ' .. bin .. ': planwire', 1, true), report.health)
    assert.truthy(report.health:find('uses it because it is built in the plugin root ' .. root, 1, true), report.health)
  end)
end)
