/**
 * chrony for the time-sync tests, without installing it on this machine: the Debian package
 * conflicts with systemd-timesyncd (installing it would remove that), so it is fetched once with
 * `apt-get download` into $HV_CHRONY_CACHE (default /var/cache/hvinstall/chrony) and unpacked
 * there. Both daemons run with -x (never touch the clock: it is this machine's, shared by
 * everybody) and with their own config, command socket, pid and drift files in the test's dir.
 */
import { chmod, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { run } from '../../../../lib/exec.js';

export const CHRONY_CACHE = process.env.HV_CHRONY_CACHE ?? '/var/cache/hvinstall/chrony';

export interface Chrony {
  chronyd: string;
  chronyc: string;
}

export async function fetchChrony(cache = CHRONY_CACHE): Promise<Chrony> {
  const root = path.join(cache, 'root');
  const found = { chronyd: path.join(root, 'usr/sbin/chronyd'), chronyc: path.join(root, 'usr/bin/chronyc') };
  if (existsSync(found.chronyd) && existsSync(found.chronyc)) return found;
  await mkdir(cache, { recursive: true });
  let deb = (await readdir(cache)).find((f) => /^chrony_.*\.deb$/.test(f));
  if (!deb) {
    await run('apt-get', ['download', 'chrony'], { cwd: cache, timeoutMs: 300_000 });
    deb = (await readdir(cache)).find((f) => /^chrony_.*\.deb$/.test(f));
    if (!deb) throw new Error(`apt-get download chrony left no .deb in ${cache}`);
  }
  await run('dpkg', ['-x', path.join(cache, deb), root]);
  return found;
}

export interface ChronyDaemon {
  socket: string;
  stop(): Promise<void>;
}

/**
 * Starts chronyd in a network namespace with the given directives. Its directory is 0700: chronyd
 * refuses a command socket in a directory others can reach.
 */
export async function startChronyd(c: Chrony, netns: string, dir: string, directives: string[]): Promise<ChronyDaemon> {
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o700);
  const socket = path.join(dir, 'chronyd.sock');
  const pidfile = path.join(dir, 'chronyd.pid');
  await writeFile(path.join(dir, 'chrony.conf'), [...directives, 'cmdport 0', `bindcmdaddress ${socket}`, `pidfile ${pidfile}`, `driftfile ${path.join(dir, 'drift')}`, ''].join('\n'));
  // chronyd forks into the background once it is set up; the pid file then names it.
  await run('ip', ['netns', 'exec', netns, c.chronyd, '-x', '-u', 'root', '-f', path.join(dir, 'chrony.conf')], { timeoutMs: 30_000 });
  for (let i = 0; i < 100 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 50));
  if (!existsSync(socket)) throw new Error(`chronyd in ${netns} did not open ${socket}`);
  const pid = Number((await readFile(pidfile, 'utf8')).trim());
  return {
    socket,
    async stop() {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        return;
      }
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(pid, 0);
        } catch {
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
