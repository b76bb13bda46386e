/**
 * After the preload, the image-preload guard's watch against a real containerd: an image removed
 * as kubelet's image GC would remove it is re-imported from the bundle, and one removed again at
 * once waits for the rate limit instead of churning the disk.
 */
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { execa } from 'execa';
import imagePreload from '../../../agent/guards/image-preload.js';
import { TestContainerd, buildBundle, makeContext, containerdPerTest, testSettings } from './harness.js';

let dir: string;
let containerd: TestContainerd;
const MiB = 1 << 20;

containerdPerTest((d, c) => {
  dir = d;
  containerd = c;
});

async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting until ${what}`);
}

describe('image-preload watch', () => {
  it('re-imports a bundle image kubelet removed, then defers a second re-import to the rate limit', async () => {
    const bundle = path.join(dir, 'bundle');
    await buildBundle(bundle, [
      { name: 'rancher-images.tar.zst', images: [{ ref: 'docker.io/rancher/a:v1', size: MiB }, { ref: 'docker.io/rancher/b:v1', size: MiB }], checksum: true },
      { name: 'rke2-images.tar.zst', images: [{ ref: 'docker.io/rancher/rke2-runtime:v1.31', size: MiB }] },
    ]);
    const t = makeContext({ ...testSettings(containerd, bundle), watchInterval: '100ms', reimportMinInterval: '1h' });
    const data: Array<Record<string, unknown>> = [];
    t.ctx.report = (d) => data.push(d);
    expect((await imagePreload.reconcile(t.ctx)).status).toBe('ok');

    const watching = imagePreload.watch!(t.ctx);
    await until('the watch saw every image', () => t.progress.includes('watching: all 3 bundle images present'));
    // What kubelet's image GC does under disk pressure.
    await execa('ctr', ['-a', containerd.socket, '-n', 'k8s.io', 'images', 'rm', 'docker.io/rancher/a:v1']);
    await until('the image was re-imported', () => t.progress.some((p) => p.startsWith('watching: re-imported 1 bundle images')));
    expect(t.progress).toContain("watching: re-imported 1 bundle images kubelet's image GC had removed (harvester/images/rancher-images.tar.zst)");
    expect(await containerd.images()).toEqual(['docker.io/rancher/a:v1', 'docker.io/rancher/b:v1', 'docker.io/rancher/rke2-runtime:v1.31']);

    await execa('ctr', ['-a', containerd.socket, '-n', 'k8s.io', 'images', 'rm', 'docker.io/rancher/rke2-runtime:v1.31']);
    await until('the second re-import was deferred', () => t.progress.some((p) => p.includes('re-import deferred until')));
    expect(t.progress.find((p) => p.includes('re-import deferred until'))).toMatch(/^watching: 1 bundle images missing \(docker\.io\/rancher\/rke2-runtime:v1\.31\); re-import deferred until .*: the last re-import was \d+ s ago \(at most one every 60 min\)$/);
    expect(await containerd.images()).toEqual(['docker.io/rancher/a:v1', 'docker.io/rancher/b:v1']);
    expect(data.at(-1)).toMatchObject({ watching: true, missing: 1, reimports: 1 });
    expect(t.logLines().some((l) => l.msg === 'bundle images missing (kubelet image GC?): re-importing')).toBe(true);

    t.abort.abort();
    await watching;
  });
});
