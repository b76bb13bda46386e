// `make iso`'s builder, run as the command it is, and its output read back with other tools than
// the ones that wrote it: xorriso's El Torito report, sfdisk's partition tables, the MBR bytes,
// mtools on the ESP cut out of the image, sbverify on the EFI binaries, sha256sum/sha512sum -c on
// the checksum lists, cpio on the initrds. Booting it is make e2e's (test/e2e/install-media.sh).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../../..');
const CLI = path.join(REPO, 'dist/iso-build/live/cli.js');
const CACHE = process.env.HV_E2E_CACHE ?? '/var/cache/hvinstall/iso-build';
const VERSION = 'v1.8.0-it';

interface Build {
  iso: string;
  mediumId: string;
  pxe: { kernel: string; initrd: string; rootfs: string };
  live: { kernel: string; initrd: string; pxeInitrd: string; liveSquashfs: string; osSquashfs: string };
  checksums: { sha256: string; sha512: string };
  artifacts: Array<{ name: string; bytes: number }>;
  inputs: { signedBoot: string[] };
}

/** Files of a few hundred MiB are compared by digest: the matcher's deep equality walks a Buffer byte by byte and exhausts the heap. */
async function sha256Of(file: string): Promise<string> {
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

let dir: string;
let out: string;
let build: Build;

async function sh(cmd: string, args: string[], opts: { cwd?: string; maxBuffer?: number } = {}): Promise<string> {
  return (await exec(cmd, args, { maxBuffer: 64 * 1024 * 1024, ...opts })).stdout;
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return exec('node', [CLI, ...args], { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, TMPDIR: dir } })
    .then((r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }))
    .catch((e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }));
}

