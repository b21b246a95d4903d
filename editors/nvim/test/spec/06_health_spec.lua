local H = require('helpers')

local function checkhealth()
  vim.cmd("silent checkhealth planwire")
  local buf = vim.api.nvim_get_current_buf()
  local text = H.text(buf)
  vim.cmd('bwipeout!')
  return text
end

describe(':checkhealth planwire', function()
  after_each(function()
    H.stop_servers()
  end)

  it('reports Neovim, the binary and its version, the planners and the db path', function()
    H.fresh()
    local text = checkhealth()
    assert.truthy(text:find('OK Neovim 0.11', 1, true), text)
    assert.truthy(text:find('OK ' .. vim.fn.exepath(H.bin), 1, true), text)
    local version = vim.trim(vim.system({ H.bin, '--version' }, { text = true }):wait().stdout)
    assert.is_true(version ~= '')
    assert.truthy(text:find(version, 1, true), text)
    assert.truthy(text:find('uses it because it is set by setup({ cmd })', 1, true), text)
    assert.truthy(text:find('database: ' .. H.db, 1, true), text)
    assert.truthy(text:find('OK script', 1, true), text)
    -- planners that are missing are warnings, not errors, while one is usable
    assert.falsy(text:find('ERROR', 1, true), text)
  end)

  it('says what to do when the binary is missing', function()
    H.fresh({ cmd = { H.tmp_root .. '/no-such-planwire', '--stdio' } })
    local text = checkhealth()
    assert.truthy(text:find('ERROR server binary not found', 1, true), text)
    assert.truthy(text:find('cargo build --release -p planwire', 1, true), text)
    assert.truthy(text:find('cargo install --path server', 1, true), text)
  end)
end)
