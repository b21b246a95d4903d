--- planwire: Neovim client of the planwire sidecar (`planwire --stdio`).
--- This module holds the configuration only; the rest loads on first use.
local M = {}

--- Defaults of `require('planwire').setup()`.
M.defaults = {
  --- Command that starts the server; nil: the plugin's own build
  --- (`<plugin root>/target/release/planwire`, what a plugin manager's build hook
  --- `cargo build --release -p planwire` makes), else `planwire` on PATH. See M.server_cmd().
  cmd = nil,
  --- SQLite file of tickets; nil lets the server choose ($XDG_DATA_HOME/planwire/planwire.db).
  db_path = nil,
  --- Planner for new tickets (`claude`, `opencode`, `codex`, `script`); nil: the server's default.
  tool = nil,
  --- Model for new tickets; nil: the planner's default.
  model = nil,
  --- Extra `initializationOptions` (camelCase, e.g. `{ stopGraceMs = 1000 }`).
  init_options = {},
  --- Ask open questions at once when the server reports one (else notify and wait for `:Planwire answer`).
  ask_on_question = false,
}

M.config = vim.deepcopy(M.defaults)

--- Configures the plugin. Optional; may be called before or after plugin/planwire.lua is sourced.
--- @param opts table?
function M.setup(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('planwire.setup: expected a table, got ' .. type(opts), 2)
  end
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  if opts.cmd ~= nil then
    M.config.cmd = opts.cmd -- lists replace, never merge
  end
  if M.config.cmd ~= nil and (type(M.config.cmd) ~= 'table' or type(M.config.cmd[1]) ~= 'string') then
    error("planwire.setup: cmd must be a list such as { 'planwire', '--stdio' }", 2)
  end
  M._define_command()
  return M
end

--- This plugin's directory (the one with `lua/planwire/`).
M.plugin_dir = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')

--- The directories a plugin manager's build hook may have built the server in: the plugin
--- directory, and the planwire repository it belongs to (a plugin manager clones the whole
--- repository and puts `editors/nvim` on the runtimepath).
function M.plugin_roots()
  local roots = { M.plugin_dir }
  local repo = vim.fn.fnamemodify(M.plugin_dir, ':h:h')
  if vim.fn.filereadable(repo .. '/Cargo.toml') == 1 and vim.fn.isdirectory(repo .. '/server') == 1 then
    table.insert(roots, repo)
  end
  return roots
end

--- The command that starts the server, and why that one: `setup({ cmd })` when given, else
--- `<plugin root>/target/release/planwire` when it was built, else `planwire` on PATH.
--- @return string[] cmd, string why
function M.server_cmd()
  if M.config.cmd then
    return M.config.cmd, 'set by setup({ cmd })'
  end
  for _, root in ipairs(M.plugin_roots()) do
    local bin = root .. '/target/release/planwire'
    if vim.fn.executable(bin) == 1 then
      return { bin, '--stdio' }, 'built in the plugin root ' .. root .. ' (cargo build --release -p planwire)'
    end
  end
  local path = vim.fn.exepath('planwire')
  if path ~= '' then
    return { path, '--stdio' }, 'found on PATH'
  end
  return { 'planwire', '--stdio' }, 'not built in the plugin root and not on PATH'
end

--- For 'statusline' (`%{v:lua.require'planwire'.statusline()}`): "planwire: 2 need input"
--- while tickets wait for an answer, else "". Cheap, and never starts the server.
function M.statusline()
  local client = package.loaded['planwire.client']
  local n = client and client.needs_input() or 0
  if n == 0 then
    return ''
  end
  return ('planwire: %d need%s input'):format(n, n == 1 and 's' or '')
end

--- Defines :Planwire and the autocmds of planwire:// buffers. Idempotent and cheap.
function M._define_command()
  if vim.g.planwire_command_defined == 1 then
    return
  end
  vim.g.planwire_command_defined = 1
  vim.api.nvim_create_user_command('Planwire', function(cmd)
    require('planwire.commands').run(cmd)
  end, {
    nargs = '*',
    bang = true,
    desc = 'planwire: plan tickets with a coding agent',
    complete = function(arglead, cmdline, pos)
      return require('planwire.commands').complete(arglead, cmdline, pos)
    end,
  })
  local group = vim.api.nvim_create_augroup('planwire', { clear = true })
  -- each planwire:// buffer kind: its pattern, the module that reads it, and its function
  for _, reader in ipairs({
    { 'planwire://ticket/*', 'planwire.transcript', 'on_read' },
    { 'planwire://run/*', 'planwire.transcript', 'on_read_run' },
    { 'planwire://edit/*', 'planwire.edit', 'on_read_edit' },
    { 'planwire://plan/*', 'planwire.plans', 'on_read' },
    { 'planwire://memory*', 'planwire.memory', 'on_read' },
    { 'planwire://tickets*', 'planwire.tickets', 'on_read' },
  }) do
    vim.api.nvim_create_autocmd('BufReadCmd', {
      group = group,
      pattern = reader[1],
      callback = function(ev)
        require(reader[2])[reader[3]](ev.buf, ev.match)
      end,
    })
  end
end

return M
