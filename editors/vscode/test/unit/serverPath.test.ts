import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bundledServer, chooseServer, type ServerLookup } from '../../src/pure/serverPath';

const bundled = bundledServer('/ext/planwire-0.1.0', 'linux');

function lookup(files: string[], path: Record<string, string>, setting = ''): ServerLookup {
  return { setting, bundled, executable: (p) => (files.includes(p) ? p : undefined), onPath: (n) => path[n], home: '/home/me' };
}

test('the bundled binary sits in the extension\'s bin folder', () => {
  assert.equal(bundled, '/ext/planwire-0.1.0/bin/planwire');
  assert.equal(bundledServer('C:\\ext\\pw\\', 'win32'), 'C:\\ext\\pw\\bin\\planwire.exe');
});

test('planwire.serverPath wins when set, then the bundled binary, then PATH', () => {
  const all = lookup([bundled, '/opt/pw'], { planwire: '/usr/bin/planwire' }, '/opt/pw');
  assert.deepEqual(chooseServer(all), { found: true, command: '/opt/pw', source: 'setting' });
  assert.deepEqual(chooseServer({ ...all, setting: '' }), { found: true, command: bundled, source: 'bundled' });
  assert.deepEqual(chooseServer(lookup([], { planwire: '/usr/bin/planwire' })), { found: true, command: '/usr/bin/planwire', source: 'path' });
  // A bare name in the setting is looked up on PATH; ~ is the home directory.
  assert.deepEqual(chooseServer(lookup([bundled], { 'planwire-dev': '/usr/local/bin/planwire-dev' }, 'planwire-dev')), { found: true, command: '/usr/local/bin/planwire-dev', source: 'setting' });
  assert.deepEqual(chooseServer(lookup(['/home/me/bin/planwire'], {}, '~/bin/planwire')), { found: true, command: '/home/me/bin/planwire', source: 'setting' });
});

test('a setting that names nothing is an error, not a silent fallback; nothing at all says what was tried', () => {
  assert.deepEqual(chooseServer(lookup([bundled], { planwire: '/usr/bin/planwire' }, '/nope/planwire')), { found: false, tried: ['/nope/planwire'], source: 'setting' });
  assert.deepEqual(chooseServer(lookup([], {})), { found: false, tried: [bundled, 'planwire on PATH'], source: 'path' });
  // Whitespace only counts as unset.
  assert.equal(chooseServer(lookup([bundled], {}, '  ')).found, true);
});
