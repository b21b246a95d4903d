-- The OS sandbox as the plugin shows it: each run's `sandbox` in its heading (a warning when it
-- is not enforced), the run's `warning` event, a read-only violation as an error in the run's
-- foot, and the session's state in :checkhealth. The server decides the state: `sandbox = "off"`
-- and the test-only PLANWIRE_TEST_NO_LANDLOCK=1 give the other two.
local H = require('helpers')
local api = vim.api

local function ns()
  return require('planwire.transcript').ns
end

local plan = H.plan

local function heading(buf)
  local row, line = H.row_of(buf, '^## Run %d+ · ')
  assert.is_number(row, H.text(buf))
  return row, line
end

--- The groups of row `row` that start at the byte column of `word` in it.
local function groups_at(buf, row, word)
  local col = H.lines(buf)[row]:find(word, 1, true) - 1
  local out = {}
  for _, h in ipairs(H.highlights(buf, ns(), row)) do
    if h.col == col then
      table.insert(out, h.group)
    end
  end
  return out
end

local function checkhealth()
  vim.cmd('silent checkhealth planwire')
  local text = H.text(api.nvim_get_current_buf())
  vim.cmd('bwipeout!')
  return text
end

describe('the sandbox', function()
  after_each(function()
    vim.env.PLANWIRE_TEST_NO_LANDLOCK = nil
    H.stop_servers()
  end)

  it('with sandbox "off", the run heading warns and the warning event is shown prominently', function()
    H.fresh({ init_options = { sandbox = 'off', stopGraceMs = 1000 } })
    local t = H.create_ticket('Unsandboxed', 'x')
    local buf = plan(t.id)
    local row, line = heading(buf)
    assert.truthy(line:match('^## Run %d+ · completed · ⚠ sandbox off$'), line)
    assert.is_true(vim.tbl_contains(groups_at(buf, row, '⚠ sandbox off'), 'DiagnosticWarn'), vim.inspect(H.highlights(buf, ns(), row)))
    local wrow, wline = H.row_of(buf, '^⚠ %*%*warning%*%*: ')
    assert.is_number(wrow, H.text(buf))
    assert.truthy(wline:find('without the OS sandbox', 1, true), wline)
    assert.truthy(wline:find('"off"', 1, true), wline)
    assert.is_true(wrow > row, 'the warning comes in its run')
    assert.is_true(vim.tbl_contains(groups_at(buf, wrow, '⚠'), 'DiagnosticWarn'))
    assert.same({}, H.duplicates(H.lines(buf)))
    -- :checkhealth says so, with what to do
    local text = checkhealth()
    assert.truthy(text:find('WARNING sandbox: off', 1, true), text)
    assert.truthy(text:find('"auto"', 1, true), text)
  end)

  it('without Landlock (auto), runs say "unavailable" and :checkhealth warns', function()
    vim.env.PLANWIRE_TEST_NO_LANDLOCK = '1' -- the server inherits it when it starts
    H.fresh()
    local t = H.create_ticket('No Landlock', 'x')
    local buf = plan(t.id)
    assert.equals('unavailable', require('planwire.client').server_capabilities().sandbox)
    local row, line = heading(buf)
    assert.truthy(line:match(' · ⚠ sandbox unavailable$'), line)
    assert.is_true(vim.tbl_contains(groups_at(buf, row, '⚠ sandbox'), 'DiagnosticWarn'))
    assert.truthy(H.row_of(buf, '^⚠ %*%*warning%*%*: .*Landlock'), H.text(buf))
    local text = checkhealth()
    assert.truthy(text:find('WARNING sandbox: unavailable', 1, true), text)
    assert.truthy(text:find('sandbox = "required"', 1, true), text)
  end)

  it('a session with the sandbox shows its state on each run, without a warning when enforced', function()
    H.fresh()
    local t = H.create_ticket('Sandboxed', 'x')
    local buf = plan(t.id)
    local state = require('planwire.client').server_capabilities().sandbox
    local row, line = heading(buf)
    local run = H.request('planwire/getTicket', { ticketId = t.id }).runs[1]
    assert.equals(state, run.sandbox)
    local text = checkhealth()
    if state == 'enforced' then
      assert.truthy(line:match('^## Run %d+ · completed · sandbox enforced$'), line)
      for _, h in ipairs(H.highlights(buf, ns(), row)) do
        assert.are_not.equals('DiagnosticWarn', h.group)
      end
      assert.is_nil(H.row_of(buf, '%*%*warning%*%*'), H.text(buf))
      assert.truthy(text:find('OK sandbox: enforced', 1, true), text)
    else
      assert.truthy(line:find('⚠ sandbox ' .. state, 1, true), line)
      assert.truthy(text:find('WARNING sandbox: ' .. state, 1, true), text)
    end
  end)

  it('a run that changed files in the work tree shows them as an error, and the plan is kept', function()
    H.fresh({ init_options = { sandbox = 'off', stopGraceMs = 1000 } })
    local root = vim.uv.fs_realpath(H.project)
    H.git_init(root)
    local planted = root .. '/planted.txt'
    -- the planner's process group writes a file into the repository (nothing stops it: "off")
    local script = H.claude_script('writes', {
      title = 'Plan of a writer',
      before = { { spawn = { 'sh', '-c', 'echo planted > "$0"', planted } }, { awaitFile = planted } },
    })
    local t = H.create_ticket('Writer', 'x', script)
    local buf = plan(t.id)
    local run = H.request('planwire/getTicket', { ticketId = t.id }).runs[1]
    assert.same({ planted }, run.readonlyViolation.paths)
    local hrow = H.row_of(buf, '^%*%*Planning changed files in the work tree%*%*')
    assert.is_number(hrow, H.text(buf))
    local prow, pline = H.row_of(buf, '^%- `' .. vim.pesc(planted) .. '`$')
    assert.is_number(prow, H.text(buf))
    assert.equals(hrow + 1, prow)
    for _, r in ipairs({ hrow, prow }) do
      assert.is_true(vim.tbl_contains(vim.tbl_map(function(h)
        return h.group
      end, H.highlights(buf, ns(), r)), 'DiagnosticError'), pline)
    end
    -- the foot comes after the run's events (the error event among them), before the plan
    local erow = H.row_of(buf, '^%*%*error%*%* %(unknown%): Planning changed files')
    assert.is_number(erow, H.text(buf))
    assert.is_true(erow < hrow and hrow < H.row_of(buf, '^# Plan: Plan of a writer$'), H.text(buf))
    assert.same({}, H.duplicates(H.lines(buf)))
  end)
end)
