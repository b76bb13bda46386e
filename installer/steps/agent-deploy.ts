/**
 * Puts an hvagent payload onto a COS_PERSISTENT root and enables it (node/payload-layout.ts has the
 * layout). The order is what makes every crash safe:
 *   1. the free space is checked before anything is written;
 *   2. the release is filled under lib/hvagent/.staging/<id> (resumable: complete files are kept,
 *      temp files of a killed run removed); every file is read back for its sha256 against the
 *      manifest while it is fsynced, and gets its name only once both are done;
 *   3. the staging directory becomes releases/<id> by one rename;
 *   4. `current` is switched to it by one rename: before it the old agent (or none) is whole, after
 *      it the new one — never a mix of binary, libraries and unit;
 *   5. only then the launcher, the man page and completion links under /usr/local/share, and the
 *      /etc/systemd links of each unit (hvagent.service, hvagent-console.service: the unit and its
 *      wants link) are made (they never change between releases), and other releases are removed.
 * A failure before step 4 leaves no enable link behind unless `current` is a complete release: an
 * enable link pointing to a missing or partial agent is removed.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readFile, readdir, readlink, rename, rm, statfs, symlink } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fsyncDir } from '../../lib/atomic-write.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import {
  AGENT_HOME,
  LAUNCHER,
  LAUNCHER_TARGET,
  MANIFEST_FILE,
  SHARE_FILES,
  UNIT_NAMES,
  payloadSize,
  releaseId,
  shareLinkTarget,
  shareNodePath,
  unitLinkTarget,
  unitNodePath,
  wantsNodePath,
  type PayloadManifest,
  type ShareFile,
  type UnitName,
} from '../../node/payload-layout.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { copyBundle, SPACE_HEADROOM_BYTES } from './bundle-copy.js';
import { persistentLocation } from '../../node/layout.js';

/** COS_PERSISTENT-relative paths of everything the agent occupies. */
export interface AgentPaths {
  home: string;
  releases: string;
  staging: string;
  current: string;
  launcher: string;
  /** The man page and completion links (COS_PERSISTENT paths) into the release. */
  share: Array<{ file: ShareFile; link: string }>;
  /** Per unit: its link in /etc/systemd/system and its enable link, as COS_PERSISTENT paths. */
  units: Array<{ name: UnitName; unit: string; wants: string }>;
}

const underUsrLocal = (p: string): string => p.slice('/usr/local/'.length);

/** Where everything goes, given the install's persistent state paths. Pure. */
export function agentPaths(persistentStatePaths: string[]): AgentPaths {
  const units = UNIT_NAMES.map((name) => ({ name, unit: persistentLocation(unitNodePath(name), persistentStatePaths), wants: persistentLocation(wantsNodePath(name), persistentStatePaths) }));
  if (units.some((u) => !u.unit || !u.wants)) {
    throw new HvError('/etc/systemd is not a persistent state path of this install: hvagent\'s unit would not survive a reboot', {
      where: 'agent',
      hint: 'keep /etc/systemd in the persistent state paths (it is one by default), or install with --agent none',
      exitCode: ExitCode.installFailed,
    });
  }
  const home = underUsrLocal(AGENT_HOME);
  return {
    home,
    releases: `${home}/releases`,
    staging: `${home}/.staging`,
    current: `${home}/current`,
    launcher: underUsrLocal(LAUNCHER),
    share: SHARE_FILES.map((file) => ({ file, link: underUsrLocal(shareNodePath(file)) })),
    units: units.map((u) => ({ name: u.name, unit: u.unit!, wants: u.wants! })),
  };
}

