// Which `planwire` binary the extension starts: `planwire.serverPath` when it is set, else the
// binary bundled in a platform-specific .vsix (`bin/planwire`), else `planwire` on PATH.
// Pure (no vscode import, no file system): the caller passes how to look, so it is unit-tested.

export type ServerSource = 'setting' | 'bundled' | 'path';

export type ServerChoice =
  | { found: true; command: string; source: ServerSource }
  /** `tried`: what was looked for, in order, for the message to the person. */
  | { found: false; tried: string[]; source: ServerSource };

export interface ServerLookup {
  /** `planwire.serverPath`, as configured ('' when unset). */
  setting: string;
  /** Where a platform-specific .vsix puts the binary. */
  bundled: string;
  /** An absolute or relative path as it is, if it names an executable file. */
  executable(path: string): string | undefined;
  /** A bare name on PATH. */
  onPath(name: string): string | undefined;
  home?: string;
}

export function bundledServer(extensionPath: string, platform: string): string {
  const sep = platform === 'win32' ? '\\' : '/';
  return `${extensionPath.replace(/[\\/]+$/, '')}${sep}bin${sep}planwire${platform === 'win32' ? '.exe' : ''}`;
}

function expandHome(p: string, home: string | undefined): string {
  return home && (p === '~' || p.startsWith('~/')) ? home + p.slice(1) : p;
}

export function chooseServer(l: ServerLookup): ServerChoice {
  const setting = expandHome(l.setting.trim(), l.home);
  if (setting) {
    // Set by the person: that one, or a clear error (never a different binary in its place).
    const isPath = setting.includes('/') || setting.includes('\\');
    const command = isPath ? l.executable(setting) : l.onPath(setting);
    return command ? { found: true, command, source: 'setting' } : { found: false, tried: [setting], source: 'setting' };
  }
  const bundled = l.executable(l.bundled);
  if (bundled) return { found: true, command: bundled, source: 'bundled' };
  const onPath = l.onPath('planwire');
  if (onPath) return { found: true, command: onPath, source: 'path' };
  return { found: false, tried: [l.bundled, 'planwire on PATH'], source: 'path' };
}
