/**
 * Whether the OS image being installed has a usable slot for hvagent, decided before any disk is
 * touched. A usable slot means, precisely:
 *   - /usr/local is a real directory in the image: Elemental mounts COS_PERSISTENT there
 *     (rd.cos.mount=LABEL=COS_PERSISTENT:/usr/local), and the agent lives on COS_PERSISTENT;
 *   - the image boots systemd (/usr/lib/systemd/systemd or /lib/systemd/systemd): the unit is what
 *     starts the agent;
 *   - the image's executables are of the payload's architecture (the ELF e_machine of its systemd,
 *     else of /bin/sh): the payload carries its own loader and libraries, not a CPU;
 *   - /etc/systemd is a persistent state path, so the unit and its wants link survive a reboot;
 *   - the image carries no hvagent.service nor hvagent-console.service of its own (in
 *     /etc/systemd/system, /usr/lib/systemd/system or /lib/systemd/system, or as a wants link): Elemental copies the image's /etc/systemd over the
 *     persistent one at every boot, so an /etc copy would replace ours, and one in /usr/lib would be a
 *     different agent shadowed by ours.
 * Facts are read from a directory tree or a squashfs (unsquashfs -lls / -cat) by the same code, with
 * symlinks resolved inside the image (a merged-/usr image's /lib -> usr/lib, /sbin/init -> systemd).
 */
