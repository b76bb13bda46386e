import { describe, expect, it } from 'vitest';
import { bindDirName, persistentLocation } from '../../../node/layout.js';
import { newJournal, readJournal, JournalWriter } from '../../../installer/steps/journal.js';
import { readFile, writeFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { testTempDir } from '../temp-dir.js';

describe('persistent layout', () => {
  it("bind directory names follow cos-layout's dashes", () => {
    expect(bindDirName('/var/lib/rancher')).toBe('var-lib-rancher.bind');
    expect(bindDirName('/etc/pki/trust/anchors')).toBe('etc-pki-trust-anchors.bind');
  });
  it('a node path lands under the longest persistent path above it', () => {
    const paths = ['/etc/rancher', '/etc/rancher/rke2', '/var/lib/rancher'];
    expect(persistentLocation('/etc/rancher/rke2/config.yaml', paths)).toBe('.state/etc-rancher-rke2.bind/config.yaml');
    expect(persistentLocation('/etc/rancher/node/x', paths)).toBe('.state/etc-rancher.bind/node/x');
    expect(persistentLocation('/etc/hosts', paths)).toBeUndefined();
    expect(persistentLocation('/etc/ranchers/x', paths)).toBeUndefined();
  });
});

describe('journal', () => {
  it('is written atomically, mode 0644, and read back', async () => {
    const dir = testTempDir('hv-journal-');
    const file = path.join(dir, 'sda.journal.json');
    const w = new JournalWriter(file, newJournal('digest', '/dev/sda', ['guard', 'clear']));
    w.step('clear').status = 'done';
    await w.save();
    expect((await stat(file)).mode & 0o777).toBe(0o644);
    const j = await readJournal(file);
    expect(j?.steps.map((s) => s.status)).toEqual(['pending', 'done']);
    expect(() => w.step('deploy')).toThrow(/no step deploy/);
  });
  it('garbage or a missing file is no journal (a fresh install)', async () => {
    const dir = testTempDir('hv-journal-');
    expect(await readJournal(path.join(dir, 'missing.json'))).toBeUndefined();
    await writeFile(path.join(dir, 'bad.json'), '{"version": 1, "steps": ');
    expect(await readJournal(path.join(dir, 'bad.json'))).toBeUndefined();
    await writeFile(path.join(dir, 'other.json'), JSON.stringify({ version: 2, steps: [] }));
    expect(await readJournal(path.join(dir, 'other.json'))).toBeUndefined();
    expect(await readFile(path.join(dir, 'bad.json'), 'utf8')).toContain('version');
  });
});
