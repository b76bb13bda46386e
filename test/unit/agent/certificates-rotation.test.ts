/**
 * The rotate's effects: the record (read back, a broken one reported and never thrown) and the
 * command's outcome (exit 0, a failure with its last line, a binary that is not there).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadRotationRecord, rotateCertificates, ROTATION_RECORD_PATH, saveRotationRecord } from '../../../agent/certs/rotation.js';
import type { RotationRecord } from '../../../agent/certs/plan.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));
const root = (p: string) => path.join(dir, p);

function script(body: string): string {
  const f = path.join(dir, 'rke2');
  writeFileSync(f, `#!/bin/sh\n${body}\n`);
  chmodSync(f, 0o755);
  return f;
}

describe('rotation record and command', () => {
  it('a saved record reads back; none is no record and no problem; a broken one is a problem', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hv-rot-'));
    expect(await loadRotationRecord(root)).toEqual({});
    const rec: RotationRecord = { version: 1, at: '2027-06-01T12:00:00.000Z', outcome: 'rotated', detail: 'done', expired: [{ path: '/a.crt', notAfter: '2027-05-01T00:00:00.000Z' }] };
    await saveRotationRecord(root, rec);
    expect(await loadRotationRecord(root)).toEqual({ record: rec });
    writeFileSync(root(ROTATION_RECORD_PATH), '{"version":1,"outcome":"maybe"}');
    expect(await loadRotationRecord(root)).toEqual({ problem: `${ROTATION_RECORD_PATH}: not a version 1 rotation record` });
    writeFileSync(root(ROTATION_RECORD_PATH), '{');
    expect((await loadRotationRecord(root)).problem).toMatch(/ is not JSON: /);
  });

  it('runs `certificate rotate --data-dir DIR`; exit 0 is rotated with the last line', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hv-rot-'));
    mkdirSync(root('out'));
    const bin = script(`echo "$@" > ${root('out/args')}\necho 'level=info msg="Server certificates rotated"'`);
    const out = await rotateCertificates({ binary: bin, dataDir: '/var/lib/rancher/rke2', timeoutMs: 10_000 });
    expect(out).toEqual({ outcome: 'rotated', detail: 'level=info msg="Server certificates rotated"' });
    expect(readFileSync(root('out/args'), 'utf8')).toBe('certificate rotate --data-dir /var/lib/rancher/rke2\n');
  });

  it('a non-zero exit or a missing binary is failed, with what it said', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hv-rot-'));
    const bin = script(`echo 'level=fatal msg="no such service"' >&2\nexit 3`);
    const out = await rotateCertificates({ binary: bin, dataDir: '/d', timeoutMs: 10_000 });
    expect(out.outcome).toBe('failed');
    expect(out.detail).toMatch(/ exited 3: level=fatal msg="no such service"$/);
    const missing = await rotateCertificates({ binary: root('no-rke2'), dataDir: '/d', timeoutMs: 10_000 });
    expect(missing.outcome).toBe('failed');
    expect(missing.detail).toContain('no-rke2');
  });
});
