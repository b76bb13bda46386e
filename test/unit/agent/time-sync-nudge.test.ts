/**
 * time-sync asks systemd-timesyncd once to try its servers when it finds it not synchronised (the network is online
 * by then, and timesyncd, which hears of the network only from systemd-networkd, would wait for its
 * next try): the guard's reconcile on a node root with timesyncd's files, and a restart command that
 * records each call and, where the test says so, writes the file timesyncd writes once synchronised.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import timeSync from '../../../agent/guards/time-sync.js';
import type { GuardContext } from '../../../agent/guard.js';
import { askTimesyncdNow, parseRuntimeServers, timesyncdNeedsNudge, type NudgeTools } from '../../../agent/time/nudge.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';
import { testTempDir } from '../temp-dir.js';

const SYNC_FILE = 'run/systemd/timesync/synchronized';

interface Node {
  root: string;
  sink: MemorySink;
  ctx: (settings: Record<string, unknown>) => GuardContext;
  calls: () => Promise<string[]>;
  /** A restart command that records its call and, if `syncs`, writes the synchronised file. */
  restart: (syncs: boolean) => string[];
}

async function node(synced = false): Promise<Node> {
  const root = await testTempDir('hv-timesync-nudge-');
  await mkdir(path.join(root, 'usr/lib/systemd'), { recursive: true });
  await writeFile(path.join(root, 'usr/lib/systemd/systemd-timesyncd'), '');
  await mkdir(path.join(root, 'etc/systemd'), { recursive: true });
  await writeFile(path.join(root, 'etc/systemd/timesyncd.conf'), '[Time]\nNTP=10.0.0.1\n');
  if (synced) {
    await mkdir(path.join(root, path.dirname(SYNC_FILE)), { recursive: true });
    await writeFile(path.join(root, SYNC_FILE), '');
  }
  const sink = new MemorySink();
  const calls = path.join(root, 'restart-calls');
  return {
    root,
    sink,
    ctx: (settings) => ({
      root: (p) => path.join(root, p),
      log: new Logger(sink, new Redactor(), 'debug'),
      signal: new AbortController().signal,
      settings: { daemon: 'timesyncd', pollInterval: '20ms', pollWindow: '400ms', ...settings },
      progress: () => undefined,
      now: () => Date.now(),
    }),
    calls: async () => (await readFile(calls, 'utf8').catch(() => '')).split('\n').filter(Boolean),
    restart: (syncs) => ['sh', '-c', `echo restart >> '${calls}'${syncs ? `; mkdir -p '${path.join(root, path.dirname(SYNC_FILE))}' && : > '${path.join(root, SYNC_FILE)}'` : ''}`],
  };
}

const nudgeLines = (n: Node) => n.sink.lines.filter((l) => l.includes('systemd-timesyncd asked to try its servers now'));

describe('time-sync restarts systemd-timesyncd once', () => {
  it('not synchronised: restarts it at once, and the synchronisation that follows ends the wait', async () => {
    const n = await node();
    const r = await timeSync.reconcile(n.ctx({ restartTimesyncd: n.restart(true) }));
    expect(r).toEqual({ status: 'ok', detail: 'systemd-timesyncd synchronised to 10.0.0.1' });
    expect(await n.calls()).toEqual(['restart']);
    expect(nudgeLines(n)).toHaveLength(1);
    expect(nudgeLines(n)[0]).toContain('restarted: sh -c');
  });

  it('already synchronised: no restart', async () => {
    const n = await node(true);
    expect((await timeSync.reconcile(n.ctx({ restartTimesyncd: n.restart(true) }))).status).toBe('ok');
    expect(await n.calls()).toEqual([]);
    expect(nudgeLines(n)).toEqual([]);
  });

  it('a restart that does not help: the wait goes on to its window, and a later pass does not restart it again', async () => {
    const n = await node();
    const first = await timeSync.reconcile(n.ctx({ restartTimesyncd: n.restart(false) }));
    expect(first.status).toBe('retry');
    const again = await timeSync.reconcile(n.ctx({ restartTimesyncd: n.restart(false) }));
    expect(again.status).toBe('retry');
    expect(await n.calls()).toEqual(['restart']);
  });

  it('a restart that fails is logged with its exit code and stderr, and the wait goes on', async () => {
    const n = await node();
    const r = await timeSync.reconcile(n.ctx({ restartTimesyncd: ['sh', '-c', 'echo "Failed to restart systemd-timesyncd.service: Unit not found." >&2; exit 5'] }));
    expect(r.status).toBe('retry');
    expect(nudgeLines(n)[0]).toContain('failed (exit 5): Failed to restart systemd-timesyncd.service: Unit not found.');
  });

  it('auto on a node root that is not / (tests, a chroot) never runs systemctl', async () => {
    const n = await node();
    expect((await timeSync.reconcile(n.ctx({}))).status).toBe('retry');
    expect(nudgeLines(n)[0]).toContain('not asked (systemd does not run this node root)');
  });

  it('never: not restarted, and says why', async () => {
    const n = await node();
    await timeSync.reconcile(n.ctx({ restartTimesyncd: 'never' }));
    expect(nudgeLines(n)[0]).toContain('not asked (time-sync settings: restartTimesyncd never)');
  });
});

describe('timesyncdNeedsNudge', () => {
  it('only timesyncd, only unsynchronised, only once', () => {
    expect(timesyncdNeedsNudge({ kind: 'timesyncd', synced: false }, false)).toBe(true);
    expect(timesyncdNeedsNudge({ kind: 'timesyncd', synced: false }, true)).toBe(false);
    expect(timesyncdNeedsNudge({ kind: 'timesyncd', synced: true }, false)).toBe(false);
    expect(timesyncdNeedsNudge({ kind: 'chrony', synced: false }, false)).toBe(false);
    expect(timesyncdNeedsNudge({ kind: 'none', synced: false }, false)).toBe(false);
  });
});

