import { describe, expect, it } from 'vitest';
import type { BundleArchive } from '../../../agent/preload/bundle.js';
import { diagnose, formatBytes, isPermanent, summarise, type PreloadOutcome } from '../../../agent/preload/diagnosis.js';
import { findMissing, imagesToRollBack, importOrder, planImports } from '../../../agent/preload/plan.js';
import { classifyExit, ctrImportArgs } from '../../../agent/preload/stream-import.js';
import { StallWatchdog } from '../../../lib/stall-watchdog.js';

function archive(id: string, images: string[], sizeBytes?: number): BundleArchive {
  return { id, section: 'common', archivePath: `/b/${id}`, compression: 'zstd', images, sizeBytes };
}

describe('planImports', () => {
  const a = archive('a.tar.zst', ['docker.io/x/a:1', 'docker.io/x/b:1'], 100);
  const b = archive('b.tar.zst', ['docker.io/x/c:1'], 300);
  const c = archive('c.tar.zst', [], 200);

  it('skips an archive only when every listed image is present', () => {
    const plans = planImports([a, b, c], new Set(['docker.io/x/a:1', 'docker.io/x/c:1']));
    expect(plans.map((p) => [p.archive.id, p.action, p.reason, p.missing])).toEqual([
      ['a.tar.zst', 'import', '1 of 2 listed images missing', ['docker.io/x/b:1']],
      ['b.tar.zst', 'skip', 'all 1 listed images present', []],
      ['c.tar.zst', 'import', 'no image list: cannot tell what it holds', []],
    ]);
  });

  it('orders imports largest first, unknown sizes last', () => {
    const d = archive('d.tar.zst', ['docker.io/x/d:1']);
    expect(importOrder(planImports([d, a, b, c], new Set())).map((x) => x.id)).toEqual(['b.tar.zst', 'c.tar.zst', 'a.tar.zst', 'd.tar.zst']);
  });

  it('orders only what is imported; an empty archive before one of unknown size; equal sizes in bundle order', () => {
    const empty = archive('empty.tar.zst', ['docker.io/x/e:1'], 0);
    const unknown = archive('unknown.tar.zst', ['docker.io/x/u:1']);
    const unknown2 = archive('unknown2.tar.zst', ['docker.io/x/v:1']);
    const twin1 = archive('twin1.tar.zst', ['docker.io/x/t:1'], 100);
    const twin2 = archive('twin2.tar.zst', ['docker.io/x/w:1'], 100);
    const order = importOrder(planImports([unknown, empty, twin1, b, twin2, unknown2], new Set(['docker.io/x/c:1']))).map((x) => x.id);
    expect(order).toEqual(['twin1.tar.zst', 'twin2.tar.zst', 'empty.tar.zst', 'unknown.tar.zst', 'unknown2.tar.zst']);
  });

  it('names each missing image once, with the archive that should bring it', () => {
    const dup = archive('dup.tar.zst', ['docker.io/x/b:1']);
    expect(findMissing([a, dup, b], new Set(['docker.io/x/a:1']))).toEqual([
      { image: 'docker.io/x/b:1', archive: 'a.tar.zst' },
      { image: 'docker.io/x/c:1', archive: 'b.tar.zst' },
    ]);
  });

  it('rolls back only images the failed attempt created and nobody vouches for', () => {
    const failed = archive('f.tar.zst', ['docker.io/x/old:1', 'docker.io/x/new:1', 'docker.io/x/shared:1', 'docker.io/x/absent:1']);
    const before = new Set(['docker.io/x/old:1']);
    const after = new Set(['docker.io/x/old:1', 'docker.io/x/new:1', 'docker.io/x/shared:1']);
    expect(imagesToRollBack(failed, before, after, new Set(['docker.io/x/shared:1']))).toEqual(['docker.io/x/new:1']);
  });
});

