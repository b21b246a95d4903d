-- The plan as a living document, from Neovim: editing a ticket (`:Planwire edit`, `:Planwire
-- set`, refused while a run is active), its branch (at creation too), plan versions and their
-- diff, requested changes (`:Planwire feedback`), export into the repository, and hand-off to a
-- CLI in a terminal; each run's timing and the ticket's usage.
local H = require('helpers')
local api = vim.api

local restore
local function stub(inputs, picks)
  local calls
  restore, calls = H.stub_ui(inputs, picks)
  return calls
end

local function pick_where(pred)
  return function(items)
    for _, item in ipairs(items) do
      if pred(item) then
        return item
      end
    end
  end
end

local plan = H.plan

local function server_ticket(id)
  return H.request('planwire/getTicket', { ticketId = id })
end

local function wait_buffer(what, pattern)
  return H.wait(what, function()
    local b = api.nvim_get_current_buf()
    return api.nvim_buf_get_name(b):match(pattern) and b
  end, nil, function()
    return api.nvim_buf_get_name(0)
  end)
end

local function notified_since(mark, pattern)
  for i = mark + 1, #_G.planwire_test_notifications do
    if tostring(_G.planwire_test_notifications[i].msg):find(pattern) then
      return _G.planwire_test_notifications[i]
    end
  end
end

