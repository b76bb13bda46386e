/**
 * What the systemd test OS is built from: the Debian packages, the mmdebstrap options, and the
 * versions apt resolves for them, which key the cache of the built root. mmdebstrap runs on the
 * host's own apt sources and, with `--skip=update`, on the host's downloaded package lists, so the
 * versions `apt-get --simulate` predicts from those lists are exactly the ones it installs.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import { ExitCode, HvError } from '../../lib/errors.js';

export const SUITE = 'bookworm';
export const VARIANT = 'minbase';

/** The test OS, beyond Debian's essential set. */
export const OS_PACKAGES = [
  // the init system and what a node's boot needs
  'systemd-sysv', 'udev', 'kmod', 'util-linux', 'e2fsprogs', 'rsync', 'systemd-timesyncd',
  // what Harvester's guards and bootstrap talk to
  'network-manager', 'iproute2', 'containerd', 'openssh-server',
  // the boot report reads iproute2's and hvagent's JSON with it
  'jq',
  // the rke2 stand-in (test/fixtures/rke2-standin, a Node script) and the TLS files its unit makes
  // at its first start, as RKE2 makes its own
  'nodejs', 'openssl',
  // hvagent's image preload decompresses the bundle's .tar.zst archives with it (Harvester's image has it)
  'zstd',
  // Debian's signed kernel and its modules
  'linux-image-amd64',
  // the Secure Boot chain an Elemental install copies from the image (EFI binaries and grub modules)
  'shim-signed', 'grub-efi-amd64-signed', 'grub-efi-amd64-bin',
] as const;

/** Documentation, manuals and translations are left out: a node never reads them. */
export const DPKG_OPTIONS = [
  'path-exclude=/usr/share/man/*',
  'path-exclude=/usr/share/info/*',
  'path-exclude=/usr/share/locale/*',
  'path-exclude=/usr/share/doc/*',
  'path-include=/usr/share/doc/*/copyright',
] as const;

/** Fixed clock for mmdebstrap and everything built from its tree (2023-11-14). */
export const SOURCE_DATE_EPOCH = 1_700_000_000;

export const APT_LISTS = '/var/lib/apt/lists';

/** The host's apt source files, as mmdebstrap mirror arguments (existing files are pasted as sources). */
export async function hostAptSources(root = '/'): Promise<string[]> {
  const out: string[] = [];
  const main = path.join(root, 'etc/apt/sources.list');
  if ((await stat(main).catch(() => undefined))?.isFile()) out.push(main);
  const dir = path.join(root, 'etc/apt/sources.list.d');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.list') || n.endsWith('.sources')).sort();
  for (const n of names) out.push(path.join(dir, n));
  return out;
}

/**
 * The patterns mmdebstrap's minbase variant installs beside the packages asked for: the
 * Essential set and the other Priority: required packages of the suite (mmdebstrap 1.3 selects
 * them with these apt patterns), plus apt.
 */
export function baseSelection(suite = SUITE, arch = 'amd64'): string[] {
  const narrow = `?or(?archive(^${suite}$),?codename(^${suite}$)),?architecture(${arch})`;
  return [`?narrow(${narrow},?essential)`, `?narrow(${narrow},?and(?priority(required),?not(?essential)))`, 'apt'];
}

/** `Inst name (version ...)` lines of `apt-get --simulate install` → name → version. Pure. */
export function parseSimulatedInstall(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) /.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/**
 * A digest of the host's package lists (names, sizes, mtimes): when it is unchanged, so is what apt
 * resolves, and the last resolution can be reused without running apt.
 */
export async function aptListsFingerprint(listsDir = APT_LISTS): Promise<string> {
  const h = createHash('sha256');
  const names = (await readdir(listsDir).catch(() => [] as string[])).filter((n) => n !== 'lock' && n !== 'partial' && n !== 'auxfiles').sort();
  if (names.length === 0) {
    throw new HvError(`no apt package lists in ${listsDir}`, {
      where: 'iso-build/systemd-os: package versions',
      hint: 'run apt-get update',
      exitCode: ExitCode.usage,
    });
  }
  for (const n of names) {
    const s = await stat(path.join(listsDir, n));
    h.update(`${n}\0${s.size}\0${s.mtimeMs}\n`);
  }
  return h.digest('hex');
}

/**
 * The version of every package the test OS will hold, as apt resolves it from the host's lists
 * (an empty dpkg status, so nothing counts as installed). Memoised under cacheDir by the lists'
 * fingerprint and the package set.
 */
export async function resolveVersions(cacheDir: string, packages: readonly string[] = OS_PACKAGES): Promise<Record<string, string>> {
  const selection = [...baseSelection(), ...packages];
  const memoKey = createHash('sha256').update(JSON.stringify({ lists: await aptListsFingerprint(), selection })).digest('hex').slice(0, 32);
  const memo = path.join(cacheDir, `versions-${memoKey}.json`);
  const cached = await readFile(memo, 'utf8').then((t) => JSON.parse(t) as Record<string, string>, () => undefined);
  if (cached) return cached;
  await mkdir(cacheDir, { recursive: true });
  const emptyStatus = path.join(cacheDir, '.empty-dpkg-status');
  await writeFile(emptyStatus, '');
  const r = await run(
    'apt-get',
    ['--simulate', '-o', `Dir::State::status=${emptyStatus}`, '-o', 'APT::Install-Recommends=false', '-o', 'APT::Install-Suggests=false', 'install', ...selection],
    { allowFailure: true, timeoutMs: 120_000, env: { ...process.env, LC_ALL: 'C' } },
  );
  const versions = parseSimulatedInstall(r.stdout);
  const missing = packages.filter((p) => !(p in versions));
  if (r.exitCode !== 0 || missing.length > 0) {
    throw new HvError(`apt cannot resolve the test OS packages${missing.length ? ` (${missing.join(', ')})` : ''}`, {
      where: `iso-build/systemd-os: ${r.command}`,
      hint: `${r.stderr.trim().split('\n').slice(-3).join(' ') || 'see the apt output'}; run apt-get update`,
      exitCode: ExitCode.usage,
    });
  }
  await writeFile(memo, JSON.stringify(versions, null, 1) + '\n');
  return versions;
}

/** Bumped when the way the root is built changes in a way the options below do not show. */
export const ROOT_RECIPE = 1;

/** The cache key of the mmdebstrap root: packages, options, sources and every resolved version. */
export function rootKey(inputs: { packages: readonly string[]; versions: Record<string, string>; sources: string }): string {
  const versions = Object.keys(inputs.versions).sort().map((k) => `${k}=${inputs.versions[k]}`);
  return createHash('sha256')
    .update(JSON.stringify({ recipe: ROOT_RECIPE, suite: SUITE, variant: VARIANT, dpkg: DPKG_OPTIONS, epoch: SOURCE_DATE_EPOCH, packages: [...inputs.packages].sort(), sources: inputs.sources, versions }))
    .digest('hex')
    .slice(0, 24);
}
