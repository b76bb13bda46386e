/**
 * time-sync restarts systemd-timesyncd once when it finds it not synchronised (the network is online
 * by then, and timesyncd, which hears of the network only from systemd-networkd, would wait for its
 * next try): the guard's reconcile on a node root with timesyncd's files, and a restart command that
 * records each call and, where the test says so, writes the file timesyncd writes once synchronised.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import timeSync from '../../../agent/guards/time-sync.js';
import type { GuardContext } from '../../../agent/guard.js';
import { timesyncdNeedsNudge } from '../../../agent/time/nudge.js';
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
    expect(nudgeLines(n)[0]).toContain('not restarted (systemd does not run this node root)');
  });

  it('never: not restarted, and says why', async () => {
    const n = await node();
    await timeSync.reconcile(n.ctx({ restartTimesyncd: 'never' }));
    expect(nudgeLines(n)[0]).toContain('not restarted (time-sync settings: restartTimesyncd never)');
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
