// Builds a platform-specific .vsix that carries the release `planwire` binary in bin/, as
// rust-analyzer ships its server: `vsce package --target <target>`. The extension starts that
// binary unless planwire.serverPath is set.
//
// Usage: npm run vsix -- [--target linux-x64] [--bin path/to/planwire] [--out file.vsix]
//   --target  a vsce target (default: this machine's). The binary is built with
//             `cargo build --release -p planwire --target <rust triple>` when that Rust target is
//             installed (`rustup target add …`); otherwise the script says so and stops.
//   --bin     package this binary instead of building one (it must be built for --target).
//   --out     default planwire-<target>.vsix
//   --skip-build  package dist/ as it is (already built by `npm run build`)

import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPO = resolve(HERE, '../..');

/** vsce target → Rust target triple and the binary's file name. */
const TARGETS = {
  'linux-x64': 'x86_64-unknown-linux-gnu',
  'linux-arm64': 'aarch64-unknown-linux-gnu',
  'linux-armhf': 'armv7-unknown-linux-gnueabihf',
  'alpine-x64': 'x86_64-unknown-linux-musl',
  'alpine-arm64': 'aarch64-unknown-linux-musl',
  'darwin-x64': 'x86_64-apple-darwin',
  'darwin-arm64': 'aarch64-apple-darwin',
  'win32-x64': 'x86_64-pc-windows-msvc',
  'win32-arm64': 'aarch64-pc-windows-msvc',
};

function hostTarget() {
  const arch = { x64: 'x64', arm64: 'arm64', arm: 'armhf' }[process.arch];
  return `${process.platform}-${arch}`;
}

function run(cmd, args, opts = {}) {
  console.log(`$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.status !== 0) throw new Error(`${cmd} failed (exit ${r.status ?? r.signal})`);
  return r;
}

function hostTriple() {
  const r = spawnSync('rustc', ['-vV'], { encoding: 'utf8' });
  return /^host: (.+)$/m.exec(r.stdout ?? '')?.[1]?.trim();
}

/** Builds the release binary for this Rust triple and returns its path. */
function buildBinary(triple, exe) {
  const host = hostTriple();
  if (triple === host) {
    run('cargo', ['build', '--release', '-p', 'planwire'], { cwd: REPO });
    return join(REPO, 'target', 'release', exe);
  }
  const installed = spawnSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).stdout ?? '';
  if (!installed.split('\n').includes(triple)) {
    throw new Error(`the Rust target ${triple} is not installed (rustup target add ${triple}); or pass --bin with a binary built for it`);
  }
  run('cargo', ['build', '--release', '-p', 'planwire', '--target', triple], { cwd: REPO });
  return join(REPO, 'target', triple, 'release', exe);
}

function main(argv) {
  let target = hostTarget();
  let bin = '';
  let out = '';
  let build = true;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--target') target = argv[++i];
    else if (argv[i] === '--skip-build') build = false;
    else if (argv[i] === '--bin') bin = resolve(argv[++i]);
    else if (argv[i] === '--out') out = resolve(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  const triple = TARGETS[target];
  if (!triple) throw new Error(`unknown target ${target}; one of ${Object.keys(TARGETS).join(', ')}`);
  const exe = target.startsWith('win32') ? 'planwire.exe' : 'planwire';
  bin ||= buildBinary(triple, exe);
  if (!existsSync(bin)) throw new Error(`no binary at ${bin}`);
  out ||= join(HERE, `planwire-${target}.vsix`);

  const dest = join(HERE, 'bin');
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest);
  copyFileSync(bin, join(dest, exe));
  chmodSync(join(dest, exe), 0o755);
  try {
    if (build) run('npm', ['run', 'build'], { cwd: HERE });
    run(join(HERE, 'node_modules', '.bin', 'vsce'), ['package', '--target', target, '--no-dependencies', '--allow-missing-repository', '--skip-license', '--out', out], { cwd: HERE });
  } finally {
    rmSync(dest, { recursive: true, force: true });
  }
  console.log(`built ${out} (${target}, server ${bin})`);
}

try {
  main(process.argv.slice(2));
} catch (e) {
  console.error(`vsix: ${e.message}`);
  process.exit(1);
}