describe('diagnosis', () => {
  const base: PreloadOutcome = { bundleDir: '/b', archives: [], missing: [], listedImages: 0 };

  it('summarises a good pass', () => {
    expect(
      summarise({
        ...base,
        listedImages: 7,
        archives: [
          { id: 'a', status: 'imported', attempts: 1, bytes: 3 * 1024 ** 3, durationMs: 1 },
          { id: 'b', status: 'skipped', attempts: 0, bytes: 0, durationMs: 0 },
        ],
      }),
    ).toBe('2 archives: 1 imported (3.00 GiB), 1 skipped (images present); 7 listed images present');
    expect(summarise({ ...base, listedImages: 1, archives: [{ id: 'a', status: 'imported', attempts: 2, bytes: 5 * 1024 ** 2, durationMs: 1 }] })).toBe(
      '1 archive: 1 imported (5.0 MiB); 1 listed image present',
    );
  });

  it('names failed archives with reason and attempts, then the missing images', () => {
    const d = diagnose({
      ...base,
      listedImages: 30,
      archives: [
        { id: 'ok.tar.zst', status: 'imported', attempts: 1, bytes: 1, durationMs: 1 },
        { id: 'bad.tar.zst', status: 'failed', attempts: 3, bytes: 1, durationMs: 1, failure: { kind: 'checksum-mismatch', message: 'checksum mismatch: …' }, rolledBack: ['docker.io/x/p:1'] },
        { id: 'slow.tar.zst', status: 'failed', attempts: 3, bytes: 1, durationMs: 1, failure: { kind: 'stalled', message: 'stalled: no bytes moved for 120 s at 1.2 GiB' } },
      ],
      missing: Array.from({ length: 22 }, (_, i) => ({ image: `docker.io/x/m${i}:1`, archive: i < 2 ? 'bad.tar.zst' : 'slow.tar.zst' })),
    });
    expect(d.diagnosis.split('\n')).toEqual([
      '2 of 3 archives failed to import:',
      '  bad.tar.zst: checksum mismatch: … [after 3 attempts] (removed again, not trusted: docker.io/x/p:1)',
      '  slow.tar.zst: stalled: no bytes moved for 120 s at 1.2 GiB [after 3 attempts]',
      '22 of 30 listed images missing in containerd:',
      ...Array.from({ length: 20 }, (_, i) => `  docker.io/x/m${i}:1 (from ${i < 2 ? 'bad.tar.zst' : 'slow.tar.zst'})`),
      '  … and 2 more',
    ]);
    expect(d.permanent).toBe(true);
    expect(d.hint).toMatch(/^the archive on the medium is damaged: .*; the medium stopped delivering data/);
  });

  it('treats stalls and ctr failures as worth retrying, bad bytes as needing a person', () => {
    expect(['stalled', 'import-failed', 'finish-timeout', 'read-failed', 'containerd-unavailable'].map((k) => isPermanent(k as never))).toEqual([false, false, false, false, false]);
    expect(['checksum-mismatch', 'corrupt', 'images-missing'].map((k) => isPermanent(k as never))).toEqual([true, true, true]);
    const d = diagnose({ ...base, listedImages: 1, archives: [{ id: 'a', status: 'failed', attempts: 1, bytes: 0, durationMs: 0, failure: { kind: 'stalled', message: 's' } }] });
    expect(d.permanent).toBe(false);
  });

  it('a pass with nothing imported says so without a size', () => {
    expect(summarise({ ...base, listedImages: 2, archives: [{ id: 'a', status: 'skipped', attempts: 0, bytes: 0, durationMs: 0 }] })).toBe('1 archive: 0 imported, 1 skipped (images present); 2 listed images present');
  });

  it('missing images without a failed archive: only the missing list, a bundle that is inconsistent', () => {
    const missing = Array.from({ length: 20 }, (_, i) => ({ image: `docker.io/x/m${i}:1`, archive: 'a.tar.zst' }));
    const d = diagnose({ ...base, listedImages: 20, archives: [{ id: 'a.tar.zst', status: 'imported', attempts: 1, bytes: 1, durationMs: 1 }], missing });
    expect(d.diagnosis.split('\n')).toEqual(['20 of 20 listed images missing in containerd:', ...missing.map((m) => `  ${m.image} (from a.tar.zst)`)]);
    expect(d.hint).toMatch(/does not hold every image its list names/);
    expect(d.permanent).toBe(true);
  });

  it('a failed archive alone: no missing list, and the hint of its failure only', () => {
    const d = diagnose({ ...base, listedImages: 3, archives: [{ id: 'a', status: 'failed', attempts: 1, bytes: 0, durationMs: 0, failure: { kind: 'stalled', message: 'stalled' }, rolledBack: ['docker.io/x/p:1', 'docker.io/x/q:1'] }], missing: [] });
    expect(d.diagnosis).toBe('1 of 1 archive failed to import:\n  a: stalled [after 1 attempt] (removed again, not trusted: docker.io/x/p:1, docker.io/x/q:1)');
    expect(d.hint).toMatch(/^the medium stopped delivering data/);
    expect(d.hint).not.toMatch(/does not hold every image/);
  });

  it('a failure of no known kind: "failed", and the missing images name the hint', () => {
    const d = diagnose({ ...base, listedImages: 1, archives: [{ id: 'a', status: 'failed', attempts: 2, bytes: 0, durationMs: 0 }], missing: [{ image: 'docker.io/x/m:1', archive: 'a' }] });
    expect(d.diagnosis.split('\n')[1]).toBe('  a: failed [after 2 attempts]');
    expect(d.hint).toMatch(/does not hold every image its list names/);
    const none = diagnose({ ...base, listedImages: 1, archives: [{ id: 'a', status: 'failed', attempts: 2, bytes: 0, durationMs: 0 }] });
    expect(none.hint).toBe('run `hvagent once --guard image-preload` again');
  });

  it('each failure kind has its own hint, saying what to check', () => {
    const hint = (kind: string): string => diagnose({ ...base, listedImages: 1, archives: [{ id: 'a', status: 'failed', attempts: 1, bytes: 0, durationMs: 0, failure: { kind: kind as never, message: 'm' } }] }).hint;
    expect(hint('corrupt')).toMatch(/cannot be decompressed.*re-copy the bundle/);
    expect(hint('read-failed')).toMatch(/dmesg/);
    expect(hint('import-failed')).toMatch(/ctr failed.*containerd is running/);
    expect(hint('finish-timeout')).toMatch(/did not finish.*disk space/);
    expect(hint('images-missing')).toMatch(/inconsistent/);
    expect(hint('containerd-unavailable')).toMatch(/start containerd/);
    expect(hint('tool-missing')).toMatch(/no zstd/);
  });

  it('formats sizes at the unit boundaries', () => {
    expect([formatBytes(1023), formatBytes(1024), formatBytes(1024 ** 2), formatBytes(10 * 1024 ** 2), formatBytes(1024 ** 3)]).toEqual(['1023 B', '1 KiB', '1.0 MiB', '10 MiB', '1.00 GiB']);
  });

  it('formats sizes', () => {
    expect([formatBytes(10), formatBytes(4096), formatBytes(1.5 * 1024 ** 2), formatBytes(412 * 1024 ** 2), formatBytes(1.25 * 1024 ** 3)]).toEqual([
      '10 B',
      '4 KiB',
      '1.5 MiB',
      '412 MiB',
      '1.25 GiB',
    ]);
  });
});

