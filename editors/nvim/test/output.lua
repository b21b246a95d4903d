-- busted output handler: one line per test on stdout (always starting on a fresh line, since
-- Neovim may print messages without a newline) and a results file that run.sh counts.
return function(options)
  local busted = require('busted')
  local handler = require('busted.outputHandlers.base')()
  local results_path = os.getenv('PLANWIRE_TEST_RESULTS')
  local results = results_path and io.open(results_path, 'a') or nil
  local counter = 0

  local function out(s)
    io.stdout:write('\n' .. s)
    io.stdout:flush()
  end

  local function record(kind, name)
    if results then
      results:write(kind .. ' ' .. name:gsub('\n', ' ') .. '\n')
      results:flush()
    end
  end

  local function message_of(t)
    local m = t.message
    if m == nil then
      return 'nil error'
    elseif type(m) ~= 'string' then
      return require('pl.pretty').write(m)
    end
    return m
  end

  handler.testStart = function(element)
    io.stderr:write('[test] ' .. handler.getFullName(element) .. '\n')
    return nil, true
  end

  handler.testEnd = function(element, parent, status)
    counter = counter + 1
    local name = handler.getFullName(element)
    if status == 'success' then
      out(('ok %d - %s'):format(counter, name))
      record('pass', name)
    elseif status == 'pending' then
      local t = handler.pendings[#handler.pendings]
      out(('ok %d - # SKIP %s: %s'):format(counter, name, t and t.message or ''))
      record('pending', name)
    else
      local t = status == 'failure' and handler.failures[#handler.failures] or handler.errors[#handler.errors]
      out(('not ok %d - %s'):format(counter, name))
      if t then
        local where = t.element and t.element.trace and (t.element.trace.short_src .. ' @ ' .. t.element.trace.currentline) or ''
        out('# ' .. where)
        out('# ' .. message_of(t):gsub('\n', '\n# '))
      end
      record('fail', name)
    end
    return nil, true
  end

  handler.error = function(element, parent, message)
    -- errors outside tests (a spec file that does not load, a failing setup)
    if element and element.descriptor ~= 'it' then
      out('not ok - error in ' .. tostring(element.name or element.descriptor) .. ': ' .. tostring(message))
      record('fail', 'error in ' .. tostring(element.name or element.descriptor))
    end
    return nil, true
  end

  handler.suiteEnd = function()
    out('1..' .. counter .. '\n')
    if results then
      results:close()
    end
    return nil, true
  end

  busted.subscribe({ 'test', 'start' }, handler.testStart, { predicate = handler.cancelOnPending })
  busted.subscribe({ 'test', 'end' }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ 'error' }, handler.error)
  busted.subscribe({ 'failure' }, handler.error)
  busted.subscribe({ 'suite', 'end' }, handler.suiteEnd)
  return handler
end
