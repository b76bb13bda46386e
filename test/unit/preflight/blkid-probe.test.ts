// readSignatures in blkid mode against a test double of blkid on PATH that behaves like the real one
// in low-level probe mode: devices in order, stopping at the first without a signature (status 2) or
// that cannot be opened (error on stderr, status 2).
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Host } from '../../../lib/host.js';
import { readSignatures } from '../../../installer/preflight/signatures.js';

const FAKE_BLKID = `#!/bin/sh
# Test double of blkid -p -o export: /dev/fake-label* have an ext4 label, /dev/fake-empty* have
# nothing, /dev/fake-denied* cannot be opened. Each call is logged.
shift 3
echo "$*" >> "$BLKID_LOG"
for d in "$@"; do
  case "$d" in
    /dev/fake-label*) printf 'DEVNAME=%s\\nLABEL=L-%s\\nTYPE=ext4\\n\\n' "$d" "\${d#/dev/}" ;;
    /dev/fake-empty*) exit 2 ;;
    /dev/fake-denied*) echo "blkid: error: $d: Operation not permitted" >&2; exit 2 ;;
  esac
done
exit 0
`;

let dir = '';
let savedPath = '';
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-blkid-double-'));
  await writeFile(path.join(dir, 'blkid'), FAKE_BLKID);
  await chmod(path.join(dir, 'blkid'), 0o755);
  savedPath = process.env.PATH ?? '';
  process.env.PATH = `${dir}:${savedPath}`;
  process.env.BLKID_LOG = path.join(dir, 'calls.log');
});
afterEach(async () => {
  process.env.PATH = savedPath;
  delete process.env.BLKID_LOG;
  await rm(dir, { recursive: true, force: true });
});

describe('readSignatures with blkid', () => {
  it('probes again after a device without a signature or that cannot be opened, so every device is tried', async () => {
    const targets = ['fake-label1', 'fake-empty1', 'fake-label2', 'fake-denied1', 'fake-empty2', 'fake-label3'].map((n) => ({ path: `/dev/${n}` }));
    const { source, byPath } = await readSignatures(new Host('/'), targets, 'blkid');
    expect(source).toBe('blkid');
    expect(byPath.get('/dev/fake-label1')).toMatchObject({ label: 'L-fake-label1', fsType: 'ext4' });
    expect(byPath.get('/dev/fake-label2')).toMatchObject({ label: 'L-fake-label2' });
    expect(byPath.get('/dev/fake-label3')).toMatchObject({ label: 'L-fake-label3' });
    expect(byPath.get('/dev/fake-empty1')).toMatchObject({ label: undefined, fsType: undefined });
    const { readFile } = await import('node:fs/promises');
    expect((await readFile(process.env.BLKID_LOG!, 'utf8')).trim().split('\n')).toEqual([
      '/dev/fake-label1 /dev/fake-empty1 /dev/fake-label2 /dev/fake-denied1 /dev/fake-empty2 /dev/fake-label3',
      '/dev/fake-label2 /dev/fake-denied1 /dev/fake-empty2 /dev/fake-label3',
      '/dev/fake-empty2 /dev/fake-label3',
      '/dev/fake-label3',
    ]);
  });
});

describe('readSignatures without blkid', () => {
  it('falls back to the udev database instead of failing', async () => {
    process.env.PATH = path.join(dir, 'empty-bin');
    const { source, byPath } = await readSignatures(new Host('/'), [{ path: '/dev/fake-label1' }], 'blkid');
    expect(source).toBe('none');
    expect(byPath.size).toBe(0);
  });
});