import { lstat, mkdtemp, open, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { ELF_MACHINES, UNIT_NAMES, unitNodePath, wantsNodePath, type PayloadManifest } from '../../node/payload-layout.js';
import { elfMachine } from '../../node/elf.js';
import type { OsSource } from '../disk/contracts.js';

export type ImageEntryKind = 'dir' | 'file' | 'symlink' | 'other';
export interface ImageEntry {
  kind: ImageEntryKind;
  target?: string;
}

/** Read access to an OS image by absolute image path, symlinks not followed. */
export interface ImageReader {
  describe: string;
  entry(p: string): Promise<ImageEntry | undefined>;
  /** The first n bytes of a regular file (the path is already resolved). */
  head(p: string, n: number): Promise<Buffer>;
}

export const SYSTEMD_BINARIES = ['/usr/lib/systemd/systemd', '/lib/systemd/systemd'] as const;
export const IMAGE_UNIT_PATHS: readonly string[] = UNIT_NAMES.flatMap((u) => [unitNodePath(u), `/usr/lib/systemd/system/${u}`, `/lib/systemd/system/${u}`, wantsNodePath(u)]);

/**
 * Resolves an absolute image path through the image's own symlinks (absolute targets restart at
 * the image root, `..` stops at it). Returns the final path and its entry, or undefined when a
 * component is missing or the links loop. Pure over `entry`.
 */
export async function resolveInImage(entry: (p: string) => Promise<ImageEntry | undefined>, p: string, maxLinks = 40): Promise<{ path: string; entry: ImageEntry } | undefined> {
  let pending = p.split('/').filter(Boolean);
  let at: string[] = [];
  let links = 0;
  while (pending.length) {
    const name = pending.shift()!;
    if (name === '.') continue;
    if (name === '..') {
      at.pop();
      continue;
    }
    const here = '/' + [...at, name].join('/');
    const e = await entry(here);
    if (!e) return undefined;
    if (e.kind === 'symlink') {
      if (++links > maxLinks || !e.target) return undefined;
      const parts = e.target.split('/').filter(Boolean);
      if (e.target.startsWith('/')) at = [];
      pending = [...parts, ...pending];
      continue;
    }
    if (pending.length && e.kind !== 'dir') return undefined;
    at.push(name);
  }
  const final = '/' + at.join('/');
  const e = final === '/' ? { kind: 'dir' as const } : await entry(final);
  return e ? { path: final, entry: e } : undefined;
}

export interface AgentSlotFacts {
  /** What /usr/local is in the image (after resolving links: a symlink to a directory counts as missing the mount point). */
  usrLocal: 'dir' | 'symlink' | 'missing' | 'other';
  /** The image's systemd binary (resolved image path), if any. */
  systemd?: string;
  /** The file the architecture was read from and its ELF e_machine (undefined: not an ELF binary). */
  archProbe?: { path: string; machine?: number };
  /** Image paths that already carry one of the payload's units (hvagent.service, hvagent-console.service). */
  sameNameUnits: string[];
}

export async function readAgentSlotFacts(image: ImageReader): Promise<AgentSlotFacts> {
  const local = await image.entry('/usr/local');
  const resolvedUsr = await resolveInImage((p) => image.entry(p), '/usr');
  const usrLocal: AgentSlotFacts['usrLocal'] = !resolvedUsr
    ? 'missing'
    : resolvedUsr.path !== '/usr'
      ? // /usr itself is a link: look where it points
        ((await image.entry(`${resolvedUsr.path}/local`))?.kind === 'dir' ? 'dir' : 'missing')
      : !local
        ? 'missing'
        : local.kind === 'dir'
          ? 'dir'
          : local.kind === 'symlink'
            ? 'symlink'
            : 'other';
  let systemd: string | undefined;
  for (const p of SYSTEMD_BINARIES) {
    const r = await resolveInImage((q) => image.entry(q), p);
    if (r?.entry.kind === 'file') {
      systemd = r.path;
      break;
    }
  }
  let archProbe: AgentSlotFacts['archProbe'];
  const probePath = systemd ?? (await resolveInImage((q) => image.entry(q), '/bin/sh'))?.path;
  if (probePath && (await image.entry(probePath))?.kind === 'file') {
    archProbe = { path: probePath, machine: elfMachine(await image.head(probePath, 64)) };
  }
  const sameNameUnits: string[] = [];
  for (const p of IMAGE_UNIT_PATHS) {
    const parent = await resolveInImage((q) => image.entry(q), path.posix.dirname(p));
    if (parent && (await image.entry(`${parent.path}/${path.posix.basename(p)}`))) sameNameUnits.push(p);
  }
  return { usrLocal, systemd, archProbe, sameNameUnits };
}

export interface AgentSlotVerdict {
  /** Problems that refuse the install (with an explicit --agent, or any payload). */
  problems: string[];
  /** True when the only problem is that the image has no systemd (see agent-source.ts). */
  onlyNoSystemd: boolean;
}

/** The judgement. Pure. */
export function judgeAgentSlot(facts: AgentSlotFacts, manifest: Pick<PayloadManifest, 'arch'>, persistentStatePaths: string[], image: string): AgentSlotVerdict {
  const problems: string[] = [];
  let noSystemd = false;
  if (facts.usrLocal !== 'dir') {
    problems.push(
      `the image ${image} has ${facts.usrLocal === 'missing' ? 'no /usr/local directory' : facts.usrLocal === 'symlink' ? '/usr/local as a symlink, not a directory' : '/usr/local as a file, not a directory'}: COS_PERSISTENT, where hvagent lives, is mounted there`,
    );
  }
  if (!facts.systemd) {
    noSystemd = true;
    problems.push(`the image ${image} has no systemd (${SYSTEMD_BINARIES.join(', ')}): nothing would start hvagent's unit`);
  }
  const want = manifest.arch.elfMachine;
  if (facts.archProbe) {
    const got = facts.archProbe.machine;
    if (got !== want) {
      const name = got === undefined ? 'not an ELF binary' : (ELF_MACHINES[got] ?? `ELF machine ${got}`);
      problems.push(`the image ${image} is for ${name} (${facts.archProbe.path}), the hvagent payload for ${manifest.arch.name}`);
    }
  } else if (facts.systemd === undefined) {
    problems.push(`the image ${image} has neither systemd nor /bin/sh to tell its architecture`);
  }
  if (!persistentStatePaths.includes('/etc/systemd')) {
    problems.push('/etc/systemd is not a persistent state path of this install: hvagent\'s unit and its wants link would not survive a reboot');
  }
  for (const u of facts.sameNameUnits) {
    problems.push(`the image ${image} already carries ${u}: ${u.startsWith('/etc/') ? 'Elemental copies it over the persistent /etc/systemd at every boot, replacing the installer\'s' : 'a unit of the same name that the installer\'s would shadow'}`);
  }
  return { problems, onlyNoSystemd: noSystemd && problems.length === 1 };
}

/** An image as a directory tree. */
export function dirImage(root: string): ImageReader {
  const abs = (p: string): string => path.join(root, p);
  return {
    describe: root,
    async entry(p) {
      const st = await lstat(abs(p)).catch(() => undefined);
      if (!st) return undefined;
      if (st.isSymbolicLink()) return { kind: 'symlink', target: await readlink(abs(p)) };
      return { kind: st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other' };
    },
    async head(p, n) {
      const fh = await open(abs(p), 'r');
      try {
        const buf = Buffer.alloc(n);
        const { bytesRead } = await fh.read(buf, 0, n, 0);
        return buf.subarray(0, bytesRead);
      } finally {
        await fh.close();
      }
    },
  };
}

/** Parses `unsquashfs -lls` output into image path → entry. Pure. */
export function parseSquashfsListing(text: string): Map<string, ImageEntry> {
  const out = new Map<string, ImageEntry>();
  for (const line of text.split('\n')) {
    const m = /^([dlcbps-])\S*\s+\S+\s+\S+\s+\d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}\s+squashfs-root(\/.*)?$/.exec(line);
    if (!m) continue;
    const rest = m[2] ?? '/';
    const kind: ImageEntryKind = m[1] === 'd' ? 'dir' : m[1] === '-' ? 'file' : m[1] === 'l' ? 'symlink' : 'other';
    if (kind === 'symlink') {
      const i = rest.indexOf(' -> ');
      out.set(rest.slice(0, i), { kind, target: rest.slice(i + 4) });
    } else out.set(rest, { kind });
  }
  return out;
}

/** An image as a squashfs file: listed once, files read with unsquashfs -cat. */
export async function squashfsImage(file: string): Promise<ImageReader> {
  const listing = parseSquashfsListing((await run('unsquashfs', ['-lls', '-no-progress', file], { timeoutMs: 600_000 })).stdout);
  return {
    describe: file,
    async entry(p) {
      return listing.get(p === '/' ? '/' : p.replace(/\/+$/, ''));
    },
    async head(p, n) {
      // Extract that one file (stdout of -cat would pass through a text decoder).
      const tmp = await mkdtemp(path.join(os.tmpdir(), 'hv-image-head-'));
      try {
        await run('unsquashfs', ['-no-progress', '-f', '-d', path.join(tmp, 'x'), file, p], { timeoutMs: 120_000 });
        return await dirImage(path.join(tmp, 'x')).head(p, n);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
  };
}

export async function imageReader(source: OsSource): Promise<ImageReader> {
  return source.kind === 'dir' ? dirImage(source.path) : squashfsImage(source.path);
}
