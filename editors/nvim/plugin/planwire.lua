-- planwire: plan tickets with a coding agent, from Neovim.
-- Only defines :Planwire and the planwire:// buffer handler; the server starts on first use.
if vim.g.loaded_planwire == 1 then
  return
end
vim.g.loaded_planwire = 1

require('planwire')._define_command()
