-- busted --helper: puts the plugin on the runtimepath of this (headless) Neovim.
local plugin_dir = vim.env.PLANWIRE_PLUGIN_DIR or vim.fn.getcwd()
vim.opt.runtimepath:prepend(plugin_dir)
package.path = plugin_dir .. '/test/?.lua;' .. package.path
vim.o.swapfile = false
vim.o.shadafile = 'NONE'

-- Notifications go to a list (and stderr), never into the TAP stream on stdout.
_G.planwire_test_notifications = {}
vim.notify = function(msg, level)
  table.insert(_G.planwire_test_notifications, { msg = msg, level = level })
  io.stderr:write('[notify] ' .. tostring(msg):gsub('\n', '\n         ') .. '\n')
end
