// Runs the compiled unit tests with node:test and ends with the line "N passed, N failed".
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'out', 'test', 'unit');
const files = readdirSync(dir).filter((f) => f.endsWith('.test.js')).map((f) => join(dir, f));
const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', '--test-reporter-destination=' + join(dir, 'results.tap'), ...files], { stdio: ['ignore', 'inherit', 'inherit'] });
const { readFileSync } = await import('node:fs');
const tap = readFileSync(join(dir, 'results.tap'), 'utf8');
const pass = Number(/^# pass (\d+)/m.exec(tap)?.[1] ?? 0);
const fail = Number(/^# fail (\d+)/m.exec(tap)?.[1] ?? 0) + Number(/^# cancelled (\d+)/m.exec(tap)?.[1] ?? 0);
const failed = fail || (r.status !== 0 && pass === 0 ? 1 : 0);
console.log(`${pass} passed, ${failed} failed`);
process.exit(failed || r.status ? 1 : 0);