/** The plan's view: what the agent step writes on COS_PERSISTENT. Pure. */
export function agentPlannedFiles(manifest: PayloadManifest, persistentStatePaths: string[]): Array<{ on: 'COS_PERSISTENT'; path: string; mode: number; what: string }> {
  const p = agentPaths(persistentStatePaths);
  const release = `${p.releases}/${releaseId(manifest)}`;
  const s = payloadSize(manifest);
  return [
    ...manifest.files.map((f) => ({ on: 'COS_PERSISTENT' as const, path: `${release}/${f.path}`, mode: f.mode, what: `hvagent payload (${formatBytes(f.size)})` })),
    { on: 'COS_PERSISTENT', path: `${release}/${MANIFEST_FILE}`, mode: 0o644, what: `hvagent payload manifest (${s.files} files, ${formatBytes(s.bytes)})` },
    { on: 'COS_PERSISTENT', path: p.current, mode: 0o777, what: `symlink -> releases/${releaseId(manifest)}` },
    { on: 'COS_PERSISTENT', path: p.launcher, mode: 0o777, what: `symlink -> ${LAUNCHER_TARGET} (${LAUNCHER})` },
    ...p.share.map((f) => ({ on: 'COS_PERSISTENT' as const, path: f.link, mode: 0o777, what: `symlink -> ${shareLinkTarget(f.file)} (${shareNodePath(f.file)})` })),
    ...p.units.flatMap((u) => [
      { on: 'COS_PERSISTENT' as const, path: u.unit, mode: 0o777, what: `symlink -> ${unitLinkTarget(u.name)} (${unitNodePath(u.name)})` },
      { on: 'COS_PERSISTENT' as const, path: u.wants, mode: 0o777, what: `symlink -> ${unitNodePath(u.name)} (enabled: ${wantsNodePath(u.name)})` },
    ]),
  ];
}

/** Bytes to write for a release, in whole blocks, plus the headroom the node needs. Pure. */
export function agentSpaceProblem(manifest: PayloadManifest, fs: { bsize: number; bavail: number }, alreadyThere: number, where: string): HvError | undefined {
  const bsize = Math.max(1, fs.bsize);
  const need = manifest.files.reduce((n, f) => n + Math.ceil(f.size / bsize) * bsize, 0) + 8 * bsize - alreadyThere;
  const free = fs.bavail * bsize;
  if (need + SPACE_HEADROOM_BYTES <= free) return undefined;
  return new HvError(
    `hvagent does not fit on COS_PERSISTENT: ${formatBytes(Math.max(0, need))} to write (${manifest.files.length} files) plus ${formatBytes(SPACE_HEADROOM_BYTES)} headroom, ${formatBytes(free)} free; nothing was enabled`,
    { where, hint: 'make COS_PERSISTENT larger (install.persistent_partition_size) or free it, or install without the agent (--agent none)', exitCode: ExitCode.installFailed },
  );
}

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 1024 * 1024 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Why a file of a release does not hold what the manifest says (read back for its sha256), or undefined; files the manifest does not list have nothing to hold. */
async function payloadFileProblem(manifest: PayloadManifest, rel: string, file: string): Promise<string | undefined> {
  const f = manifest.files.find((x) => x.path === rel);
  if (f && (await sha256File(file)) !== f.sha256) return `${f.path} does not match its sha256 in the manifest`;
  return undefined;
}

/** Why the release directory does not hold exactly the manifest's files, or undefined. */
export async function releaseProblem(dir: string, manifest: PayloadManifest, opts: { checksums?: boolean } = {}): Promise<string | undefined> {
  const onDisk = await readFile(path.join(dir, MANIFEST_FILE), 'utf8').then((t) => JSON.parse(t) as PayloadManifest, () => undefined);
  if (!onDisk) return `${dir} has no readable ${MANIFEST_FILE}`;
  if (onDisk.digest !== manifest.digest) return `${dir} holds hvagent ${releaseId(onDisk)}, not ${releaseId(manifest)}`;
  for (const f of manifest.files) {
    const full = path.join(dir, f.path);
    const st = await lstat(full).catch(() => undefined);
    if (!st?.isFile()) return `${f.path} is missing`;
    if (st.size !== f.size) return `${f.path} is ${st.size} bytes, the manifest says ${f.size}`;
    if ((st.mode & 0o7777) !== f.mode) return `${f.path} has mode ${(st.mode & 0o7777).toString(8)}, the manifest says ${f.mode.toString(8)}`;
    if (opts.checksums && (await sha256File(full)) !== f.sha256) return `${f.path} does not match its sha256 in the manifest`;
  }
  return undefined;
}

/** The release `current` points to, when it is a complete one (sizes and modes; checksums on request). */
export async function currentRelease(root: string, p: AgentPaths): Promise<{ id: string; manifest: PayloadManifest } | undefined> {
  const target = await readlink(path.join(root, p.current)).catch(() => undefined);
  if (!target || !/^releases\/[0-9a-f]{16}$/.test(target)) return undefined;
  const dir = path.join(root, p.home, target);
  const manifest = await readFile(path.join(dir, MANIFEST_FILE), 'utf8').then((t) => JSON.parse(t) as PayloadManifest, () => undefined);
  if (!manifest || releaseId(manifest) !== path.basename(target)) return undefined;
  return (await releaseProblem(dir, manifest)) ? undefined : { id: path.basename(target), manifest };
}