describe('editing a ticket', function()
  before_each(function()
    H.fresh()
  end)
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  it(':Planwire edit: title and description in a markdown buffer, :w updates the ticket', function()
    local t = H.create_ticket('Change the greeting', 'Say hi.')
    local tbuf = plan(t.id)
    vim.cmd('Planwire edit')
    local buf = wait_buffer('the edit buffer', '^planwire://edit/' .. t.id .. '$')
    H.wait('the ticket in it', function()
      return H.lines(buf)[1] == '# Change the greeting'
    end)
    assert.same({ '# Change the greeting', '', 'Say hi.' }, H.lines(buf))
    assert.equals('acwrite', vim.bo[buf].buftype)
    assert.equals('markdown', vim.bo[buf].filetype)
    assert.is_false(vim.bo[buf].modified)
    api.nvim_buf_set_lines(buf, 0, -1, false, { '# Change the greeting twice', '', 'Say "Hi there!".', '', 'Add a test.' })
    vim.cmd('write')
    assert.is_false(vim.bo[buf].modified)
    local got = server_ticket(t.id)
    assert.equals('Change the greeting twice', got.ticket.title)
    assert.equals('Say "Hi there!".\n\nAdd a test.', got.ticket.description)
    local edit = got.messages[#got.messages]
    assert.equals('edit', edit.kind)
    assert.truthy(edit.text:find('Title: Change the greeting → Change the greeting twice', 1, true), edit.text)
    -- the transcript follows (planwire/ticketChanged)
    H.wait('the new title in the transcript', function()
      return H.lines(tbuf)[1] == '# Change the greeting twice'
    end, nil, function()
      return H.text(tbuf)
    end)
    -- a change made elsewhere shows in the buffer while nothing in it is unsaved
    vim.cmd('Planwire set title Renamed by set')
    H.wait('the edit buffer following the ticket', function()
      return H.lines(buf)[1] == '# Renamed by set'
    end, nil, function()
      return H.text(buf)
    end)
    assert.is_false(vim.bo[buf].modified)
    -- a title left empty is refused here, and nothing is sent
    api.nvim_buf_set_lines(buf, 0, -1, false, { '#', '', 'Only a description.' })
    vim.cmd('write')
    assert.is_true(vim.bo[buf].modified)
    assert.equals('Renamed by set', server_ticket(t.id).ticket.title)
  end)

  it('is refused while the ticket is being planned, with what to do, and keeps what was written', function()
    local t = H.create_ticket('Slow one', 'x', 'slow')
    vim.cmd('Planwire plan ' .. t.id)
    H.wait_status(t.id, 'planning')
    local mark = #_G.planwire_test_notifications
    vim.cmd('Planwire edit ' .. t.id)
    local buf = wait_buffer('the edit buffer', '^planwire://edit/')
    H.wait('the ticket in it', function()
      return H.lines(buf)[1] == '# Slow one'
    end)
    H.wait('the warning that :w will be refused', function()
      return notified_since(mark, 'ticket ' .. t.id .. ' is being planned: :w is refused')
    end)
    api.nvim_buf_set_lines(buf, 0, 1, false, { '# Renamed while planning' })
    mark = #_G.planwire_test_notifications
    vim.cmd('write')
    local n = notified_since(mark, 'is being planned, so')
    assert.is_table(n)
    assert.truthy(n.msg:find(':Planwire stop ' .. t.id, 1, true), n.msg)
    assert.equals(vim.log.levels.ERROR, n.level)
    assert.is_true(vim.bo[buf].modified)
    assert.equals('# Renamed while planning', H.lines(buf)[1])
    assert.equals('Slow one', server_ticket(t.id).ticket.title)
    -- :Planwire set is refused the same way
    mark = #_G.planwire_test_notifications
    vim.cmd('Planwire set ' .. t.id .. ' branch feature/x')
    H.wait('the refusal of set', function()
      return notified_since(mark, 'is being planned, so its branch cannot be changed')
    end)
    assert.is_nil(server_ticket(t.id).ticket.branch)
    H.request('planwire/stop', { ticketId = t.id })
    H.wait_status(t.id, 'stopped')
    vim.cmd('write') -- once the run ended, the same buffer goes through
    assert.is_false(vim.bo[buf].modified)
    assert.equals('Renamed while planning', server_ticket(t.id).ticket.title)
  end)

  it(':Planwire set sets tool, model, variant and branch (asking when no value); the branch shows everywhere', function()
    H.git_branches(H.project, { 'greeting' })
    local t = H.create_ticket('Branch me', 'x')
    local tbuf = require('planwire.transcript').open(t.id)
    vim.cmd('Planwire set branch greeting')
    H.wait('the branch on the server', function()
      return H.ticket(t.id).branch == 'greeting'
    end)
    assert.equals('greeting', server_ticket(t.id).ticket.branch)
    H.wait('the branch in the transcript head', function()
      return H.lines(tbuf)[2]:find(' · branch greeting', 1, true)
    end, nil, function()
      return H.text(tbuf)
    end)
    vim.cmd('Planwire tickets')
    local list = api.nvim_get_current_buf()
    local row, line = H.wait('the branch in the tickets list', function()
      local r, l = H.row_of(list, '^#' .. t.id .. ' ')
      return r and l:find(' · branch greeting', 1, true) and r, l
    end, nil, function()
      return H.text(list)
    end)
    line = H.lines(list)[row]
    local col = line:find('branch greeting', 1, true) - 1
    assert.is_true(vim.tbl_contains(vim.tbl_map(function(h)
      return h.col == col and h.group or nil
    end, H.highlights(list, require('planwire.tickets').ns, row)), 'Special'), line)

    -- no value: asked with vim.ui.input (the current value offered), an empty answer clears
    api.nvim_win_set_cursor(0, { row, 0 })
    local calls = stub({ 'high', '' })
    vim.cmd('Planwire set variant')
    H.wait('the variant', function()
      return H.ticket(t.id).variant == 'high'
    end)
    vim.cmd('Planwire set branch')
    H.wait('the branch cleared', function()
      return H.ticket(t.id).branch == nil
    end)
    assert.equals('greeting', calls.input[2].default)
    restore()
    -- a new tool drops the model of the old one; ! clears a field
    calls = stub({}, { pick_where(function(tool)
      return tool == 'script'
    end) })
    vim.cmd('Planwire set ' .. t.id .. ' tool')
    H.wait('the tool picked, and set', function()
      return #calls.select == 1 and H.notified('ticket ' .. t.id .. ': tool set to script')
    end)
    assert.is_true(vim.tbl_contains(calls.select[1].items, 'script'))
    vim.cmd('Planwire set ' .. t.id .. ' tool claude')
    H.wait('the tool', function()
      return H.ticket(t.id).tool == 'claude'
    end)
    assert.is_nil(server_ticket(t.id).ticket.model)
    vim.cmd('Planwire set ' .. t.id .. ' model slow')
    H.wait('the model', function()
      return H.ticket(t.id).model == 'slow'
    end)
    vim.cmd('Planwire set ' .. t.id .. ' tool script')
    H.wait('tool and model', function()
      local got = server_ticket(t.id).ticket
      return got.tool == 'script' and got.model == nil and got
    end, nil, function()
      return vim.inspect(server_ticket(t.id).ticket)
    end)
    vim.cmd('Planwire set! ' .. t.id .. ' variant')
    H.wait('the variant cleared', function()
      return H.ticket(t.id).variant == nil
    end)
    assert.same({ 'branch', 'model', 'title', 'tool', 'variant' },
      vim.fn.sort(vim.fn.getcompletion('Planwire set ', 'cmdline')))
    assert.is_true(vim.tbl_contains(vim.fn.getcompletion('Planwire set tool ', 'cmdline'), 'script'))
  end)

  it('a new ticket gets its branch (and planner) with :Planwire set before :w', function()
    H.git_branches(H.project, { 'feature/greet' })
    stub({ 'Ticket with a branch' })
    vim.cmd('Planwire new')
    local buf = wait_buffer('the description buffer', '^planwire://new/')
    vim.cmd('Planwire set branch feature/greet')
    vim.cmd('Planwire set variant fast')
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'Greet on start.' })
    vim.cmd('write')
    local tbuf = wait_buffer('the transcript', '^planwire://ticket/%d+$')
    local id = tonumber(api.nvim_buf_get_name(tbuf):match('(%d+)$'))
    local got = server_ticket(id).ticket
    assert.equals('feature/greet', got.branch)
    assert.equals('fast', got.variant)
    assert.equals('script', got.tool) -- setup()'s
    assert.equals('demo', got.model)
    H.wait('the branch in the head', function()
      return (H.lines(tbuf)[2] or ''):find('branch feature/greet', 1, true)
    end, nil, function()
      return H.text(tbuf)
    end)
  end)
