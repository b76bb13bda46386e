/**
 * The integration project's global setup: the host's mounts shared while the tests run, as systemd
 * makes them at boot on any ordinary machine (this host boots without it: its root is private).
 *
 * Why: a process that enters a mount namespace of its own (`ip netns exec`, the tests' `unshare`
 * wrappers, systemd-nspawn) gets a copy of every mount there is at that moment, other test files'
 * partitions included. With private mounts nothing ends those copies: when the file that made a
 * mount unmounts it, the copy in the long-lived namespace (a dnsmasq, a console session) still
 * holds the filesystem, and that file's next install finds its own partition held and refuses to
 * touch it. With shared mounts, and namespaces that are slaves (`ip netns exec` makes itself one,
 * the tests' `unshare` wrappers ask for `--propagation slave`), the unmount reaches every copy.
 *
 * Undone at teardown: every mount private again (recursively: a mount stacked under another has no
 * path of its own), then the ones that were shared before (/run/netns, which `ip netns` shares) shared.
 */
import { readFileSync } from 'node:fs';
import { run } from '../../lib/exec.js';

interface Mount {
  target: string;
  shared: boolean;
}

function mounts(): Mount[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const fields = line.split(' ');
      const optional = fields.slice(6, fields.indexOf('-'));
      return { target: fields[4]!.replace(/\\040/g, ' '), shared: optional.some((f) => f.startsWith('shared:')) };
    });
}

export default async function shareMounts(): Promise<(() => Promise<void>) | undefined> {
  if (process.getuid?.() !== 0) return undefined; // the integration files say themselves that they need root
  const before = mounts();
  if (before.find((m) => m.target === '/')?.shared) return undefined; // shared already, as systemd leaves it
  await run('mount', ['--make-rshared', '/'], { timeoutMs: 30_000 });
  return async () => {
    await run('mount', ['--make-rprivate', '/'], { timeoutMs: 30_000 });
    const now = new Set(mounts().map((m) => m.target));
    for (const m of before) if (m.shared && now.has(m.target)) await run('mount', ['--make-shared', m.target], { allowFailure: true, timeoutMs: 30_000 });
  };
}