/**
 * The `auto` nudge's commands, as stand-in `busctl` and `systemctl` scripts that record their
 * arguments: what they print and how they exit are the test's.
 */
async function tools(busctl: { get: string; set: string }, systemctlExit = 0): Promise<{ tools: NudgeTools; calls: () => Promise<string[]> }> {
  const dir = await testTempDir('hv-timesync-tools-');
  const log = path.join(dir, 'calls');
  const script = (body: string) => `#!/bin/sh\necho "$(basename "$0") $*" >> '${log}'\n${body}\n`;
  await writeFile(path.join(dir, 'busctl'), script(`case "$*" in *get-property*) ${busctl.get} ;; *) ${busctl.set} ;; esac`), { mode: 0o755 });
  await writeFile(path.join(dir, 'systemctl'), script(systemctlExit === 0 ? 'exit 0' : `echo "Failed to restart systemd-timesyncd.service: Unit not found." >&2; exit ${systemctlExit}`), { mode: 0o755 });
  return { tools: { busctl: path.join(dir, 'busctl'), systemctl: path.join(dir, 'systemctl') }, calls: async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean) };
}

const GET = 'busctl --json=short get-property org.freedesktop.timesync1 /org/freedesktop/timesync1 org.freedesktop.timesync1.Manager RuntimeNTPServers';
const SET = 'busctl call org.freedesktop.timesync1 /org/freedesktop/timesync1 org.freedesktop.timesync1.Manager SetRuntimeNTPServers as';

describe('asking timesyncd to try its servers now (auto)', () => {
  it('over D-Bus, with the runtime servers it has (none): no restart', async () => {
    const t = await tools({ get: `echo '{"type":"as","data":[]}'`, set: 'exit 0' });
    expect(await askTimesyncdNow(t.tools)).toBe('asked over D-Bus: SetRuntimeNTPServers with its runtime servers (none), unchanged');
    expect(await t.calls()).toEqual([GET, `${SET} 0`]);
  });

  it('keeps runtime servers someone else set, in their order', async () => {
    const t = await tools({ get: `echo '{"type":"as","data":["10.0.0.5","ntp.example"]}'`, set: 'exit 0' });
    expect(await askTimesyncdNow(t.tools)).toContain('(10.0.0.5 ntp.example), unchanged');
    expect(await t.calls()).toEqual([GET, `${SET} 2 10.0.0.5 ntp.example`]);
  });

  it('a timesyncd without the method (an older systemd): restarted, and the D-Bus error kept', async () => {
    const t = await tools({ get: `echo '{"type":"as","data":[]}'`, set: `echo 'Call failed: Unknown method SetRuntimeNTPServers or interface org.freedesktop.timesync1.Manager.' >&2; exit 1` });
    const r = await askTimesyncdNow(t.tools);
    expect(r).toMatch(/^restarted: \S*systemctl restart systemd-timesyncd\.service \(D-Bus: \S*busctl call .* failed \(exit 1\): Call failed: Unknown method SetRuntimeNTPServers/);
    expect((await t.calls()).at(-1)).toBe('systemctl restart systemd-timesyncd.service');
  });

  it('timesyncd not on the bus: not asked to set anything, restarted', async () => {
    const t = await tools({ get: `echo 'Failed to get property RuntimeNTPServers on interface org.freedesktop.timesync1.Manager: Unit dbus-org.freedesktop.timesync1.service not found.' >&2; exit 1`, set: 'exit 0' });
    expect(await askTimesyncdNow(t.tools)).toMatch(/^restarted: .*\(D-Bus: \S*busctl --json=short get-property .* failed \(exit 1\): Failed to get property RuntimeNTPServers/);
    expect(await t.calls()).toEqual([GET, 'systemctl restart systemd-timesyncd.service']);
  });

  it('an answer that is not a list of servers is not passed back: restarted', async () => {
    const t = await tools({ get: `echo '{"type":"s","data":"10.0.0.5"}'`, set: 'exit 0' });
    expect(await askTimesyncdNow(t.tools)).toMatch(/not a list of servers\)$/);
    expect(await t.calls()).toEqual([GET, 'systemctl restart systemd-timesyncd.service']);
  });

  it('both failing: says so with each exit code and stderr, and does not throw', async () => {
    const t = await tools({ get: `echo 'Failed to connect to bus: No such file or directory' >&2; exit 1`, set: 'exit 0' }, 5);
    const r = await askTimesyncdNow(t.tools);
    expect(r).toMatch(/systemctl restart systemd-timesyncd\.service failed \(exit 5\): Failed to restart systemd-timesyncd\.service: Unit not found\. \(D-Bus: .*failed \(exit 1\): Failed to connect to bus: No such file or directory\)$/);
  });

  it('parseRuntimeServers reads busctl JSON of an `as` and nothing else', () => {
    expect(parseRuntimeServers('{"type":"as","data":["a","b"]}')).toEqual(['a', 'b']);
    expect(parseRuntimeServers('{"type":"as","data":[]}\n')).toEqual([]);
    expect(parseRuntimeServers('{"type":"as","data":[1]}')).toBeUndefined();
    expect(parseRuntimeServers('as 0')).toBeUndefined();
    expect(parseRuntimeServers('')).toBeUndefined();
  });
});
