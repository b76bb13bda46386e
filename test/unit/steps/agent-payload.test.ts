/** The agent step's decisions and its effects on a plain directory standing for COS_PERSISTENT (no root needed). */
import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, readFile, readlink, readdir, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { manifestProblem, payloadDigest, type PayloadManifest } from '../../../node/payload-layout.js';
import { parseLdd } from '../../../agent/payload/build.js';
import { elfMachine } from '../../../node/elf.js';
import { agentPaths, agentSpaceProblem, deployAgent, installedAgentProblem, removeAgent } from '../../../installer/steps/agent-deploy.js';
import { agentForImage, payloadTreeProblems, resolveAgentArg } from '../../../installer/steps/agent-source.js';
import { dirImage, judgeAgentSlot, parseSquashfsListing, readAgentSlotFacts, resolveInImage, type AgentSlotFacts } from '../../../installer/steps/agent-slot.js';
import { DEFAULT_PERSISTENT_STATE_PATHS } from '../../../installer/disk/plan.js';
import { scanTree } from '../../../installer/steps/bundle-copy.js';

const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length) await rm(dirs.pop()!, { recursive: true, force: true });
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'hv-agent-unit-'));
  dirs.push(d);
  return d;
}

const ELF_X86 = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), Buffer.alloc(10), Buffer.from([62, 0]), Buffer.alloc(44)]);
const ELF_ARM = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), Buffer.alloc(10), Buffer.from([183, 0]), Buffer.alloc(44)]);

/** A small payload in the real layout (fake bytes: these tests never run it). */
async function fakePayload(dir: string, marker = 'v1'): Promise<{ dir: string; manifest: PayloadManifest }> {
  const files: Record<string, { data: Buffer; mode: number }> = {
    'bin/hvagent': { data: Buffer.concat([ELF_X86, Buffer.from(`agent ${marker}`.repeat(500))]), mode: 0o755 },
    'lib/ld-linux-x86-64.so.2': { data: Buffer.from('loader'), mode: 0o755 },
    'lib/libc.so.6': { data: Buffer.from(`libc ${marker}`), mode: 0o755 },
    'hvagent.service': { data: Buffer.from('[Service]\nExecStart=/usr/local/bin/hvagent run\n'), mode: 0o644 },
    'hvagent-console.service': { data: Buffer.from('[Service]\nExecStart=/usr/local/bin/hvagent console\n'), mode: 0o644 },
    'share/man/man1/hvagent.1': { data: Buffer.from(`.TH HVAGENT 1 ${marker}\n`), mode: 0o644 },
    'share/bash-completion/completions/hvagent': { data: Buffer.from('complete -F _hvagent hvagent\n'), mode: 0o644 },
  };
  for (const [rel, f] of Object.entries(files)) {
    await mkdir(path.join(dir, path.dirname(rel)), { recursive: true });
    await writeFile(path.join(dir, rel), f.data);
    await chmod(path.join(dir, rel), f.mode);
  }
  const list = Object.entries(files).map(([p, f]) => ({ path: p, mode: f.mode, size: f.data.length, sha256: createHash('sha256').update(f.data).digest('hex') }));
  const manifest: PayloadManifest = { format: 1, name: 'hvagent', version: '0.1.0', node: 'v20', arch: { name: 'x86_64', elfMachine: 62 }, interpreter: '/x', files: list, digest: payloadDigest(list) };
  await writeFile(path.join(dir, 'hvagent-payload.json'), JSON.stringify(manifest));
  return { dir, manifest };
}

const slotOk: AgentSlotFacts = { usrLocal: 'dir', systemd: '/usr/lib/systemd/systemd', archProbe: { path: '/usr/lib/systemd/systemd', machine: 62 }, sameNameUnits: [] };