end)

describe('plan versions', function()
  local first, second
  before_each(function()
    H.fresh()
    first = H.claude_script('first', { title = 'First plan', criteria = { 'it greets' } })
    second = H.claude_script('second', { title = 'Second plan', criteria = { 'it greets', 'a test checks it' } })
  end)
  after_each(function()
    if restore then
      restore()
      restore = nil
    end
    H.stop_servers()
  end)

  --- A ticket planned twice (version 1 by `first`, version 2 by `second`).
  local function two_versions()
    local t = H.create_ticket('Versions', 'x', first)
    plan(t.id)
    H.request('planwire/updateTicket', { ticketId = t.id, model = second })
    local buf = plan(t.id)
    H.wait('version 2', function()
      return H.ticket(t.id).planVersion == 2
    end)
    H.wait('plan v2 in the head', function()
      return H.lines(buf)[2]:find(' · plan v2', 1, true)
    end, nil, function()
      return H.text(buf)
    end)
    return t
  end

  it(':Planwire versions opens any version; :Planwire diff shows two side by side in diff mode', function()
    local t = two_versions()
    local calls = stub({}, { pick_where(function(p)
      return p.version == 1
    end) })
    vim.cmd('Planwire versions')
    local v1 = wait_buffer('version 1', '^planwire://plan/' .. t.id .. '/v1$')
    assert.equals('# First plan', H.lines(v1)[1])
    assert.is_false(vim.bo[v1].modifiable)
    assert.equals('markdown', vim.bo[v1].filetype)
    local items = calls.select[1].items
    assert.same({ 2, 1 }, { items[1].version, items[2].version }) -- newest first
    local format = calls.select[1].opts.format_item
    assert.truthy(format(items[1]):match('^v2 · %d+%-%d+%-%d+ %d+:%d+ UTC · run %d+ · Second plan %(latest%)$'), format(items[1]))

    local tabs = #api.nvim_list_tabpages()
    vim.cmd('Planwire diff')
    H.wait('a new tab page with the diff', function()
      return #api.nvim_list_tabpages() == tabs + 1
    end)
    local wins = api.nvim_tabpage_list_wins(0)
    assert.equals(2, #wins)
    local names = vim.tbl_map(function(w)
      return api.nvim_buf_get_name(api.nvim_win_get_buf(w))
    end, wins)
    assert.same({ 'planwire://plan/' .. t.id .. '/v1', 'planwire://plan/' .. t.id .. '/v2' }, names)
    for _, w in ipairs(wins) do
      assert.is_true(vim.wo[w].diff)
    end
    local right = api.nvim_win_get_buf(wins[2])
    assert.equals('# Second plan', H.lines(right)[1])
    local added = H.row_of(right, 'a test checks it')
    assert.is_number(added, H.text(right))
    api.nvim_set_current_win(wins[2])
    assert.is_true(vim.fn.diff_hlID(added, 1) > 0, 'the line only version 2 has is marked')
    vim.cmd('tabclose')

    -- versions named; an unknown one says so
    vim.cmd('Planwire diff ' .. t.id .. ' 2 1')
    H.wait('the named diff', function()
      return #api.nvim_list_tabpages() == tabs + 1
    end)
    vim.cmd('tabclose')
    local mark = #_G.planwire_test_notifications
    vim.cmd('Planwire diff ' .. t.id .. ' 1 9')
    assert.truthy(notified_since(mark, 'plan version 9 of ticket ' .. t.id .. ' does not exist'))
    assert.equals(tabs, #api.nvim_list_tabpages())
  end)

  it(':Planwire export writes the plan into the repository, asking before it replaces a file', function()
    local t = two_versions()
    local root = vim.uv.fs_realpath(H.project)
    local default = root .. '/.planwire/plans/' .. t.id .. '-versions.md'
    local function accept(o)
      return o.default
    end
    local calls = stub({ accept })
    vim.cmd('Planwire export')
    H.wait('the exported file', function()
      return vim.fn.filereadable(default) == 1
    end)
    local text = table.concat(vim.fn.readfile(default), '\n')
    assert.truthy(text:find('^# Second plan\n'), text)
    assert.truthy(text:find('- [ ] a test checks it', 1, true), text)
    assert.equals(default, calls.input[1].default)
    assert.equals('file', calls.input[1].completion)
    restore()

    -- the file exists: asked first; Cancel keeps it, Overwrite replaces it
    vim.fn.writefile({ 'mine' }, default)
    calls = stub({ accept }, { pick_where(function(c)
      return c == 'Cancel'
    end) })
    local mark = #_G.planwire_test_notifications
    vim.cmd('Planwire export')
    H.wait('the question, cancelled', function()
      return #calls.select == 1 and notified_since(mark, '^planwire: cancelled$')
    end)
    assert.truthy(calls.select[1].opts.prompt:find(default .. ' exists', 1, true), calls.select[1].opts.prompt)
    assert.same({ 'mine' }, vim.fn.readfile(default))
    restore()
    stub({ accept }, { pick_where(function(c)
      return c == 'Overwrite'
    end) })
    vim.cmd('Planwire export')
    H.wait('the file replaced', function()
      return vim.fn.readfile(default)[1] == '# Second plan'
    end)
    restore()

    -- a path relative to the current directory; ! replaces without asking; a version shown
    -- in its buffer is the one exported
    calls = stub({}, {})
    vim.fn.mkdir(H.project .. '/sub', 'p')
    vim.cmd('cd ' .. vim.fn.fnameescape(H.project .. '/sub'))
    vim.cmd('Planwire export plan.md')
    local target = root .. '/sub/plan.md'
    H.wait('plan.md', function()
      return vim.fn.filereadable(target) == 1
    end)
    require('planwire.plans').open_version(t.id, 1)
    vim.cmd('Planwire export! plan.md')
    H.wait('version 1 over it', function()
      return vim.fn.readfile(target)[1] == '# First plan'
    end)
    assert.equals(0, #calls.select)
    vim.cmd('cd ' .. vim.fn.fnameescape(H.project))
  end)

  it(':Planwire feedback asks for changes: :w plans again with them, as a new version', function()
    local t = H.create_ticket('Feedback', 'x', first)
    plan(t.id)
    vim.cmd('Planwire feedback')
    local buf = wait_buffer('the feedback buffer', '^planwire://feedback/' .. t.id .. '$')
    assert.equals('markdown', vim.bo[buf].filetype)
    local mark = #_G.planwire_test_notifications
    vim.cmd('write') -- empty: nothing sent
    assert.truthy(notified_since(mark, 'write the changes you want'))
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'Also add a test that checks the greeting.' })
    vim.cmd('write')
    local tbuf = wait_buffer('the transcript in its place', '^planwire://ticket/' .. t.id .. '$')
    H.wait('the new version', function()
      return H.ticket(t.id).status == 'planned' and H.ticket(t.id).planVersion == 2
    end, nil, function()
      return H.text(tbuf)
    end)
    local got = server_ticket(t.id)
    local feedback = vim.tbl_filter(function(m)
      return m.kind == 'feedback'
    end, got.messages)
    assert.equals(1, #feedback)
    assert.equals('Also add a test that checks the greeting.', feedback[1].text)
    assert.equals(got.runs[1].id, feedback[1].runId)
    H.wait('the feedback buffer gone', function()
      return not api.nvim_buf_is_valid(buf)
    end)
    H.wait('two runs in the transcript', function()
      local n = 0
      for _, l in ipairs(H.lines(tbuf)) do
        n = n + (l:match('^## Run %d+ · completed') and 1 or 0)
      end
      return n == 2
    end, nil, function()
      return H.text(tbuf)
    end)
  end)
end)

describe('the run foot and the ticket\'s usage', function()
  before_each(function()
    H.fresh()
  end)
  after_each(function()
    H.stop_servers()
  end)

  it('each run shows its timing; the ticket shows the usage of all its runs', function()
    local t = H.create_ticket('Costs', 'x')
    local buf = plan(t.id)
    local run = server_ticket(t.id).runs[1]
    local want = ('_took %s · first output after %s · answer after %s_'):format(
      require('planwire.render').duration(run.timing.totalMs),
      require('planwire.render').duration(run.timing.firstOutputMs),
      require('planwire.render').duration(run.timing.firstFinalMs))
    assert.is_number(H.row_of(buf, '^' .. vim.pesc(want) .. '$'), H.text(buf))
    local usage = server_ticket(t.id).usage
    assert.is_true(usage.inputTokens > 0)
    local total = ('_all runs of the ticket: %d in · %d out'):format(usage.inputTokens, usage.outputTokens)
    assert.is_number(H.row_of(buf, '^' .. vim.pesc(total)), H.text(buf))
    -- a second run: the total grows
    vim.cmd('Planwire retry')
    local doubled = ('_all runs of the ticket: %d in · %d out'):format(2 * usage.inputTokens, 2 * usage.outputTokens)
    H.wait('the doubled total', function()
      return H.row_of(buf, '^' .. vim.pesc(doubled))
    end, nil, function()
      return H.text(buf)
    end)
    assert.equals(2, #vim.tbl_filter(function(l)
      return l:match('^_took ') ~= nil
    end, H.lines(buf)))
  end)
end)

describe(':Planwire handoff', function()
  local bin, out, path
  before_each(function()
    bin = H.tempdir('bin')
    out = H.tempdir('handoff') .. '/ran'
    -- a fake claude: its version for detection, else it records how it was run
    vim.fn.writefile({
      '#!/bin/sh',
      'if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi',
      'pwd > "' .. out .. '.cwd"',
      'for a in "$@"; do printf "%s\\n" "$a"; done > "' .. out .. '.tmp" && mv "' .. out .. '.tmp" "' .. out .. '"',
      'echo "fake claude is implementing"',
      'sleep 30',
    }, bin .. '/claude')
    vim.fn.setfperm(bin .. '/claude', 'rwxr-xr-x')
    path = vim.env.PATH
    vim.env.PATH = bin .. ':' .. path -- the server, started next, finds it
    H.fresh()
  end)
  after_each(function()
    vim.env.PATH = path
    if restore then
      restore()
      restore = nil
    end
    vim.cmd('stopinsert')
    H.stop_servers()
  end)

  it('runs the CLI the server names in a terminal split in the ticket\'s root, and the ticket says so', function()
    local t = H.create_ticket('Hand me off', 'x')
    local mark = #_G.planwire_test_notifications
    vim.cmd('Planwire handoff claude')
    H.wait('the refusal without a plan', function()
      return notified_since(mark, 'handoff: .*:Planwire plan ' .. t.id .. ' makes one')
    end)
    local tbuf = plan(t.id)
    local wins = #api.nvim_tabpage_list_wins(0)
    vim.cmd('Planwire handoff claude')
    local term = H.wait('a terminal window', function()
      local b = api.nvim_get_current_buf()
      return vim.bo[b].buftype == 'terminal' and b
    end)
    assert.equals(wins + 1, #api.nvim_tabpage_list_wins(0))
    H.wait('the CLI ran', function()
      return vim.fn.filereadable(out) == 1
    end)
    local argv = vim.fn.readfile(out)
    local root = vim.uv.fs_realpath(H.project)
    assert.equals(root, vim.fn.readfile(out .. '.cwd')[1])
    local result = require('planwire.plans').last_handoff.result
    assert.same(vim.list_slice(result.argv, 2), argv)
    assert.equals(bin .. '/claude', result.argv[1])
    assert.is_true(vim.tbl_contains(argv, '--add-dir'))
    assert.truthy(argv[#argv]:find('Implement the plan in the file ' .. result.planPath, 1, true), argv[#argv])
    assert.equals(1, vim.fn.filereadable(result.planPath))
    H.wait('its output in the terminal', function()
      return H.text(term):find('fake claude is implementing', 1, true)
    end, nil, function()
      return H.text(term)
    end)
    H.wait('the hand-off in the transcript head', function()
      return H.text(tbuf):find('\n_handed off to claude · ', 1, true)
    end, nil, function()
      return H.text(tbuf)
    end)
    assert.equals('claude', server_ticket(t.id).ticket.handedOffTool)
  end)

  it('without a tool, a ticket planned by the script planner picks among the CLIs found', function()
    local t = H.create_ticket('Pick one', 'x')
    plan(t.id)
    vim.cmd('stopinsert')
    local calls = stub({}, { pick_where(function(tool)
      return tool == 'claude'
    end) })
    vim.cmd('Planwire handoff')
    H.wait('the CLI ran', function()
      return vim.fn.filereadable(out) == 1
    end)
    assert.same({ 'claude' }, calls.select[1].items)
    assert.equals('claude', server_ticket(t.id).ticket.handedOffTool)
  end)
end)
