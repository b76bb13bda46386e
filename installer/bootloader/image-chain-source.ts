/**
 * Reading the image's boot chain out of the install source (a directory tree read in place, or a
 * squashfs through unsquashfs, nothing mounted): the paths the choice needs, the files the install
 * copies, and grub-script-check over the configs before any disk is touched.
 */
import { constants, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import type { OsSource } from '../disk/contracts.js';
import { chooseBootChain, EFI_BINARY_DIRS, GRUB_MODULE_DIRS, IMAGE_GRUB_CFG, IMAGE_OS_RELEASE, patchNoFloppy, type BootChainChoice, type ImageBootChain } from './image-chain.js';

const LOOKED_AT = ['/etc/cos', ...EFI_BINARY_DIRS, ...GRUB_MODULE_DIRS] as const;

/** The image paths under the directories the choice looks at. */
export async function bootChainPaths(source: OsSource): Promise<string[]> {
  if (source.kind === 'squashfs') {
    const r = await run('unsquashfs', ['-l', '-no-progress', '-d', '', source.path], { timeoutMs: 5 * 60_000 });
    return r.stdout.split('\n').filter((l) => LOOKED_AT.some((d) => l.startsWith(`${d}/`)));
  }
  const paths: string[] = [];
  const walk = async (rel: string, depth: number): Promise<void> => {
    for (const e of await readdir(path.join(source.path, rel), { withFileTypes: true }).catch(() => [])) {
      const child = path.posix.join(rel, e.name);
      paths.push(child);
      if (e.isDirectory() && depth < 3) await walk(child, depth + 1);
    }
  };
  for (const d of LOOKED_AT) await walk(d, 0);
  return paths;
}

/**
 * Copies image files into a new temp directory (same relative paths) and returns it; the caller
 * removes it. A squashfs is extracted with unsquashfs for just these paths.
 */
export async function extractImageFiles(source: OsSource, files: readonly string[], optional: readonly string[] = []): Promise<string> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'hv-image-chain-'));
  try {
    if (source.kind === 'squashfs') {
      // An extract filter that matches nothing extracts nothing: the optional files may be absent.
      const list = path.join(tmp, '.files');
      await writeFile(list, [...files, ...optional].map((f) => f.replace(/^\/+/, '')).join('\n') + '\n');
      await run('unsquashfs', ['-no-progress', '-f', '-d', path.join(tmp, 'root'), '-ef', list, source.path], { timeoutMs: 10 * 60_000 });
    } else {
      for (const f of [...files, ...optional]) {
        const from = path.join(source.path, f);
        if (optional.includes(f) && !(await stat(from).catch(() => undefined))) continue;
        await copyWithoutAtime(from, path.join(tmp, 'root', f));
      }
    }
    return path.join(tmp, 'root');
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Copies a file of a directory source without touching its access time: mke2fs -d records the
 * tree's atimes in the images deploy builds, so a read here (after deploy) would make a resumed
 * install's re-deploy differ from the first one (deploy reads through a noatime mount).
 */
async function copyWithoutAtime(from: string, to: string): Promise<void> {
  const src = await open(from, constants.O_RDONLY | constants.O_NOATIME);
  try {
    await mkdir(path.dirname(to), { recursive: true });
    await writeFile(to, await src.readFile(), { mode: 0o644 });
  } finally {
    await src.close();
  }
}

/** grub-script-check over a config; a parse error is the image's, named with grub's line. */
export async function checkGrubScript(file: string, what: string): Promise<void> {
  const r = await run('grub-script-check', [file], { allowFailure: true, timeoutMs: 60_000 });
  if (r.exitCode !== 0) {
    const said = (r.stderr.trim() || r.stdout.trim()).split('\n').slice(-2).join(' ');
    throw new HvError(`${what} does not parse as a grub script: ${said || `grub-script-check exited ${r.exitCode}`}`, {
      where: `grub-script-check ${what}`,
      hint: 'fix the grub.cfg in the image (grub-script-check FILE shows the line), or remove /etc/cos/grub.cfg and the EFI binaries so hvinstall writes its own boot chain',
      exitCode: ExitCode.usage,
    });
  }
}

/**
 * The boot chain for an install of `source` with `firmware`: chosen from the image's paths, and
 * when it is the image's, its grub.cfg (as the image has it and with the --no-floppy change) and
 * bootargs.cfg checked with grub-script-check. Throws before any disk is touched.
 */
export async function inspectBootChain(source: OsSource, firmware: 'efi' | 'bios'): Promise<BootChainChoice> {
  const choice = chooseBootChain(await bootChainPaths(source), source.path);
  if (choice.kind === 'own') return choice;
  if (firmware === 'bios') return { kind: 'own', why: `legacy BIOS boot: the image's shim and grub (${choice.grub}) are UEFI binaries` };
  const root = await extractImageFiles(source, [choice.grubCfg, choice.bootargsCfg]);
  try {
    await checkGrubScript(path.join(root, choice.grubCfg), `${source.path}:${IMAGE_GRUB_CFG}`);
    await checkGrubScript(path.join(root, choice.bootargsCfg), `${source.path}:${choice.bootargsCfg}`);
    const patched = path.join(root, 'grub.cfg.patched');
    await writeFile(patched, patchNoFloppy(await readFile(path.join(root, choice.grubCfg), 'utf8')));
    await checkGrubScript(patched, `${source.path}:${IMAGE_GRUB_CFG} with --no-floppy added`);
  } finally {
    await rm(path.dirname(root), { recursive: true, force: true });
  }
  return choice;
}

/** The files an image chain install copies out of the image (its os-release read when present). */
export function chainFiles(chain: ImageBootChain): string[] {
  return [chain.shim, chain.grub, chain.mokManager, chain.grubCfg, ...chain.modules];
}

export { IMAGE_OS_RELEASE };