/**
 * Makes `link` a symlink to `target`, atomically (temp link + rename); a directory in the way goes.
 * The directory is fsynced unless `sync` is false (the caller fsyncs it with others).
 */
async function ensureSymlink(link: string, target: string, sync = true): Promise<boolean> {
  if ((await readlink(link).catch(() => undefined)) === target) return false;
  await mkdir(path.dirname(link), { recursive: true, mode: 0o755 });
  const st = await lstat(link).catch(() => undefined);
  if (st?.isDirectory()) await rm(link, { recursive: true, force: true });
  const tmp = path.join(path.dirname(link), `.${path.basename(link)}.${randomBytes(6).toString('hex')}.hvagent-tmp`);
  await symlink(target, tmp);
  await rename(tmp, link);
  if (sync) await fsyncDir(path.dirname(link));
  return true;
}

async function removeLinks(root: string, p: AgentPaths): Promise<string[]> {
  const removed: string[] = [];
  // Enable links first: an enabled name never points to a unit link already gone.
  for (const rel of [...p.units.map((u) => u.wants), ...p.units.map((u) => u.unit)]) {
    if (await lstat(path.join(root, rel)).catch(() => undefined)) {
      await rm(path.join(root, rel), { force: true });
      await fsyncDir(path.dirname(path.join(root, rel)));
      removed.push(rel);
    }
  }
  return removed;
}

export interface DeployAgentOptions {
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
  statfs?: (p: string) => Promise<{ bsize: number; bavail: number }>;
}

export interface DeployAgentResult {
  release: string;
  digest: string;
  version: string;
  files: number;
  bytes: number;
  /** Bytes written in this run (0 when the release was complete already). */
  copiedBytes: number;
  /** What `current` pointed to before (another release id), if anything. */
  replaced?: string;
  removed: string[];
  /** The units linked and enabled. */
  enabled: UnitName[];
}

export async function deployAgent(root: string, payloadDir: string, manifest: PayloadManifest, persistentStatePaths: string[], opts: DeployAgentOptions = {}): Promise<DeployAgentResult> {
  const p = agentPaths(persistentStatePaths);
  const id = releaseId(manifest);
  const release = path.join(root, p.releases, id);
  const before = await currentRelease(root, p);
  // An enable link whose agent is not whole (a crash of another tool, a hand edit) goes first.
  if (!before) await removeLinks(root, p);

  const copiedBytes = (await releaseProblem(release, manifest, { checksums: true })) ? await stageRelease(root, p, manifest, payloadDir, opts) : 0;

  // The one moment the agent changes: durable before anything refers to it.
  await ensureSymlink(path.join(root, p.current), `releases/${id}`);
  // The links into it, made in this order and fsynced together (on ext4 a later link is never
  // durable without the earlier ones: the journal commits them in order).
  const linked = new Set<string>();
  const link = async (rel: string, target: string): Promise<void> => {
    if (await ensureSymlink(path.join(root, rel), target, false)) linked.add(path.dirname(path.join(root, rel)));
  };
  await link(p.launcher, LAUNCHER_TARGET);
  for (const f of p.share) await link(f.link, shareLinkTarget(f.file));
  // Each unit's link before its enable link, hvagent.service before the console that follows it.
  for (const u of p.units) {
    await link(u.unit, unitLinkTarget(u.name));
    await link(u.wants, unitNodePath(u.name));
  }

  const removed: string[] = [];
  for (const name of await readdir(path.join(root, p.releases)).catch(() => [] as string[])) {
    if (name === id) continue;
    await rm(path.join(root, p.releases, name), { recursive: true, force: true });
    removed.push(`${p.releases}/${name}`);
  }
  // What a killed copy of another payload left half-staged.
  await rm(path.join(root, p.staging), { recursive: true, force: true });
  await Promise.all([...linked, path.join(root, p.releases), path.join(root, p.home)].map(fsyncDir));
  const size = payloadSize(manifest);
  return {
    release: `${p.releases}/${id}`,
    digest: manifest.digest,
    version: manifest.version,
    files: size.files,
    bytes: size.bytes,
    copiedBytes,
    ...(before && before.id !== id ? { replaced: before.id } : {}),
    removed,
    enabled: p.units.map((u) => u.name),
  };
}

/**
 * Fills the release under .staging (each file's sha256 read back before it gets its name), checks
 * it whole, and renames it to releases/<id>; returns the bytes copied. Nothing is left staged after a failure.
 */