describe('payload manifest', () => {
  it('accepts a manifest whose digest matches its files and names a problem otherwise', async () => {
    const { manifest } = await fakePayload(await tmp());
    expect(manifestProblem(manifest)).toBeUndefined();
    expect(manifestProblem({ ...manifest, digest: 'x' })).toBe('its digest does not match its file list');
    const escaping = [...manifest.files, { path: '../etc/passwd', mode: 0o644, size: 1, sha256: 'a'.repeat(64) }];
    expect(manifestProblem({ ...manifest, files: escaping, digest: payloadDigest(escaping) })).toMatch(/not relative and clean: "\.\.\/etc\/passwd"/);
    const noUnit = manifest.files.filter((f) => f.path !== 'hvagent.service');
    expect(manifestProblem({ ...manifest, files: noUnit, digest: payloadDigest(noUnit) })).toBe('it has no hvagent.service');
    // A payload without the console's unit would leave tty1 to the image's login prompt, silently.
    const noConsole = manifest.files.filter((f) => f.path !== 'hvagent-console.service');
    expect(manifestProblem({ ...manifest, files: noConsole, digest: payloadDigest(noConsole) })).toBe('it has no hvagent-console.service');
    const noMan = manifest.files.filter((f) => f.path !== 'share/man/man1/hvagent.1');
    expect(manifestProblem({ ...manifest, files: noMan, digest: payloadDigest(noMan) })).toBe('it has no share/man/man1/hvagent.1');
  });
  it('digest changes with any byte, mode or name', () => {
    const f = [{ path: 'a', mode: 0o755, size: 1, sha256: '0'.repeat(64) }];
    expect(payloadDigest(f)).not.toBe(payloadDigest([{ ...f[0]!, mode: 0o644 }]));
    expect(payloadDigest(f)).not.toBe(payloadDigest([{ ...f[0]!, sha256: '1'.repeat(64) }]));
  });
  it('reads ldd output and ELF machines', () => {
    expect(parseLdd('\tlinux-vdso.so.1 (0x0)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n')).toEqual(['/lib/x86_64-linux-gnu/libc.so.6', '/lib64/ld-linux-x86-64.so.2']);
    expect(elfMachine(ELF_X86)).toBe(62);
    expect(elfMachine(ELF_ARM)).toBe(183);
    expect(elfMachine(Buffer.from('#!/bin/sh\n'.padEnd(64)))).toBeUndefined();
  });
  it('refuses a payload directory that does not match its manifest', async () => {
    const p = await fakePayload(await tmp());
    await writeFile(path.join(p.dir, 'extra'), 'x');
    await writeFile(path.join(p.dir, 'lib/libc.so.6'), 'changed size');
    const problems = payloadTreeProblems(p.manifest, await scanTree(p.dir));
    expect(problems).toEqual(expect.arrayContaining(['extra is not in its manifest', expect.stringMatching(/^lib\/libc\.so\.6 is 12 bytes, the manifest says/)]));
    await expect(resolveAgentArg(p.dir)).rejects.toThrow(/does not match its hvagent-payload\.json/);
  });
  it('--agent: none, a missing directory (usage error), a directory without a manifest', async () => {
    expect(await resolveAgentArg('none')).toEqual({ kind: 'none', why: '--agent none' });
    await expect(resolveAgentArg('/nonexistent/payload')).rejects.toMatchObject({ exitCode: 2, message: '--agent /nonexistent/payload does not exist' });
    await expect(resolveAgentArg(await tmp())).rejects.toThrow(/is not an hvagent payload: it has no hvagent-payload\.json/);
    await expect(resolveAgentArg(undefined, { defaultDir: '/nonexistent/build/hvagent-payload' })).rejects.toThrow(/the installer carries no hvagent payload/);
  });
});

