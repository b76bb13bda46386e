import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HvError } from '../../../lib/errors.js';
import { InstallLog, type AppendFile } from '../../../installer/steps/install-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempFile(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'hv-install-log-'));
  dirs.push(d);
  return path.join(d, 'sda.install.log');
}
const enospc = (): never => {
  throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
};

describe('InstallLog', () => {
  it('holds lines until it is opened, then writes them and the later ones to the file', () => {
    const file = tempFile();
    const log = new InstallLog();
    log.write('a\n');
    log.open(file, true);
    log.write('b\n');
    expect(readFileSync(file, 'utf8')).toBe('a\nb\n');
    expect(log.text()).toBe('a\nb\n');
    expect(() => log.throwIfFailed()).not.toThrow();
  });

  it('a write that fails does not throw: it keeps the lines in memory and remembers the failure', () => {
    const file = tempFile();
    let calls = 0;
    const failSecond: AppendFile = (f, data) => {
      calls++;
      if (calls >= 2) enospc();
      appendFileSync(f, data);
    };
    const log = new InstallLog(failSecond);
    log.open(file, true);
    log.write('one\n');
    expect(() => log.write('two\n')).not.toThrow();
    log.write('three\n');
    expect(calls).toBe(2); // no retry on every line once it failed
    expect(readFileSync(file, 'utf8')).toBe('one\n');
    expect(log.text()).toBe('one\ntwo\nthree\n');
    expect(log.failure).toBeInstanceOf(HvError);
    expect(log.failure!.message).toContain(file);
    expect(log.failure!.message).toContain('ENOSPC');
    expect(log.failure!.exitCode).toBe(3);
    expect(log.failure!.hint).toMatch(/--state-dir/);
    expect(() => log.throwIfFailed()).toThrow(log.failure!);
  });

  it('a failure while flushing the held lines at open is kept too', () => {
    const file = tempFile();
    const log = new InstallLog(enospc);
    log.write('held\n');
    log.open(file, true);
    expect(log.failure?.message).toContain('cannot write the install log');
    expect(log.text()).toBe('held\n');
  });

  it('on resume it appends to the log of the earlier run', () => {
    const file = tempFile();
    const first = new InstallLog();
    first.open(file, true);
    first.write('run 1\n');
    const second = new InstallLog();
    second.open(file, false);
    second.write('run 2\n');
    expect(readFileSync(file, 'utf8')).toBe('run 1\nrun 2\n');
  });
});