describe('classifyExit', () => {
  it('maps the import script statuses to failure kinds', () => {
    expect(classifyExit(0, null, '', true)).toBeNull();
    expect(classifyExit(97, null, 'hvagent-preload: reading /b/a failed (cat exited 1)\n', false)).toEqual({
      kind: 'read-failed',
      message: 'reading the archive failed: hvagent-preload: reading /b/a failed (cat exited 1)',
    });
    expect(classifyExit(97, null, 'cat: /b/a: Input/output error\nzstd: unexpected end of file\nhvagent-preload: reading /b/a failed (cat exited 1)\n', false)).toEqual({
      kind: 'read-failed',
      message: 'reading the archive failed: cat: /b/a: Input/output error',
    });
    expect(classifyExit(98, null, 'zstd: /*stdin*\\: unknown header\nhvagent-preload: zstd could not decompress a (exit 1)\n', true)?.kind).toBe('corrupt');
    // zstd complaining about a broken pipe means ctr died first.
    expect(classifyExit(98, null, 'zstd: error 70 : Write error : cannot write block : Broken pipe\n', false)?.kind).toBe('import-failed');
    expect(classifyExit(1, null, 'ctr: failed to ingest "x": unexpected EOF\n', true)?.kind).toBe('corrupt');
    // zstd reading the archive itself: truncated file vs I/O error.
    expect(classifyExit(98, null, 'zstd: /*stdin*\\: Read error (39) : premature end \n', true)?.kind).toBe('corrupt');
    expect(classifyExit(98, null, 'zstd: error 37 : Read error \n', true)?.kind).toBe('read-failed');
    expect(classifyExit(1, null, 'ctr: failed to ingest "x": unexpected EOF\n', false)?.kind).toBe('import-failed');
    expect(classifyExit(null, 'SIGKILL', '', false)).toEqual({ kind: 'import-failed', message: 'the import was killed by SIGKILL' });
    expect(classifyExit(1, null, 'ctr: connection refused\n', false)).toEqual({ kind: 'import-failed', message: 'ctr images import exited with status 1: ctr: connection refused' });
  });

  it('builds the ctr command line', () => {
    const t = { ctr: '/var/lib/rancher/rke2/bin/ctr', socket: '/run/k3s/containerd/containerd.sock', namespace: 'k8s.io' };
    expect(ctrImportArgs(t, false)).toEqual(['/var/lib/rancher/rke2/bin/ctr', '-a', '/run/k3s/containerd/containerd.sock', '-n', 'k8s.io', 'images', 'import', '--no-unpack', '-']);
    expect(ctrImportArgs(t, true)).not.toContain('--no-unpack');
  });
});

describe('StallWatchdog', () => {
  it('fires only after the counter has not moved for the timeout', () => {
    let now = 0;
    const w = new StallWatchdog(1000, () => now);
    w.observe(0);
    now = 900;
    expect(w.stalled()).toBe(false);
    w.observe(10);
    now = 1800;
    expect(w.stalled()).toBe(false);
    w.observe(10);
    now = 1900;
    expect(w.stalled()).toBe(true);
    expect(w.idleMs()).toBe(1000);
    w.reset();
    expect(w.stalled()).toBe(false);
  });

  it('does not care how long a moving import takes', () => {
    let now = 0;
    const w = new StallWatchdog(1000, () => now);
    for (let i = 1; i <= 1000; i++) {
      now += 999;
      w.observe(i);
      expect(w.stalled()).toBe(false);
    }
  });
});
