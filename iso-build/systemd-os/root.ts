/**
 * The Debian root of the systemd test OS, built with mmdebstrap and kept in the cache (cache.ts)
 * under the key of its package versions (packages.ts). Downloaded .debs are kept in the cache too,
 * so a rebuild after a version change fetches only what changed.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { publishEntry, readEntry } from './cache.js';
import { APT_LISTS, DPKG_OPTIONS, OS_PACKAGES, SOURCE_DATE_EPOCH, SUITE, VARIANT, hostAptSources, resolveVersions, rootKey } from './packages.js';

export interface BaseRoot {
  key: string;
  /** The root tree (read it, never write it: it is shared by every build of the image). */
  tree: string;
  manifest: RootManifest;
  /** Seconds the build took, or undefined when the cache had it. */
  builtInSec?: number;
}

export interface RootManifest {
  key: string;
  suite: string;
  variant: string;
  packages: string[];
  /** Every installed package and its version, read back from the root's dpkg database. */
  installed: Record<string, string>;
  kernelVersion: string;
  builtAt: string;
}

const sh = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** The mmdebstrap command line: pure, so tests can read it. */
export function mmdebstrapArgs(o: { target: string; sources: string[]; debCache: string; packages?: readonly string[] }): string[] {
  const packages = o.packages ?? OS_PACKAGES;
  const debs = sh(o.debCache);
  return [
    `--variant=${VARIANT}`,
    `--include=${packages.join(',')}`,
    ...DPKG_OPTIONS.map((d) => `--dpkgopt=${d}`),
    // The host's package lists, so what is installed is what resolveVersions predicted.
    '--skip=update',
    `--setup-hook=mkdir -p "$1${APT_LISTS}" && find ${APT_LISTS} -maxdepth 1 -type f ! -name lock -exec cp -p -t "$1${APT_LISTS}/" {} +`,
    // .debs from earlier builds (apt checks each against the lists' hashes before using it).
    '--skip=download/empty',
    `--setup-hook=mkdir -p "$1/var/cache/apt/archives" && find ${debs} -maxdepth 1 -name '*.deb' -exec cp -p -t "$1/var/cache/apt/archives/" {} +`,
    // The image carries its own initramfs: Debian's initramfs-tools must not build one.
    `--essential-hook=chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs && printf '#!/bin/sh\\nexit 0\\n' > "$1/usr/sbin/update-initramfs" && chmod 755 "$1/usr/sbin/update-initramfs"`,
    `--customize-hook=rm -f "$1/usr/sbin/update-initramfs" && chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs`,
    // New .debs back into the cache, each renamed into place whole.
    `--customize-hook=for f in "$1"/var/cache/apt/archives/*.deb; do [ -e "$f" ] || continue; b=$(basename "$f"); [ -e ${debs}/"$b" ] || { cp -p "$f" ${debs}/".$b.tmp" && mv -f ${debs}/".$b.tmp" ${debs}/"$b"; }; done`,
    // Nothing host- or build-specific stays: host keys are made on the node's first boot, the
    // machine id by the initramfs, resolv.conf by NetworkManager.
    `--customize-hook=rm -f "$1"/etc/ssh/ssh_host_* "$1/etc/resolv.conf" "$1/initrd.img" "$1/initrd.img.old" && printf 'hvtest\\n' > "$1/etc/hostname" && : > "$1/etc/machine-id"`,
    SUITE,
    o.target,
    ...o.sources,
  ];
}

