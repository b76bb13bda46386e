import { describe, expect, it } from 'vitest';
import { chmod, mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HvError } from '../../../lib/errors.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { GuardContext } from '../../../agent/guard.js';
import imagePreload from '../../../agent/guards/image-preload.js';
import { defaultPreloadSettings, resolvePreloadSettings } from '../../../agent/preload/settings.js';
import { renderStandaloneConfig } from '../../../agent/preload/standalone-containerd.js';
import { failWith, fakeContainerdApi, replyWith } from './fake-containerd-api.js';

function ctxWith(settings: Record<string, unknown>, root: string): GuardContext {
  return {
    root: (p) => path.join(root, p),
    log: new Logger(new MemorySink()),
    signal: new AbortController().signal,
    settings,
    progress: () => undefined,
    now: Date.now,
  };
}

describe('resolvePreloadSettings', () => {
  it('has sane defaults for RKE2', () => {
    const s = resolvePreloadSettings({});
    expect(s).toEqual(defaultPreloadSettings());
    expect(s).toMatchObject({
      containerdSocket: '/run/k3s/containerd/containerd.sock',
      bundleDirs: ['/var/lib/rancher/hvagent/bundle', '/run/initramfs/live/bundle'],
      namespace: 'k8s.io',
      parallelism: 3,
      stallTimeoutMs: 120_000,
      attempts: 3,
      unpack: false,
      importer: 'api',
      startContainerd: 'auto',
      containerdUnit: 'containerd.service',
      containerdRoot: '/var/lib/rancher/rke2/agent/containerd',
      containerdState: '/run/k3s/containerd',
    });
  });

  it('reads durations, counts and paths, and ignores other guards\' common settings', () => {
    const s = resolvePreloadSettings({
      containerdSocket: '/run/c.sock',
      bundleDir: '/mnt/iso/bundle',
      parallelism: '3',
      stallTimeout: '45s',
      finishTimeout: '5m',
      retryDelay: 500,
      attempts: 5,
      sections: ['common'],
      unpack: 'true',
      importer: 'ctr',
      containerdUnit: 'rke2-containerd.service',
      rke2Binary: '/opt/rke2/bin/rke2',
      deadline: '2h',
    });
    expect(s).toMatchObject({ containerdSocket: '/run/c.sock', bundleDirs: ['/mnt/iso/bundle'], parallelism: 3, stallTimeoutMs: 45_000, finishTimeoutMs: 300_000, retryDelayMs: 500, retryMaxDelayMs: 30_000, attempts: 5, sections: ['common'], unpack: true, importer: 'ctr', containerdUnit: 'rke2-containerd.service' });
  });

  it.each([
    [{ parallelism: 0 }, 'image-preload setting parallelism: must be a whole number from 1 to 16, got 0'],
    [{ stallTimeout: 'soon' }, 'image-preload setting stallTimeout: invalid duration "soon"'],
    [{ stallTimeout: '10ms' }, 'image-preload setting stallTimeout: must be at least 100ms'],
    [{ sections: [] }, 'image-preload setting sections: must be a non-empty list of metadata.yaml sections (common, rke2, agent)'],
    [{ startContainerd: 'yes' }, 'image-preload setting startContainerd: must be auto or never, got "yes"'],
    [{ importer: 'fast' }, 'image-preload setting importer: must be api or ctr, got "fast"'],
    [{ containerdUnit: ' ' }, 'image-preload setting containerdUnit: must be a non-empty string, got " "'],
    [{ stalTimeout: '1s' }, 'image-preload setting stalTimeout: unknown setting'],
    [{ required: 'maybe' }, 'image-preload setting required: must be true or false, got "maybe"'],
  ])('rejects %j', (raw, message) => {
    let err: unknown;
    try {
      resolvePreloadSettings(raw);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HvError);
    expect((err as HvError).message).toBe(message);
  });
});

