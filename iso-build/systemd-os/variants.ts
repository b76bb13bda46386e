/**
 * The systemd test OS's upgrade variants for the e2e `upgrade` stage (docs/e2e.md, docs/upgrade.md):
 * directory trees derived from the built image, each a hard-linked copy of its tree with a few
 * files replaced (unlinked first, so the shared tree is never written through a link):
 *
 *   v2  healthy: a new IMAGE_VERSION and agent settings with deadlines that fit a TCG boot
 *   v3  the management network never comes up: NetworkManager replaced by a process that does
 *       nothing (a drop-in in /usr/lib, which no persistent path carries back to v2), and a short
 *       network-online deadline (there is nothing to wait for)
 *   v4  the kernel panics: its initramfs is empty, so the kernel cannot mount a root
 *   v5  healthy again: the next upgrade after the fallbacks
 */
import { mkdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';

export type VariantName = 'v2' | 'v3' | 'v4' | 'v5';
export const VARIANTS: readonly VariantName[] = ['v2', 'v3', 'v4', 'v5'];

const agentSettings = (networkDeadline: string): string => `# hvinstall test OS upgrade variant: deadlines short enough for the e2e upgrade stage under TCG.
assessment:
  deadline: 8m
  pollInterval: 2s
guards:
  network-online:
    deadline: ${networkDeadline}
`;

/** hvagent's settings in the healthy variants: the gate and network-online deadlines a TCG boot can wait out. */
export const VARIANT_AGENT_SETTINGS = agentSettings('90s');

/**
 * v3's: its network never comes up, so network-online's deadline is only how long its attempt
 * waits for the verdict (long enough for the guard to try a few times). Not in a persistent path:
 * the fallback to v2 runs with v2's settings.
 */
export const V3_AGENT_SETTINGS = agentSettings('30s');

export const V3_NETWORKMANAGER_DROPIN = `# hvinstall test OS v3: the management network never comes up (NetworkManager does nothing).
[Service]
Type=simple
ExecStart=
ExecStart=/bin/sh -c 'echo "hvtest v3: NetworkManager does nothing in this image"; exec sleep infinity'
`;

/** The files a variant replaces, by path in the tree, given the base image's os-release. Pure. */
export function variantFiles(name: VariantName, osRelease: string): Record<string, string | Buffer> {
  const version = /^IMAGE_VERSION=(.*)$/m.exec(osRelease)?.[1] ?? 'base';
  const files: Record<string, string | Buffer> = {
    'usr/lib/os-release': osRelease.replace(/^IMAGE_VERSION=.*$/m, `IMAGE_VERSION=${version}-${name}`),
    'etc/hvagent/config.yaml': name === 'v3' ? V3_AGENT_SETTINGS : VARIANT_AGENT_SETTINGS,
  };
  if (name === 'v3') files['usr/lib/systemd/system/NetworkManager.service.d/hvtest-v3.conf'] = V3_NETWORKMANAGER_DROPIN;
  return files;
}

/** An empty newc cpio archive, gzipped: an initramfs without /init, on which the kernel panics. */
async function emptyInitramfs(work: string): Promise<Buffer> {
  const out = path.join(work, 'empty-initrd');
  await run('sh', ['-c', 'cpio -o -H newc --quiet < /dev/null | gzip -n > "$1"', 'sh', out]);
  return readFile(out);
}

/** Unpacks the image once into `dir/base`, then makes each variant beside it; returns their paths. */
export async function buildVariants(squashfs: string, dir: string): Promise<Record<VariantName, string>> {
  const base = path.join(dir, 'base');
  if (!(await stat(path.join(base, 'usr/lib/os-release')).catch(() => undefined))) {
    await rm(base, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    await run('unsquashfs', ['-no-progress', '-quiet', '-d', base, squashfs], { timeoutMs: 30 * 60_000 });
  }
  const osRelease = await readFile(path.join(base, 'usr/lib/os-release'), 'utf8');
  const out = {} as Record<VariantName, string>;
  for (const name of VARIANTS) {
    const tree = path.join(dir, name);
    await rm(tree, { recursive: true, force: true });
    await run('cp', ['-al', base, tree], { timeoutMs: 10 * 60_000 });
    const files = variantFiles(name, osRelease);
    if (name === 'v4') files['boot/initrd'] = await emptyInitramfs(dir);
    for (const [p, content] of Object.entries(files)) {
      const f = path.join(tree, p);
      await mkdir(path.dirname(f), { recursive: true });
      await unlink(f).catch(() => undefined);
      await writeFile(f, content);
    }
    out[name] = tree;
  }
  return out;
}