/** Returns the cached root for the current package versions, building it when there is none. */
export async function ensureBaseRoot(cacheDir: string, log: (s: string) => void = () => undefined): Promise<BaseRoot> {
  const dir = path.join(cacheDir, 'systemd-os');
  await mkdir(dir, { recursive: true });
  const sources = await hostAptSources();
  if (sources.length === 0) throw new HvError('the host has no apt sources (/etc/apt/sources.list, sources.list.d)', { where: 'iso-build/systemd-os', hint: 'configure apt, then apt-get update', exitCode: ExitCode.usage });
  const sourcesText = (await Promise.all(sources.map((s) => readFile(s, 'utf8')))).join('\n');
  const versions = await resolveVersions(dir);
  const key = rootKey({ packages: OS_PACKAGES, versions, sources: sourcesText });
  const final = path.join(dir, `root-${key}`);
  const cached = await readEntry<RootManifest>(final);
  if (cached) {
    return { key, tree: path.join(final, 'tree'), manifest: cached };
  }

  const debCache = path.join(dir, 'debs');
  await mkdir(debCache, { recursive: true });
  const work = await mkdtemp(path.join(dir, `.root-${key}.`));
  const t0 = Date.now();
  try {
    const tree = path.join(work, 'tree');
    await mkdir(tree);
    log(`building the Debian root ${key} (mmdebstrap ${SUITE} ${VARIANT}, ${OS_PACKAGES.length} packages and their dependencies)`);
    const r = await run('mmdebstrap', mmdebstrapArgs({ target: tree, sources, debCache }), {
      allowFailure: true,
      timeoutMs: 45 * 60_000,
      env: { ...process.env, SOURCE_DATE_EPOCH: String(SOURCE_DATE_EPOCH), LC_ALL: 'C.UTF-8' },
    });
    if (r.exitCode !== 0) {
      throw new HvError(`mmdebstrap failed (exit ${r.exitCode})`, {
        where: r.command,
        hint: `${r.stderr.trim().split('\n').slice(-4).join(' | ')}; a 404 means the host's package lists are older than the mirror: run apt-get update`,
        exitCode: ExitCode.usage,
      });
    }
    const installed = await installedPackages(tree);
    const drift = Object.entries(versions).filter(([p, v]) => installed[p] !== v).map(([p, v]) => `${p} ${installed[p] ?? 'missing'} (expected ${v})`);
    if (drift.length > 0) {
      throw new HvError(`mmdebstrap installed other versions than apt resolved: ${drift.slice(0, 5).join(', ')}`, {
        where: 'iso-build/systemd-os: root build',
        hint: 'the cache key would not describe the root; check that mmdebstrap used the host lists (--skip=update)',
        exitCode: ExitCode.usage,
      });
    }
    const kernels = await readdir(path.join(tree, 'lib/modules'));
    if (kernels.length !== 1) throw new HvError(`expected one kernel in the root, found ${kernels.join(', ') || 'none'}`, { where: 'iso-build/systemd-os', exitCode: ExitCode.usage });
    const manifest: RootManifest = { key, suite: SUITE, variant: VARIANT, packages: [...OS_PACKAGES], installed, kernelVersion: kernels[0]!, builtAt: new Date().toISOString() };
    await pruneDebs(debCache, installed);
    const published = await publishEntry(work, final, manifest);
    return { key, tree: path.join(final, 'tree'), manifest: published, builtInSec: Math.round((Date.now() - t0) / 1000) };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

export async function installedPackages(tree: string): Promise<Record<string, string>> {
  const r = await run('dpkg-query', [`--admindir=${path.join(tree, 'var/lib/dpkg')}`, '-W', '-f', '${Package} ${Version}\\n']);
  const out: Record<string, string> = {};
  for (const line of r.stdout.split('\n')) {
    const [p, v] = line.trim().split(' ');
    if (p && v) out[p] = v;
  }
  return out;
}

/** Removes cached .debs that no longer match an installed version (file names encode ':' as %3a). */
async function pruneDebs(debCache: string, installed: Record<string, string>): Promise<void> {
  const keep = new Set(Object.entries(installed).map(([p, v]) => `${p}_${v.replace(/:/g, '%3a')}`));
  for (const f of await readdir(debCache)) {
    if (f.startsWith('.') && f.endsWith('.tmp')) {
      // a copy a build that died left (an hour is far longer than any copy takes)
      const s = await stat(path.join(debCache, f)).catch(() => undefined);
      if (s && s.mtimeMs < Date.now() - 3600_000) await rm(path.join(debCache, f), { force: true });
      continue;
    }
    const m = /^(.+_.+)_[^_]+\.deb$/.exec(f);
    if (m && !keep.has(m[1]!)) await rm(path.join(debCache, f), { force: true });
  }
}