describe('the image\'s slot for hvagent', () => {
  const paths = DEFAULT_PERSISTENT_STATE_PATHS;
  it('a Harvester-shaped image has one', () => {
    expect(judgeAgentSlot(slotOk, { arch: { name: 'x86_64', elfMachine: 62 } }, paths, 'img')).toEqual({ problems: [], onlyNoSystemd: false });
  });
  it('names each missing condition', () => {
    const v = judgeAgentSlot({ usrLocal: 'symlink', archProbe: { path: '/bin/busybox', machine: 183 }, sameNameUnits: ['/etc/systemd/system/hvagent.service'] }, { arch: { name: 'x86_64', elfMachine: 62 } }, paths.filter((p) => p !== '/etc/systemd'), 'img');
    expect(v.problems).toEqual([
      'the image img has /usr/local as a symlink, not a directory: COS_PERSISTENT, where hvagent lives, is mounted there',
      'the image img has no systemd (/usr/lib/systemd/systemd, /lib/systemd/systemd): nothing would start hvagent\'s unit',
      'the image img is for aarch64 (/bin/busybox), the hvagent payload for x86_64',
      "/etc/systemd is not a persistent state path of this install: hvagent's unit and its wants link would not survive a reboot",
      "the image img already carries /etc/systemd/system/hvagent.service: Elemental copies it over the persistent /etc/systemd at every boot, replacing the installer's",
    ]);
    expect(v.onlyNoSystemd).toBe(false);
  });
  it('the default payload gives way on an image without systemd (and only then); an explicit one refuses', async () => {
    const p = await fakePayload(await tmp());
    const noSystemd: AgentSlotFacts = { usrLocal: 'dir', archProbe: { path: '/bin/sh', machine: 62 }, sameNameUnits: [] };
    const src = { kind: 'dir' as const, path: '/img' };
    const byDefault = await agentForImage({ kind: 'payload', dir: p.dir, origin: 'the installer', manifest: p.manifest }, src, paths, noSystemd);
    expect(byDefault).toMatchObject({ kind: 'none', why: expect.stringContaining('has no systemd') });
    await expect(agentForImage({ kind: 'payload', dir: p.dir, origin: '--agent', manifest: p.manifest }, src, paths, noSystemd)).rejects.toMatchObject({ exitCode: 1, message: expect.stringContaining('has no usable place on this image') });
    await expect(agentForImage({ kind: 'payload', dir: p.dir, origin: 'the installer', manifest: p.manifest }, src, paths, { ...slotOk, sameNameUnits: ['/usr/lib/systemd/system/hvagent.service'] })).rejects.toThrow(/would shadow/);
  });
  it('resolves links inside the image (merged /usr, absolute targets, loops)', async () => {
    const tree: Record<string, { kind: 'dir' | 'file' | 'symlink'; target?: string }> = {
      '/usr': { kind: 'dir' },
      '/usr/lib': { kind: 'dir' },
      '/usr/lib/systemd': { kind: 'dir' },
      '/usr/lib/systemd/systemd': { kind: 'file' },
      '/lib': { kind: 'symlink', target: 'usr/lib' },
      '/sbin': { kind: 'dir' },
      '/sbin/init': { kind: 'symlink', target: '/lib/systemd/systemd' },
      '/loop': { kind: 'symlink', target: '/loop' },
    };
    const entry = async (p: string) => tree[p];
    expect(await resolveInImage(entry, '/sbin/init')).toEqual({ path: '/usr/lib/systemd/systemd', entry: { kind: 'file' } });
    expect(await resolveInImage(entry, '/lib/systemd/../systemd/systemd')).toMatchObject({ path: '/usr/lib/systemd/systemd' });
    expect(await resolveInImage(entry, '/loop')).toBeUndefined();
    expect(await resolveInImage(entry, '/nope/x')).toBeUndefined();
  });
  it('reads the facts from a directory tree', async () => {
    const root = await tmp();
    await mkdir(path.join(root, 'usr/lib/systemd'), { recursive: true });
    await mkdir(path.join(root, 'usr/local'));
    await mkdir(path.join(root, 'usr/lib/systemd/system'));
    await writeFile(path.join(root, 'usr/lib/systemd/systemd'), ELF_ARM);
    await symlink('usr/lib', path.join(root, 'lib'));
    await writeFile(path.join(root, 'usr/lib/systemd/system/hvagent.service'), '[Unit]\n');
    await mkdir(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await symlink('/usr/lib/systemd/system/hvagent-console.service', path.join(root, 'etc/systemd/system/multi-user.target.wants/hvagent-console.service'));
    expect(await readAgentSlotFacts(dirImage(root))).toEqual({
      usrLocal: 'dir',
      systemd: '/usr/lib/systemd/systemd',
      archProbe: { path: '/usr/lib/systemd/systemd', machine: 183 },
      // /lib/systemd/system is the same directory through the link: both names are reported;
      // an enable link of the console's name counts even when it points nowhere
      sameNameUnits: ['/usr/lib/systemd/system/hvagent.service', '/lib/systemd/system/hvagent.service', '/etc/systemd/system/multi-user.target.wants/hvagent-console.service'],
    });
  });
  it('parses an unsquashfs -lls listing', () => {
    const m = parseSquashfsListing(
      [
        'drwxr-xr-x root/root                60 2026-12-01 09:05 squashfs-root',
        'drwxr-xr-x root/root                 3 2026-12-01 09:05 squashfs-root/a b',
        'lrwxrwxrwx root/root                20 2026-12-01 09:05 squashfs-root/init -> /lib/systemd/systemd',
        '-rwxr-xr-x root/root             35664 2026-12-01 09:05 squashfs-root/usr/lib/systemd/systemd',
        'crw-r--r-- root/root             1,  3 2026-12-01 09:05 squashfs-root/dev/null',
      ].join('\n'),
    );
    expect(m.get('/')).toEqual({ kind: 'dir' });
    expect(m.get('/a b')).toEqual({ kind: 'dir' });
    expect(m.get('/init')).toEqual({ kind: 'symlink', target: '/lib/systemd/systemd' });
    expect(m.get('/usr/lib/systemd/systemd')).toEqual({ kind: 'file' });
  });
});

describe('deployAgent onto a COS_PERSISTENT root', () => {
  const paths = DEFAULT_PERSISTENT_STATE_PATHS;
  const roomy = async () => ({ bsize: 4096, bavail: 10_000_000 });

  it('writes the release, switches current, makes the launcher and the enable links', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    const r = await deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy });
    const id = p.manifest.digest.slice(0, 16);
    expect(r).toMatchObject({ release: `lib/hvagent/releases/${id}`, files: 7, removed: [], enabled: ['hvagent.service', 'hvagent-console.service'] });
    expect(await readlink(path.join(root, 'lib/hvagent/current'))).toBe(`releases/${id}`);
    expect(await readlink(path.join(root, 'bin/hvagent'))).toBe('../lib/hvagent/current/bin/hvagent');
    expect(await readlink(path.join(root, '.state/etc-systemd.bind/system/hvagent.service'))).toBe('/usr/local/lib/hvagent/current/hvagent.service');
    expect(await readlink(path.join(root, '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent.service'))).toBe('/etc/systemd/system/hvagent.service');
    // The status screen on tty1, linked and enabled the same way, switching with `current`.
    expect(await readlink(path.join(root, '.state/etc-systemd.bind/system/hvagent-console.service'))).toBe('/usr/local/lib/hvagent/current/hvagent-console.service');
    expect(await readlink(path.join(root, '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent-console.service'))).toBe('/etc/systemd/system/hvagent-console.service');
    expect(await readFile(path.join(root, `lib/hvagent/releases/${id}/hvagent-console.service`), 'utf8')).toContain('ExecStart=/usr/local/bin/hvagent console');
    expect(await readFile(path.join(root, `lib/hvagent/releases/${id}/bin/hvagent`))).toEqual(await readFile(path.join(p.dir, 'bin/hvagent')));
    // The man page and completion, under /usr/local/share where man and bash-completion look, through `current`.
    expect(await readlink(path.join(root, 'share/man/man1/hvagent.1'))).toBe('../../../lib/hvagent/current/share/man/man1/hvagent.1');
    expect(await readFile(path.join(root, 'share/man/man1/hvagent.1'), 'utf8')).toBe('.TH HVAGENT 1 v1\n');
    expect(await readlink(path.join(root, 'share/bash-completion/completions/hvagent'))).toBe('../../../lib/hvagent/current/share/bash-completion/completions/hvagent');
    expect(await readFile(path.join(root, 'share/bash-completion/completions/hvagent'), 'utf8')).toContain('complete -F _hvagent hvagent');
    expect(await installedAgentProblem(root, p.manifest, paths)).toBeUndefined();
    await rm(path.join(root, 'share/man/man1/hvagent.1'));
    expect(await installedAgentProblem(root, p.manifest, paths)).toBe('share/man/man1/hvagent.1 is not a link to ../../../lib/hvagent/current/share/man/man1/hvagent.1');
  });

  it('an install whose console enable link is missing or wrong is not the installed agent (the step runs again)', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    await deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy });
    const wants = path.join(root, '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent-console.service');
    await rm(wants);
    expect(await installedAgentProblem(root, p.manifest, paths)).toBe('.state/etc-systemd.bind/system/multi-user.target.wants/hvagent-console.service is not a link to /etc/systemd/system/hvagent-console.service');
    await symlink('/usr/lib/systemd/system/getty@.service', wants);
    expect(await installedAgentProblem(root, p.manifest, paths)).toMatch(/hvagent-console\.service is not a link to/);
    // Running the step again repairs it, by replacing the link (atomically), not by writing through it.
    await deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy });
    expect(await readlink(wants)).toBe('/etc/systemd/system/hvagent-console.service');
    expect(await installedAgentProblem(root, p.manifest, paths)).toBeUndefined();
  });

  it('replaces an older agent whole and removes it afterwards', async () => {
    const root = await tmp();
    const v1 = await fakePayload(await tmp(), 'v1');
    const v2 = await fakePayload(await tmp(), 'v2');
    await deployAgent(root, v1.dir, v1.manifest, paths, { statfs: roomy });
    const r = await deployAgent(root, v2.dir, v2.manifest, paths, { statfs: roomy });
    expect(r.replaced).toBe(v1.manifest.digest.slice(0, 16));
    expect(await readdir(path.join(root, 'lib/hvagent/releases'))).toEqual([v2.manifest.digest.slice(0, 16)]);
    expect(await installedAgentProblem(root, v2.manifest, paths)).toBeUndefined();
  });

  it('refuses when it does not fit, before writing anything, and leaves nothing enabled', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    await expect(deployAgent(root, p.dir, p.manifest, paths, { statfs: async () => ({ bsize: 4096, bavail: 100 }) })).rejects.toMatchObject({
      message: expect.stringMatching(/^hvagent does not fit on COS_PERSISTENT: .* to write \(7 files\) plus 64 MiB headroom, 400 KiB free; nothing was enabled$/),
      exitCode: 3,
    });
    expect(await readdir(root)).toEqual([]);
  });

  it('a damaged payload (bytes not matching the manifest) is refused after the copy, and the copy removed', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    const bin = path.join(p.dir, 'bin/hvagent');
    const bytes = await readFile(bin);
    bytes[100] ^= 0xff; // same size, other content
    await writeFile(bin, bytes);
    await expect(deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy })).rejects.toThrow(/does not match its manifest: bin\/hvagent does not match its sha256/);
    expect(await lstat(path.join(root, 'lib/hvagent/current')).catch(() => undefined)).toBeUndefined();
    expect(await lstat(path.join(root, '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent.service')).catch(() => undefined)).toBeUndefined();
    expect(await lstat(path.join(root, '.state/etc-systemd.bind/system/multi-user.target.wants/hvagent-console.service')).catch(() => undefined)).toBeUndefined();
    expect(await readdir(path.join(root, 'lib/hvagent/.staging')).catch(() => [])).toEqual([]);
  });

  it('a staged file a killed run left (right size and mtime, wrong bytes) is kept by the copy but caught by the read-back', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    const staged = path.join(root, 'lib/hvagent/.staging', p.manifest.digest.slice(0, 16), 'share/man/man1/hvagent.1');
    await mkdir(path.dirname(staged), { recursive: true });
    const src = await stat(path.join(p.dir, 'share/man/man1/hvagent.1'));
    await writeFile(staged, 'X'.repeat(src.size));
    await utimes(staged, src.atime, src.mtime);
    await expect(deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy })).rejects.toThrow(/does not match its manifest: share\/man\/man1\/hvagent\.1 does not match its sha256/);
    expect(await lstat(path.join(root, 'lib/hvagent/current')).catch(() => undefined)).toBeUndefined();
    expect(await readdir(path.join(root, 'lib/hvagent/.staging')).catch(() => [])).toEqual([]);
    // The next run copies it again.
    await deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy });
    expect(await installedAgentProblem(root, p.manifest, paths)).toBeUndefined();
  });

  it('removes an enable link left pointing at no complete agent, and --agent none removes the agent', async () => {
    const root = await tmp();
    const p = await fakePayload(await tmp());
    const ap = agentPaths(paths);
    const [agentUnit, consoleUnit] = ap.units;
    expect(ap.units.map((u) => u.name)).toEqual(['hvagent.service', 'hvagent-console.service']);
    await mkdir(path.dirname(path.join(root, agentUnit!.wants)), { recursive: true });
    await symlink('/etc/systemd/system/hvagent.service', path.join(root, agentUnit!.wants));
    await symlink('/etc/systemd/system/hvagent-console.service', path.join(root, consoleUnit!.wants));
    await expect(deployAgent(root, p.dir, p.manifest, paths, { statfs: async () => ({ bsize: 4096, bavail: 1 }) })).rejects.toThrow(/does not fit/);
    expect(await lstat(path.join(root, agentUnit!.wants)).catch(() => undefined)).toBeUndefined();
    expect(await lstat(path.join(root, consoleUnit!.wants)).catch(() => undefined)).toBeUndefined();
    await deployAgent(root, p.dir, p.manifest, paths, { statfs: roomy });
    expect(await removeAgent(root, paths)).toEqual([agentUnit!.wants, consoleUnit!.wants, agentUnit!.unit, consoleUnit!.unit, ap.launcher, ...ap.share.map((f) => f.link), ap.home]);
    expect(await lstat(path.join(root, 'share/man/man1/hvagent.1')).catch(() => undefined)).toBeUndefined();
    expect(await installedAgentProblem(root, p.manifest, paths)).toMatch(/does not point to/);
  });

  it('space: counts whole blocks and what an interrupted copy already wrote', () => {
    const m = { files: [{ path: 'a', mode: 0o755, size: 1, sha256: '' }] } as unknown as PayloadManifest;
    const headroom = 64 * 1024 * 1024;
    expect(agentSpaceProblem(m, { bsize: 4096, bavail: (headroom + 9 * 4096) / 4096 }, 0, 'r')).toBeUndefined();
    expect(agentSpaceProblem(m, { bsize: 4096, bavail: (headroom + 8 * 4096) / 4096 }, 0, 'r')).toBeDefined();
  });
});
