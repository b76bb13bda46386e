/**
 * Test fixture: a sparse raw file on a loop device, partitioned with sgdisk, filesystems made with
 * their labels, ext4 ones mounted. Everything it creates is released by cleanup(), which tests call
 * in afterAll/afterEach even when they fail.
 */
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface PartSpec {
  label: string;
  sizeMiB: number;
  /** ext4 (mounted), vfat (not mountable here), or none (bios_grub). */
  fs: 'ext4' | 'vfat' | 'none';
  /** sgdisk type code; default 8300. */
  type?: string;
}

export interface LoopDisk {
  dir: string;
  device: string;
  parts: Array<PartSpec & { device: string; mountpoint?: string }>;
  /** The raw disk file (kept by release(), removed by cleanup()). */
  file: string;
  byLabel(label: string): { device: string; mountpoint?: string };
  /** Unmounts everything and detaches the loop device, keeping the raw file. */
  release(): Promise<void>;
  cleanup(): Promise<void>;
}

async function sh(cmd: string, args: string[]): Promise<string> {
  const r = await execa(cmd, args, { reject: false });
  if (r.exitCode !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.exitCode}): ${r.stderr}`);
  return r.stdout;
}

export async function makeLoopDisk(parts: PartSpec[], opts: { extraMiB?: number; sectorSize?: 512 | 4096 } = {}): Promise<LoopDisk> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-deploy-disk-'));
  const img = path.join(dir, 'disk.raw');
  const total = parts.reduce((n, p) => n + p.sizeMiB, 0) + (opts.extraMiB ?? 4);
  await sh('truncate', ['-s', `${total}M`, img]);
  let device = '';
  const mounted: string[] = [];
  const release = async (): Promise<void> => {
    // Anything still mounted below the fixture (a killed deploy's source bind mount) goes first.
    for (const m of (await mountsUnder(dir)).reverse()) await execa('umount', ['-l', m], { reject: false });
    for (const m of mounted.splice(0).reverse()) await execa('umount', [m], { reject: false });
    if (device) await execa('losetup', ['-d', device], { reject: false });
    device = '';
  };
  const cleanup = async (): Promise<void> => {
    await release();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    device = (await sh('losetup', ['-fP', '--show', ...(opts.sectorSize ? ['--sector-size', String(opts.sectorSize)] : []), img])).trim();
    const sg: string[] = ['-o'];
    parts.forEach((p, i) => sg.push(`-n${i + 1}:0:+${p.sizeMiB}M`, `-t${i + 1}:${p.type ?? '8300'}`));
    await sh('sgdisk', [...sg, device]);
    await execa('partprobe', [device], { reject: false });
    const out: LoopDisk['parts'] = [];
    for (let i = 0; i < parts.length; i++) {
      const pdev = `${device}p${i + 1}`;
      for (let t = 0; t < 100 && !existsSync(pdev); t++) await new Promise((r) => setTimeout(r, 100));
      if (!existsSync(pdev)) throw new Error(`${pdev} did not appear after partprobe`);
      const p = parts[i];
      let mountpoint: string | undefined;
      if (p.fs === 'ext4') {
        await sh('mkfs.ext4', ['-q', '-F', '-L', p.label, pdev]);
        mountpoint = path.join(dir, p.label.toLowerCase());
        await mkdir(mountpoint);
        await sh('mount', [pdev, mountpoint]);
        mounted.push(mountpoint);
      } else if (p.fs === 'vfat') {
        await sh('mkfs.vfat', ['-n', p.label, pdev]);
      }
      out.push({ ...p, device: pdev, mountpoint });
    }
    return {
      dir,
      device,
      file: img,
      parts: out,
      byLabel(label) {
        const p = out.find((x) => x.label === label);
        if (!p) throw new Error(`no partition ${label}`);
        return p;
      },
      release,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** Harvester's layout, small: the partitions deploy and bootloader write to. */
export function harvesterParts(opts: { stateMiB?: number; recoveryMiB?: number; firmware?: 'efi' | 'bios' } = {}): PartSpec[] {
  return [
    opts.firmware === 'bios'
      ? { label: 'BIOS', sizeMiB: 1, fs: 'none', type: 'ef02' }
      : { label: 'COS_GRUB', sizeMiB: 64, fs: 'vfat', type: 'ef00' },
    { label: 'COS_OEM', sizeMiB: 50, fs: 'ext4' },
    { label: 'COS_RECOVERY', sizeMiB: opts.recoveryMiB ?? 256, fs: 'ext4' },
    { label: 'COS_STATE', sizeMiB: opts.stateMiB ?? 512, fs: 'ext4' },
  ];
}

/** Mounts an image read-only on a fresh directory; returns it and an unmount function. */
export async function mountImage(file: string, under: string): Promise<{ dir: string; unmount: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(under, 'img-'));
  await sh('mount', ['-o', 'loop,ro', file, dir]);
  return {
    dir,
    unmount: async () => {
      await execa('umount', [dir], { reject: false });
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(`${dir}/`));
}

export { sh };
