local H = require('helpers')

describe('setup', function()
  after_each(function()
    H.stop_servers()
  end)

  it('plugin/ defines :Planwire and starts nothing', function()
    H.stop_servers()
    H.unload()
    vim.g.loaded_planwire = nil
    vim.g.planwire_command_defined = nil
    pcall(vim.api.nvim_del_user_command, 'Planwire')
    vim.cmd('runtime plugin/planwire.lua')
    assert.equals(2, vim.fn.exists(':Planwire'))
    assert.same({}, vim.lsp.get_clients({ name = 'planwire' }))
    -- only the tiny config module is loaded at startup
    assert.is_nil(package.loaded['planwire.client'])
    assert.is_nil(package.loaded['planwire.transcript'])
  end)

  it('setup() with no arguments has sane defaults, before or after plugin/', function()
    H.unload()
    vim.g.loaded_planwire = nil
    vim.g.planwire_command_defined = nil
    pcall(vim.api.nvim_del_user_command, 'Planwire')
    local planwire = require('planwire').setup()
    assert.is_nil(planwire.config.cmd) -- the plugin's own build, else PATH (13_install_spec.lua)
    assert.equals('--stdio', planwire.server_cmd()[2])
    assert.is_nil(planwire.config.db_path)
    assert.equals(2, vim.fn.exists(':Planwire'))
    vim.cmd('runtime plugin/planwire.lua') -- sourced after setup(): nothing breaks
    assert.equals(2, vim.fn.exists(':Planwire'))
    planwire.setup({ cmd = { 'x', '--stdio' }, model = 'm' })
    assert.same({ 'x', '--stdio' }, planwire.config.cmd)
    local cmd, why = planwire.server_cmd() -- an explicit cmd wins over any build
    assert.same({ 'x', '--stdio' }, cmd)
    assert.equals('set by setup({ cmd })', why)
    assert.equals('m', planwire.config.model)
  end)

  it('completes subcommands and ticket ids', function()
    H.fresh()
    local subs = vim.fn.getcompletion('Planwire ', 'cmdline')
    for _, s in ipairs({ 'new', 'plan', 'stop', 'retry', 'answer', 'tickets', 'transcript', 'status', 'delete',
      'breakdown', 'link', 'unlink', 'links', 'memory', 'edit', 'set', 'feedback', 'versions', 'diff', 'export',
      'handoff' }) do
      assert.is_true(vim.tbl_contains(subs, s), s .. ' missing from ' .. vim.inspect(subs))
    end
    assert.same({ 'plan' }, vim.fn.getcompletion('Planwire pl', 'cmdline'))
    local t = H.create_ticket('Completion', '')
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire plan ', 'cmdline'), tostring(t.id)))
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire delete ', 'cmdline'), tostring(t.id)))
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire delete! ', 'cmdline'), tostring(t.id)))
    assert.same({ 'breakdown' }, vim.fn.getcompletion('Planwire br', 'cmdline'))
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire edit ', 'cmdline'), tostring(t.id)))
    assert.same({ 'claude', 'codex', 'opencode' }, vim.fn.sort(vim.fn.getcompletion('Planwire handoff ', 'cmdline')))
    assert.same({ 'link', 'links' }, vim.fn.getcompletion('Planwire link', 'cmdline'))
    assert.same({}, vim.fn.getcompletion('Planwire breakdown ', 'cmdline'))
  end)

  it('starts the server on the first command that needs it, with dbPath', function()
    H.fresh()
    assert.same({}, vim.lsp.get_clients({ name = 'planwire' }))
    vim.cmd('Planwire status')
    local commands = require('planwire.commands')
    H.wait('status result', function()
      return commands.last_status
    end)
    local clients = vim.lsp.get_clients({ name = 'planwire' })
    assert.equals(1, #clients)
    assert.equals('planwire', clients[1].server_info.name)
    assert.equals(H.project, clients[1].root_dir)
    assert.equals(H.db, commands.last_status.store.path)
    local caps = require('planwire.client').server_capabilities()
    assert.equals(1, caps.protocolVersion)
    assert.is_true(#caps.planners > 0)
  end)
end)

describe('doc/planwire.txt', function()
  it('builds help tags for the plugin, its command and its subcommands', function()
    local dir = H.tempdir('doc')
    vim.fn.writefile(vim.fn.readfile(H.plugin_dir .. '/doc/planwire.txt'), dir .. '/planwire.txt')
    vim.cmd('helptags ' .. vim.fn.fnameescape(dir))
    local tags = {}
    for _, line in ipairs(vim.fn.readfile(dir .. '/tags')) do
      tags[line:match('^[^\t]+')] = true
    end
    for _, tag in ipairs({ 'planwire.txt', 'planwire-setup', ':Planwire', ':Planwire-new', ':Planwire-plan',
      ':Planwire-stop', ':Planwire-answer', ':Planwire-tickets', 'planwire-transcript', 'planwire-health',
      ':Planwire-delete', ':Planwire-breakdown', 'planwire-breakdown', ':Planwire-link', ':Planwire-unlink',
      ':Planwire-links', 'planwire-links', ':Planwire-memory', 'planwire-memory', 'planwire-statusline',
      ':Planwire-edit', ':Planwire-set', ':Planwire-feedback', ':Planwire-versions', ':Planwire-diff',
      ':Planwire-export', ':Planwire-handoff', 'planwire-living', 'planwire-sandbox' }) do
      assert.is_true(tags[tag] == true, 'missing tag ' .. tag)
    end
  end)
end)
