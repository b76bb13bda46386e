/**
 * A real systemd as PID 1, for code that manages services through systemctl and journalctl: this
 * machine's own Debian /usr booted under systemd-nspawn (package systemd-container) with
 * `--volatile=yes` (a fresh tmpfs root: empty /etc, /var and /run every boot, /usr read-only) and a
 * private network namespace (its own loopback, nothing reaches the host's network). The given units
 * are bound at /etc/systemd/system; a oneshot unit runs `script` once the system is up, then powers
 * the container off (its own systemd, not this machine). About a second per boot, so it belongs in
 * `make test`. Only the binds given are visible inside; `work` (/hvtest inside) is the one writable.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface ContainerBoot {
  /** Exit status of `script`, as systemd saw it. */
  scriptExit: number | undefined;
  /** What the script wrote to stdout and stderr. */
  output: string;
  /** The container's console (systemd's boot and shutdown messages). */
  console: string;
}

export interface ContainerOptions {
  /** Unit files by name, e.g. { 'rke2-server.service': '...' }. Not enabled: the script or the code under test starts them. */
  units: Record<string, string>;
  /** Shell script run by /bin/sh inside the booted container. */
  script: string;
  /** Writable directory of the host, seen as /hvtest inside (inputs and outputs of the test). */
  work: string;
  /** Host paths seen read-only at the same path inside (the built project, fixtures). */
  readOnly?: string[];
  /** Host path → container path, read-only. */
  bindReadOnly?: Record<string, string>;
  /** Host path → container path, writable. */
  bind?: Record<string, string>;
  timeoutMs?: number;
}

const RUN_UNIT = 'hvtest-run.service';

export async function bootSystemdContainer(opts: ContainerOptions): Promise<ContainerBoot> {
  const unitDir = await mkdtemp(path.join(os.tmpdir(), 'hv-nspawn-units-'));
  try {
    for (const [name, text] of Object.entries(opts.units)) await writeFile(path.join(unitDir, name), text);
    await writeFile(path.join(opts.work, 'hvtest-run.sh'), opts.script);
    await chmod(path.join(opts.work, 'hvtest-run.sh'), 0o755);
    await writeFile(
      path.join(unitDir, RUN_UNIT),
      [
        '[Unit]',
        'Description=hvinstall test script',
        'After=basic.target',
        '[Service]',
        'Type=oneshot',
        'StandardOutput=file:/hvtest/hvtest-run.out',
        'StandardError=file:/hvtest/hvtest-run.out',
        'ExecStart=/bin/sh /hvtest/hvtest-run.sh',
        // Runs however the script ended; powers off this container's systemd only.
        "ExecStopPost=/bin/sh -c 'echo $EXIT_STATUS > /hvtest/hvtest-run.exit; systemctl poweroff --no-block'",
        '',
      ].join('\n'),
    );
    await mkdir(path.join(unitDir, 'multi-user.target.wants'));
    await symlink(`../${RUN_UNIT}`, path.join(unitDir, 'multi-user.target.wants', RUN_UNIT));

    const args = [
      '--quiet',
      '--boot',
      '--directory=/',
      '--volatile=yes',
      '--private-network',
      // No systemd and no D-Bus on the host side: no machine registration, no transient scope.
      '--register=no',
      '--keep-unit',
      `--bind=${opts.work}:/hvtest`,
      `--bind-ro=${unitDir}:/etc/systemd/system`,
      ...(opts.readOnly ?? []).map((p) => `--bind-ro=${p}`),
      ...Object.entries(opts.bindReadOnly ?? {}).map(([h, c]) => `--bind-ro=${h}:${c}`),
      ...Object.entries(opts.bind ?? {}).map(([h, c]) => `--bind=${h}:${c}`),
      // Arguments for the container's systemd: no first-boot questions on the empty /etc.
      'systemd.firstboot=off',
      'systemd.unit=multi-user.target',
    ];
    const console = await runNspawn(args, opts.timeoutMs ?? 120_000);
    const exitText = await readFile(path.join(opts.work, 'hvtest-run.exit'), 'utf8').catch(() => '');
    return {
      scriptExit: exitText.trim() === '' ? undefined : Number(exitText.trim()),
      output: await readFile(path.join(opts.work, 'hvtest-run.out'), 'utf8').catch(() => ''),
      console,
    };
  } finally {
    await rm(unitDir, { recursive: true, force: true });
  }
}

/** Runs systemd-nspawn in its own process group; past the deadline, SIGTERM (a clean halt), then SIGKILL. */
function runNspawn(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('systemd-nspawn', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let killer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      out += `\n[systemd-nspawn did not finish within ${timeoutMs} ms: halting the container]\n`;
      try { process.kill(-child.pid!, 'SIGTERM'); } catch { /* gone */ }
      killer = setTimeout(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } }, 10_000);
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`systemd-nspawn: ${err.message} (install systemd-container)`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      clearTimeout(killer);
      // eslint-disable-next-line no-control-regex
      const text = out.replace(/\x1b\[[0-9;]*m/g, '');
      if (code !== 0) reject(new Error(`systemd-nspawn exited ${code}:\n${text.slice(-4000)}`));
      else resolve(text);
    });
  });
}