async function bytesAt(file: string, offset: number, length: number): Promise<Buffer> {
  const fh = await open(file, 'r');
  try {
    const b = Buffer.alloc(length);
    await fh.read(b, 0, length, offset);
    return b;
  } finally {
    await fh.close();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'hv-iso-it-'));
  out = path.join(dir, 'out');
  await mkdir(path.join(dir, 'bundle/harvester/images-lists'), { recursive: true });
  await writeFile(path.join(dir, 'bundle/metadata.yaml'), 'images:\n  common: []\n');
  await writeFile(path.join(dir, 'bundle/harvester/images-lists/marker.txt'), 'bundle marker\n');
  await writeFile(path.join(dir, 'release.yaml'), `harvester: ${VERSION}\nos: hvinstall test\n`);
  const r = await cli(['--out', out, '--cache', CACHE, '--bundle', path.join(dir, 'bundle'), '--release-file', path.join(dir, 'release.yaml')]);
  if (r.code !== 0) throw new Error(`the build failed (${r.code}): ${r.stderr}`);
  build = JSON.parse(r.stdout) as Build;
}, 15 * 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// Hashing and reading back a few hundred MiB: slow on a loaded machine, so a generous per-test limit.
describe('make iso', { timeout: 15 * 60_000 }, () => {
  it('publishes Harvester-named artifacts whose checksum lists check out with sha256sum and sha512sum', async () => {
    expect(build.artifacts.map((a) => a.name).sort()).toEqual(
      [`harvester-${VERSION}-amd64.iso`, `harvester-${VERSION}-initrd-amd64`, `harvester-${VERSION}-rootfs-amd64.squashfs`, `harvester-${VERSION}-vmlinuz-amd64`].sort(),
    );
    expect(path.basename(build.checksums.sha512)).toBe(`harvester-${VERSION}-amd64.sha512`);
    for (const [tool, list] of [['sha256sum', build.checksums.sha256], ['sha512sum', build.checksums.sha512]]) {
      const ok = await sh(tool, ['-c', path.basename(list)], { cwd: out });
      expect(ok.trim().split('\n')).toHaveLength(4);
      expect(ok).not.toMatch(/FAILED/);
    }
    // The PXE rootfs is the ISO's OS image; the PXE kernel is the ISO's kernel.
    expect(await sha256Of(build.pxe.rootfs)).toBe(await sha256Of(build.live.osSquashfs));
    expect(await sha256Of(build.pxe.kernel)).toBe(await sha256Of(build.live.kernel));
  });

  it('is an El Torito image for BIOS and UEFI, labelled COS_LIVE, with a GPT holding the ESP and a protective, bootable MBR with grub\'s boot code', async () => {
    // xorriso reports the volume id on stderr (with the -indev messages) and El Torito on stdout.
    const report = await exec('xorriso', ['-indev', build.iso, '-report_el_torito', 'plain'])
      .then((r) => r.stdout + r.stderr)
      .catch((e: { stdout: string; stderr: string }) => e.stdout + e.stderr);
    expect(report).toMatch(/Volume id\s+: 'COS_LIVE'/);
    expect(report).toMatch(/El Torito boot img :\s+1\s+BIOS\s+y\s+none/);
    expect(report).toMatch(/El Torito boot img :\s+2\s+UEFI\s+y\s+none/);
    expect(report).toMatch(/El Torito img path :\s+1\s+\/boot\/grub2\/eltorito\.img/);
    expect(report).toMatch(/El Torito cat path :\s+\/boot\/boot\.cat/);
    expect(report).toMatch(/Boot record\s+: El Torito , MBR protective-msdos-label grub2-mbr .*GPT/);
    const gpt = JSON.parse(await sh('sfdisk', ['-J', build.iso])) as { partitiontable: { label: string; partitions: Array<{ start: number; size: number; type: string }> } };
    expect(gpt.partitiontable.label).toBe('gpt');
    const esp = gpt.partitiontable.partitions.find((p) => p.type === 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B');
    expect(esp).toBeDefined();
    const mbr = await bytesAt(build.iso, 0, 512);
    expect(mbr.readUInt16LE(510)).toBe(0xaa55);
    const entries = [0, 1, 2, 3].map((i) => ({ boot: mbr[446 + i * 16], type: mbr[446 + i * 16 + 4] }));
    expect(entries.some((e) => e.type === 0xee)).toBe(true);
    expect(entries.some((e) => e.boot === 0x80)).toBe(true);
    // grub's boot_hybrid.img is the MBR's code (xorriso patches the core's address into it at 0x1b0).
    const hybrid = await readFile('/usr/lib/grub/i386-pc/boot_hybrid.img');
    expect(mbr.subarray(0, 0x5c)).toEqual(hybrid.subarray(0, 0x5c));

    // The ESP, cut out of the image at its GPT extent and read with mtools.
    const espImg = path.join(dir, 'esp.img');
    await sh('dd', [`if=${build.iso}`, `of=${espImg}`, 'bs=512', `skip=${esp!.start}`, `count=${esp!.size}`, 'status=none']);
    const listing = await sh('mdir', ['-b', '-i', espImg, '::/EFI/BOOT']);
    expect(listing.split('\n').filter(Boolean).map((l) => l.replace('::/EFI/BOOT/', '')).sort()).toEqual(['BOOTX64.EFI', 'grub.cfg', 'grubx64.efi', 'mmx64.efi']);
    const shim = path.join(dir, 'BOOTX64.EFI');
    const grub = path.join(dir, 'grubx64.efi');
    await sh('mcopy', ['-n', '-i', espImg, '::/EFI/BOOT/BOOTX64.EFI', shim]);
    await sh('mcopy', ['-n', '-i', espImg, '::/EFI/BOOT/grubx64.efi', grub]);
    expect(await sh('sbverify', ['--list', shim])).toContain('Microsoft Corporation UEFI CA 2011');
    expect(await sh('sbverify', ['--list', grub])).toContain('Debian Secure Boot CA');
    const stub = await sh('mtype', ['-i', espImg, '::/EFI/debian/grub.cfg']);
    expect(stub).toContain(`search --no-floppy --file --set=root /.disk/id/${build.mediumId}`);
    expect(stub).toContain('configfile ($root)/boot/grub2/grub.cfg');
    expect(build.inputs.signedBoot.map((d) => d.split('_')[0]).sort()).toEqual(['grub-efi-amd64-signed', 'shim-helpers-amd64-signed', 'shim-signed']);
  });

  it('carries the live root, the OS image, the bundle, the release file and this build\'s medium id; no kernel parameter is needed', async () => {
    // The boot catalog (/boot/boot.cat) is not a plain file to -find; the El Torito report names it.
    const files = (await sh('xorriso', ['-indev', build.iso, '-find', '/', '-type', 'f']).catch((e: { stdout: string }) => e.stdout))
      .split('\n').filter((l) => l.startsWith("'")).map((l) => l.replace(/^'|'$/g, '')).sort();
    expect(files).toEqual([
      `/.disk/id/${build.mediumId}`,
      '/EFI/BOOT/grub.cfg',
      '/EFI/debian/grub.cfg',
      '/boot/grub2/eltorito.img',
      '/boot/grub2/grub.cfg',
      '/boot/grub2/harvester.cfg',
      '/boot/initrd',
      '/boot/kernel',
      '/bundle/harvester/images-lists/marker.txt',
      '/bundle/metadata.yaml',
      '/harvester-release.yaml',
      '/hvlive/live.squashfs',
      '/rootfs.squashfs',
    ].sort());
    const x = path.join(dir, 'x');
    await mkdir(x, { recursive: true });
    for (const f of ['/rootfs.squashfs', '/hvlive/live.squashfs', '/boot/initrd', '/boot/grub2/harvester.cfg', '/boot/grub2/grub.cfg', '/harvester-release.yaml', '/bundle/harvester/images-lists/marker.txt']) {
      await sh('xorriso', ['-osirrox', 'on', '-indev', build.iso, '-extract', f, path.join(x, path.basename(f))]).catch((e: { stdout: string }) => e.stdout);
    }
    expect(await sha256Of(path.join(x, 'rootfs.squashfs'))).toBe(await sha256Of(build.live.osSquashfs));
    expect(await sha256Of(path.join(x, 'live.squashfs'))).toBe(await sha256Of(build.live.liveSquashfs));
    expect(await sha256Of(path.join(x, 'initrd'))).toBe(await sha256Of(build.live.initrd));
    expect(await readFile(path.join(x, 'harvester-release.yaml'), 'utf8')).toBe(`harvester: ${VERSION}\nos: hvinstall test\n`);
    expect(await readFile(path.join(x, 'marker.txt'), 'utf8')).toBe('bundle marker\n');
    expect(await readFile(path.join(x, 'harvester.cfg'), 'utf8')).toBe(`set harvester_version="${VERSION}"\nset extra_iso_cmdline=""\n`);
    expect(await readFile(path.join(x, 'grub.cfg'), 'utf8')).not.toMatch(/root=live|CDLABEL/);
  });

  it('the live root carries the hvagent payload this tree built, byte for byte, where the installer looks for it by default', async () => {
    const x = path.join(dir, 'live-payload');
    await sh('unsquashfs', ['-no-progress', '-d', x, build.live.liveSquashfs, 'opt/hvinstall/build/hvagent-payload', 'opt/hvinstall/package.json']);
    const payload = path.join(x, 'opt/hvinstall/build/hvagent-payload');
    const repoPayload = path.join(REPO, 'build/hvagent-payload');
    const manifest = JSON.parse(await readFile(path.join(payload, 'hvagent-payload.json'), 'utf8')) as { digest: string; files: Array<{ path: string; sha256: string; mode: number }> };
    expect(manifest.digest).toBe((JSON.parse(await readFile(path.join(repoPayload, 'hvagent-payload.json'), 'utf8')) as { digest: string }).digest);
    expect(manifest.files.map((f) => f.path)).toEqual(expect.arrayContaining(['bin/hvagent', 'hvagent.service', 'hvagent-console.service', 'lib/ld-linux-x86-64.so.2']));
    // sha256sum, not the installer's reader, checks every file of the live copy against the manifest.
    const sums = manifest.files.map((f) => `${f.sha256}  ${f.path}`).join('\n') + '\n';
    await writeFile(path.join(dir, 'payload.sha256'), sums);
    expect(await sh('sha256sum', ['-c', path.join(dir, 'payload.sha256')], { cwd: payload })).not.toMatch(/FAILED/);
    for (const f of manifest.files) expect(((await stat(path.join(payload, f.path))).mode & 0o7777).toString(8), f.path).toBe(f.mode.toString(8));
    // The installer's root on the live system (package.json's directory) is what --agent defaults under.
    expect(JSON.parse(await readFile(path.join(x, 'opt/hvinstall/package.json'), 'utf8'))).toMatchObject({ name: 'hvinstall' });
  });

  it('the initramfs is small and knows the medium id; the PXE initrd is the live root in a plain cpio, then that initramfs', async () => {
    expect((await stat(build.live.initrd)).size).toBeLessThan(8 * 1024 * 1024);
    const unpacked = path.join(dir, 'initramfs');
    await mkdir(unpacked, { recursive: true });
    await sh('sh', ['-c', `zstd -dc '${build.live.initrd}' | cpio -id --quiet`], { cwd: unpacked });
    expect((await readFile(path.join(unpacked, 'etc/hv-live/medium-id'), 'utf8')).trim()).toBe(build.mediumId);
    expect(await readFile(path.join(unpacked, 'init'), 'utf8')).toMatch(/^#!\/bin\/busybox sh/);
    const modules = (await readFile(path.join(unpacked, 'etc/hv-live/initramfs-modules'), 'utf8')).split('\n');
    for (const m of ['sr_mod', 'isofs', 'usb_storage', 'xhci_pci', 'nvme', 'squashfs', 'overlay', 'loop']) expect(modules).toContain(m);

    const pxe = await readFile(build.live.pxeInitrd);
    const initramfs = await readFile(build.live.initrd);
    expect(pxe.subarray(0, 6).toString()).toBe('070701');
    // Buffer.equals: toEqual walks a buffer of megabytes element by element, tens of seconds.
    expect(pxe.subarray(pxe.length - initramfs.length).equals(initramfs)).toBe(true);
    const list = await sh('sh', ['-c', `head -c ${pxe.length - initramfs.length} '${build.live.pxeInitrd}' | cpio -it --quiet`]);
    expect(list.split('\n')).toContain('hvlive/live.squashfs');
  });

  it('refuses a bundle that is not a directory before building anything', async () => {
    const r = await cli(['--out', path.join(dir, 'refused'), '--cache', CACHE, '--bundle', path.join(dir, 'release.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--bundle ${path.join(dir, 'release.yaml')} is not a directory`);
    await expect(stat(path.join(dir, 'refused'))).rejects.toThrow();
  });
});
