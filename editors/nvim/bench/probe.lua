-- Responsiveness probe, a second process: `nvim -l probe.lua SOCKET OUT STOPFILE`.
-- Every 20 ms it sends an RPC request to the measured Neovim and times the round trip, which
-- waits for Neovim's main loop just as a key press does. Stops when STOPFILE exists, then
-- writes the round trips (ms, one a line) to OUT.
local sock, out, stop = arg[1], arg[2], arg[3]
local chan
for _ = 1, 200 do
  local ok, c = pcall(vim.fn.sockconnect, 'pipe', sock, { rpc = true })
  if ok and c > 0 then
    chan = c
    break
  end
  vim.uv.sleep(25)
end
assert(chan, 'cannot connect to ' .. sock)
local rtts = {}
while not vim.uv.fs_stat(stop) do
  local t0 = vim.uv.hrtime()
  local ok = pcall(vim.rpcrequest, chan, 'nvim_eval', '1')
  if not ok then
    break
  end
  table.insert(rtts, ('%.3f'):format((vim.uv.hrtime() - t0) / 1e6))
  vim.uv.sleep(20)
end
vim.fn.writefile(rtts, out)
