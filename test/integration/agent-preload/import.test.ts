/**
 * image-preload against a real containerd: bundles of several archives built here, imported
 * streamed and in parallel; bad archives (corrupt, truncated, wrong checksum) fail with a
 * diagnosis naming them and leave none of their images behind.
 */
import { describe, expect, it } from 'vitest';
import { mkdir, readFile, rm, truncate, writeFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import imagePreload from '../../../agent/guards/image-preload.js';
import { apiImageNames, apiVersion } from '../../../agent/preload/containerd-api.js';
import { listImages } from '../../../agent/preload/containerd.js';
import { TestContainerd, buildArchive, buildBundle, makeContext, containerdPerTest, testSettings } from './harness.js';

let dir: string;
let containerd: TestContainerd;

containerdPerTest((d, c) => {
  dir = d;
  containerd = c;
});

const MiB = 1 << 20;

describe('image-preload guard: import', () => {
  it('imports every archive of a bundle, then skips them all on the next pass', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [
      { name: 'rancher-images.tar.zst', images: [{ ref: 'docker.io/rancher/a:v1', size: 3 * MiB }, { ref: 'docker.io/rancher/b:v1', size: 1 * MiB, kind: 'text' }], checksum: true },
      { name: 'harvester-images.tar.zst', images: [{ ref: 'docker.io/rancher/harvester:v1.5.0', size: 4 * MiB, kind: 'random' }] },
      { name: 'rke2-images.linux-amd64.tar.zst', images: [{ ref: 'docker.io/rancher/rke2-runtime:v1.31', size: 2 * MiB }], section: 'rke2', checksum: true },
      { name: 'plain.tar', images: [{ ref: 'registry.example.com/ns/plain:2', size: 512 * 1024 }] },
    ]);
    const t = makeContext(testSettings(containerd, bundle, { parallelism: 2 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r).toEqual({ status: 'ok', detail: expect.stringMatching(/^4 archives: 4 imported \(.*\); 5 listed images present$/) });
    expect(await containerd.images()).toEqual([
      'docker.io/rancher/a:v1',
      'docker.io/rancher/b:v1',
      'docker.io/rancher/harvester:v1.5.0',
      'docker.io/rancher/rke2-runtime:v1.31',
      'registry.example.com/ns/plain:2',
    ]);
    // Progress per archive reached `hvagent status`, and each import was logged with its checksum state.
    expect(t.progress.some((p) => /archive \d\/4 rancher-images\.tar\.zst: .* of /.test(p))).toBe(true);
    // Never more imports at once than `parallelism` (each running import is one "archive n/4" entry).
    expect(Math.max(...t.progress.map((p) => (p.match(/archive \d\/4 /g) ?? []).length))).toBeLessThanOrEqual(2);
    const imported = t.logLines().filter((l) => l.msg === 'archive imported');
    expect(imported.map((l) => l.archive).sort()).toEqual([
      'harvester/images/harvester-images.tar.zst',
      'harvester/images/plain.tar',
      'harvester/images/rancher-images.tar.zst',
      'harvester/images/rke2-images.linux-amd64.tar.zst',
    ]);
    expect(imported.find((l) => l.archive === 'harvester/images/rancher-images.tar.zst')?.verified).toBe(true);

    // The next pass asks containerd once, over its API: no ctr run (each costs seconds of CPU on a booting node).
    const calls = path.join(dir, 'ctr-calls');
    const ctrLogged = path.join(dir, 'ctr-logged');
    await writeFile(ctrLogged, `#!/bin/sh\necho "$*" >> '${calls}'\nexec ctr "$@"\n`, { mode: 0o755 });
    const again = makeContext(testSettings(containerd, bundle, { ctr: ctrLogged }));
    expect(await imagePreload.reconcile(again.ctx)).toEqual({ status: 'ok', detail: '4 archives: 0 imported, 4 skipped (images present); 5 listed images present' });
    expect(again.logLines().filter((l) => l.msg === 'archive skipped: images present')).toHaveLength(4);
    expect(await readFile(calls, 'utf8').catch(() => '')).toBe('');
  });

  it('lists over containerd\'s API the names `ctr images ls -q` lists, namespace by namespace', async () => {
    const one = path.join(dir, 'one.tar');
    const two = path.join(dir, 'two.tar');
    await buildArchive(one, [{ ref: 'docker.io/rancher/a:v1', size: 4096 }, { ref: 'registry.example.com:5000/ns/b@sha256:' + 'b'.repeat(64), size: 4096 }]);
    await buildArchive(two, [{ ref: 'docker.io/library/c:latest', size: 4096 }]);
    await execa('ctr', ['-a', containerd.socket, '-n', 'k8s.io', 'images', 'import', '--no-unpack', one]);
    await execa('ctr', ['-a', containerd.socket, '-n', 'other', 'images', 'import', '--no-unpack', two]);
    for (const namespace of ['k8s.io', 'other', 'empty']) {
      const ctrSays = (await execa('ctr', ['-a', containerd.socket, '-n', namespace, 'images', 'ls', '-q'])).stdout.split('\n').filter(Boolean).sort();
      // ctr lists the digest-named entries import made too; the API client returns every name.
      expect((await apiImageNames(containerd.socket, { namespace, connectTimeoutMs: 5_000, timeoutMs: 30_000 })).sort()).toEqual(ctrSays);
    }
    expect([...(await listImages({ ctr: 'false', socket: containerd.socket, namespace: 'k8s.io' }))].sort()).toEqual(['docker.io/rancher/a:v1', 'registry.example.com:5000/ns/b@sha256:' + 'b'.repeat(64)]);
    expect(await apiVersion(containerd.socket, { connectTimeoutMs: 5_000, timeoutMs: 30_000 })).toBe((await execa('ctr', ['-a', containerd.socket, 'version'])).stdout.match(/Server:\s+Version:\s+(\S+)/)![1]);
  });

  it('imports only the archive whose images are missing', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [
      { name: 'one.tar.zst', images: [{ ref: 'docker.io/hv/one:1', size: MiB }] },
      { name: 'two.tar.zst', images: [{ ref: 'docker.io/hv/two:1', size: MiB }, { ref: 'docker.io/hv/three:1', size: MiB }] },
    ]);
    // Import `one` by hand first, as a previous boot would have.
    const { execa } = await import('execa');
    await execa('sh', ['-c', `zstd -dc ${bundle}/harvester/images/one.tar.zst | ctr -a ${containerd.socket} -n k8s.io images import --no-unpack -`]);
    const t = makeContext(testSettings(containerd, bundle));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r).toEqual({ status: 'ok', detail: '2 archives: 1 imported (1.0 MiB), 1 skipped (images present); 3 listed images present' });
    expect(t.logLines().find((l) => l.msg === 'archive skipped: images present')).toMatchObject({ archive: 'harvester/images/one.tar.zst', reason: 'all 1 listed images present' });
    expect(await containerd.images()).toEqual(['docker.io/hv/one:1', 'docker.io/hv/three:1', 'docker.io/hv/two:1']);
  });

  it('fails on a corrupt archive, naming it and its missing images, imports the others, and recovers once the archive is replaced', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [
      { name: 'good.tar.zst', images: [{ ref: 'docker.io/hv/good:1', size: 2 * MiB }] },
      { name: 'bad.tar.zst', images: [{ ref: 'docker.io/hv/bad:1', size: 2 * MiB }, { ref: 'docker.io/hv/bad2:1', size: 1 * MiB }] },
    ]);
    const badPath = path.join(bundle, 'harvester/images/bad.tar.zst');
    const good = await readFile(badPath);
    const corrupt = Buffer.from(good);
    for (let i = 0; i < 4096; i++) corrupt[Math.floor(corrupt.length / 2) + i] ^= 0x5a;
    await writeFile(badPath, corrupt);

    const t = makeContext(testSettings(containerd, bundle, { attempts: 2 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r.status).toBe('fail');
    if (r.status !== 'fail') throw new Error('unreachable');
    expect(r.diagnosis).toContain('1 of 2 archives failed to import:');
    expect(r.diagnosis).toMatch(/harvester\/images\/bad\.tar\.zst: cannot decompress \(corrupt or truncated\): .*\[after 2 attempts\]/);
    expect(r.diagnosis).toContain('2 of 3 listed images missing in containerd:');
    expect(r.diagnosis).toContain('docker.io/hv/bad:1 (from harvester/images/bad.tar.zst)');
    expect(r.diagnosis).toContain('docker.io/hv/bad2:1 (from harvester/images/bad.tar.zst)');
    expect(r.hint).toMatch(/re-copy the bundle/);
    expect(await containerd.images()).toEqual(['docker.io/hv/good:1']);

    await writeFile(badPath, good);
    const fixed = makeContext(testSettings(containerd, bundle));
    expect(await imagePreload.reconcile(fixed.ctx)).toMatchObject({ status: 'ok' });
    expect(await containerd.images()).toEqual(['docker.io/hv/bad2:1', 'docker.io/hv/bad:1', 'docker.io/hv/good:1']);
  });

  it('fails on a truncated archive', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'cut.tar.zst', images: [{ ref: 'docker.io/hv/cut:1', size: 3 * MiB }] }]);
    const p = path.join(bundle, 'harvester/images/cut.tar.zst');
    await truncate(p, Math.floor((await stat(p)).size / 2));
    const t = makeContext(testSettings(containerd, bundle, { attempts: 1 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r).toMatchObject({ status: 'fail', diagnosis: expect.stringMatching(/cut\.tar\.zst: cannot decompress \(corrupt or truncated\)/) });
    expect(r.status === 'fail' && r.diagnosis).toContain('docker.io/hv/cut:1 (from harvester/images/cut.tar.zst)');
    expect(await containerd.images()).toEqual([]);
  });

  it('fails on a checksum mismatch without creating any of the archive\'s images, even though the archive itself is a valid one', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'swapped.tar.zst', images: [{ ref: 'docker.io/hv/swapped:1', size: 2 * MiB }], checksum: true }]);
    // Replace the archive with another valid one: decompression and ctr would both succeed.
    await buildArchive(path.join(bundle, 'harvester/images/swapped.tar.zst'), [{ ref: 'docker.io/hv/swapped:1', size: 2 * MiB }]);
    const t = makeContext(testSettings(containerd, bundle, { attempts: 2 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r.status).toBe('fail');
    if (r.status !== 'fail') throw new Error('unreachable');
    expect(r.diagnosis).toMatch(/swapped\.tar\.zst: checksum mismatch: the bundle says sha256 [0-9a-f]{64}, the .* read hash to [0-9a-f]{64} \[after 2 attempts\]/);
    // ctr never saw the end of the tar, so nothing was created (and nothing had to be rolled back).
    expect(r.diagnosis).not.toContain('removed again');
    expect(await containerd.images()).toEqual([]);
    expect(r.hint).toMatch(/damaged/);
  });

  it.each([
    ['api', /short\.tar: the archive's tar is not valid: the tar ends inside an entry \(\d+ bytes missing\): the archive is cut short \[after 1 attempt\]/],
    ['ctr', /short\.tar: the tar ends early \(truncated archive\): ctr: failed to ingest .*unexpected EOF \[after 1 attempt\]/],
  ])('fails on an uncompressed tar that was cut short (importer %s)', async (importer, diagnosis) => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'short.tar', images: [{ ref: 'docker.io/hv/short:1', size: 3 * MiB }] }]);
    const p = path.join(bundle, 'harvester/images/short.tar');
    await truncate(p, 2 * MiB + 1000);
    const t = makeContext(testSettings(containerd, bundle, { attempts: 1, importer }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r).toMatchObject({ status: 'fail', diagnosis: expect.stringMatching(diagnosis) });
    expect(await containerd.images()).toEqual([]);
  });

  it('reports an archive that cannot be read as a read failure worth retrying, with the reader\'s complaint', async () => {
    // Without a checksum zstd reads the archive itself and says "Read error"; with one, cat does.
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'unreadable.tar.zst', images: [{ ref: 'docker.io/hv/unreadable:1', size: MiB }] }]);
    const p = path.join(bundle, 'harvester/images/unreadable.tar.zst');
    // A directory where the archive should be: cat fails as on an I/O error.
    await rm(p);
    await mkdir(p);
    const t = makeContext(testSettings(containerd, bundle, { attempts: 1 }));
    const r = await imagePreload.reconcile(t.ctx);
    expect(r.status).toBe('retry');
    expect(r.status === 'retry' && r.reason).toMatch(/unreadable\.tar\.zst: reading the archive failed: .*(Is a directory|Read error).* \[after 1 attempt\]/);
    expect(await containerd.images()).toEqual([]);
  });

  it('unpacks into the snapshotter during the import when asked (unpack: true)', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [{ name: 'unpacked.tar.zst', images: [{ ref: 'docker.io/hv/unpacked:1', size: MiB }], checksum: true }]);
    const t = makeContext(testSettings(containerd, bundle, { unpack: true }));
    expect(await imagePreload.reconcile(t.ctx)).toMatchObject({ status: 'ok' });
    expect(await containerd.images()).toEqual(['docker.io/hv/unpacked:1']);
    const { execa } = await import('execa');
    const snapshots = await execa('ctr', ['-a', containerd.socket, '-n', 'k8s.io', 'snapshots', 'ls']);
    expect(snapshots.stdout.trim().split('\n').length).toBeGreaterThan(1);
  });
});