describe('image-preload guard (no containerd needed)', () => {
  it('implements the Guard contract', () => {
    expect(imagePreload).toMatchObject({ name: 'image-preload', dependsOn: [] });
    expect(imagePreload.deadlineMs).toBeGreaterThan(0);
  });

  it('skips when there is no bundle, or fails when one is required', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'hvpl-unit-'));
    try {
      expect(await imagePreload.reconcile(ctxWith({}, root))).toEqual({
        status: 'skip',
        reason: `no image bundle at ${root}/var/lib/rancher/hvagent/bundle or ${root}/run/initramfs/live/bundle: RKE2 will pull or import images itself`,
      });
      expect(await imagePreload.reconcile(ctxWith({ required: true, bundleDir: '/iso/bundle' }, root))).toEqual({
        status: 'fail',
        diagnosis: `no image bundle at ${root}/iso/bundle`,
        hint: 'set guards.image-preload.bundleDir to the bundle/ directory of the ISO',
      });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('fails with the setting named when a setting is invalid', async () => {
    expect(await imagePreload.reconcile(ctxWith({ parallelism: -1 }, '/nonexistent'))).toEqual({
      status: 'fail',
      diagnosis: 'image-preload setting parallelism: must be a whole number from 1 to 16, got -1',
      hint: undefined,
    });
  });

  it('fails naming the file when the bundle is malformed, before touching containerd', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'hvpl-unit-'));
    try {
      await mkdir(path.join(root, 'b'), { recursive: true });
      await writeFile(path.join(root, 'b/metadata.yaml'), 'images:\n  common:\n    - {archive: x.zip}\n');
      const r = await imagePreload.reconcile(ctxWith({ bundleDir: '/b', startContainerd: 'never', containerdSocket: '/none.sock' }, root));
      expect(r).toEqual({
        status: 'fail',
        diagnosis: `archive x.zip is neither .tar.zst nor .tar (${root}/b/metadata.yaml: images.common[0].archive)`,
        hint: 'image archives are `docker save` tars, optionally zstd-compressed',
      });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('returns retry, with the reason, when containerd never answers', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'hvpl-unit-'));
    try {
      await mkdir(path.join(root, 'b'), { recursive: true });
      await writeFile(path.join(root, 'b/metadata.yaml'), 'images: {}\n');
      const r = await imagePreload.reconcile(ctxWith({ bundleDir: '/b', startContainerd: 'never', containerdSocket: '/none.sock', containerdWait: '300ms', ctr: 'false' }, root));
      expect(r.status).toBe('retry');
      expect(r.status === 'retry' && r.reason).toMatch(new RegExp(`^waiting for containerd: gave up after \\d+ s: containerd at ${root}/none\\.sock does not answer`));
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('returns retry when listing the images fails mid-pass (containerd going away)', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'hvpl-unit-'));
    try {
      await mkdir(path.join(root, 'b'), { recursive: true });
      await writeFile(path.join(root, 'b/a.tar'), 'x');
      await writeFile(path.join(root, 'b/metadata.yaml'), 'images:\n  common:\n    - {archive: a.tar}\n');
      // Test double for ctr: `images ls` fails as when containerd just died.
      const fakeCtr = path.join(root, 'fake-ctr-test-double');
      await writeFile(fakeCtr, '#!/bin/sh\ncase "$*" in *version*) exit 0;; *) echo "ctr: connection refused" >&2; exit 1;; esac\n');
      await chmod(fakeCtr, 0o755);
      // containerd's API on its socket: its version answers, its image list says it is shutting down.
      await fakeContainerdApi(path.join(root, 'c.sock'), (stream, p) =>
        (p.endsWith('/Version') ? replyWith(Buffer.from([0x0a, 4, ...Buffer.from('v1.7')])) : failWith(14, 'transport is closing'))(stream, p),
      );
      // An absolute ctr path is a node path: under the root.
      const r = await imagePreload.reconcile(ctxWith({ bundleDir: '/b', startContainerd: 'never', containerdSocket: '/c.sock', containerdWait: '2s', ctr: '/fake-ctr-test-double' }, root));
      expect(r.status).toBe('retry');
      expect(r.status === 'retry' && r.reason).toMatch(
        /^exited with status 1: .*fake-ctr-test-double .* images ls -q\n\s+ctr: connection refused \(ctr asked because the image list over the API failed: containerd's API at .*c\.sock \(\/containerd\.services\.images\.v1\.Images\/List\): gRPC status 14: transport is closing\)$/,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('renders a private containerd config on RKE2\'s root, state and socket, CRI off', () => {
    expect(renderStandaloneConfig({ root: '/var/lib/rancher/rke2/agent/containerd', state: '/run/k3s/containerd', socket: '/run/k3s/containerd/containerd.sock' })).toBe(
      [
        'version = 2',
        'root = "/var/lib/rancher/rke2/agent/containerd"',
        'state = "/run/k3s/containerd"',
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        '  address = "/run/k3s/containerd/containerd.sock"',
        '[ttrpc]',
        '  address = "/run/k3s/containerd/containerd.sock.ttrpc"',
        '[debug]',
        '  address = ""',
        '[metrics]',
        '  address = ""',
        '',
      ].join('\n'),
    );
  });
});