async function stageRelease(root: string, p: AgentPaths, manifest: PayloadManifest, payloadDir: string, opts: DeployAgentOptions): Promise<number> {
  const id = releaseId(manifest);
  const release = path.join(root, p.releases, id);
  const staging = path.join(root, p.staging, id);
  const fs = await (opts.statfs ?? statfs)(root);
  const partial = await lstat(staging).then(
    () => copyable(staging, manifest),
    () => 0,
  );
  const space = agentSpaceProblem(manifest, fs, partial, root);
  if (space) throw space;
  try {
    await mkdir(path.join(root, p.releases), { recursive: true, mode: 0o755 });
    const damaged = (bad: string): HvError =>
      new HvError(`the copy of hvagent ${id} does not match its manifest: ${bad}`, { where: payloadDir, hint: 'the payload on the install medium is damaged: rebuild it (make build) or use another medium', exitCode: ExitCode.installFailed });
    const r = await copyBundle(payloadDir, staging, {
      signal: opts.signal,
      onProgress: opts.onProgress,
      statfs: opts.statfs,
      label: { what: 'hvagent', hint: 'make COS_PERSISTENT larger (install.persistent_partition_size), or install without the agent (--agent none)' },
      // Every byte read back for its sha256 while its file is fsynced and the next one copied.
      check: async (rel, file) => {
        const bad = await payloadFileProblem(manifest, rel, file);
        if (bad) throw damaged(bad);
      },
    });
    // Each file's sha256 was checked above: here that the release is whole (manifest, sizes, modes).
    const bad = await releaseProblem(staging, manifest);
    if (bad) throw damaged(bad);
    await rm(release, { recursive: true, force: true });
    await rename(staging, release);
    await fsyncDir(path.join(root, p.releases));
    return r.copiedBytes;
  } catch (err) {
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if ((err as NodeJS.ErrnoException).code === 'ENOSPC') {
      throw new HvError(`COS_PERSISTENT filled up while hvagent ${id} was being copied (${formatBytes(payloadSize(manifest).bytes)}); the partial copy was removed and nothing was enabled`, {
        where: root,
        hint: 'free or enlarge COS_PERSISTENT (install.persistent_partition_size), or install without the agent (--agent none)',
        exitCode: ExitCode.installFailed,
      });
    }
    throw err;
  }
}

/** Bytes of the manifest's files already complete in a staging directory (kept by a resumed copy). */
async function copyable(staging: string, manifest: PayloadManifest): Promise<number> {
  let n = 0;
  for (const f of manifest.files) {
    const st = await lstat(path.join(staging, f.path)).catch(() => undefined);
    if (st?.isFile() && st.size === f.size) n += f.size;
  }
  return n;
}

/** Removes the agent entirely (`--agent none` over an earlier run's agent): links first, so nothing enabled points nowhere. */
export async function removeAgent(root: string, persistentStatePaths: string[]): Promise<string[]> {
  const p = agentPaths(persistentStatePaths);
  const removed = await removeLinks(root, p);
  for (const rel of [p.launcher, ...p.share.map((f) => f.link), p.home]) {
    if (await lstat(path.join(root, rel)).catch(() => undefined)) {
      await rm(path.join(root, rel), { recursive: true, force: true });
      removed.push(rel);
    }
  }
  if (removed.length) await fsyncDir(path.join(root, path.dirname(p.launcher)));
  return removed;
}

/** Why what is on COS_PERSISTENT is not this agent, installed and enabled, or undefined. Checksums every file. */
export async function installedAgentProblem(root: string, manifest: PayloadManifest, persistentStatePaths: string[]): Promise<string | undefined> {
  const p = agentPaths(persistentStatePaths);
  const id = releaseId(manifest);
  if ((await readlink(path.join(root, p.current)).catch(() => undefined)) !== `releases/${id}`) return `${p.current} does not point to releases/${id}`;
  const bad = await releaseProblem(path.join(root, p.releases, id), manifest, { checksums: true });
  if (bad) return `the installed hvagent ${id}: ${bad}`;
  for (const [rel, target] of [
    [p.launcher, LAUNCHER_TARGET],
    ...p.share.map((f) => [f.link, shareLinkTarget(f.file)] as const),
    ...p.units.flatMap((u) => [
      [u.unit, unitLinkTarget(u.name)],
      [u.wants, unitNodePath(u.name)],
    ]),
  ] as const) {
    if ((await readlink(path.join(root, rel)).catch(() => undefined)) !== target) return `${rel} is not a link to ${target}`;
  }
  return undefined;
}
