/**
 * What the time-sync guard looks at: which time daemon runs and whether it has synchronised
 * (systemd-timesyncd's /run/systemd/timesync/synchronized, the file systemd-time-wait-sync waits
 * for; `chronyc -c tracking` for chronyd), the Date of the join server's HTTPS answer, and when the
 * install finished. Every call is bounded; none of them changes the clock.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { httpRequest } from '../../lib/http-request.js';
import { hasCommand, run } from '../../lib/exec.js';
import type { HarvesterConfig } from '../../config/types.js';
import { describeNetError } from '../kube/client.js';
import { supervisorUrl } from '../rke2/role.js';
import { chronySourcesProblem, parseChronyTracking, timesyncdServers, type DaemonState, type ServerClock, type TimeDaemonKind } from './clock.js';

export interface TimeObserveOptions {
  root: (p: string) => string;
  /** auto: chronyd when it answers, else systemd-timesyncd when the image has it, else none. */
  daemon: TimeDaemonKind | 'auto';
  chronyc: string;
  /** chronyd's command socket (chronyc -h); default chronyc's own. */
  chronySocket?: string;
  /** Run chronyc in this network namespace (tests). */
  netns?: string;
  timesyncdSyncFile: string;
  timesyncdBinaries: string[];
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(() => true, () => false);
}

function chronycCommand(o: TimeObserveOptions, args: string[]): { file: string; args: string[] } {
  const base = [...(o.chronySocket ? ['-h', o.chronySocket] : []), '-n', '-c', ...args];
  return o.netns ? { file: 'ip', args: ['netns', 'exec', o.netns, o.chronyc, ...base] } : { file: o.chronyc, args: base };
}

async function chronyState(o: TimeObserveOptions): Promise<DaemonState | undefined> {
  const t = chronycCommand(o, ['tracking']);
  const r = await run(t.file, t.args, { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) return undefined;
  const tracking = parseChronyTracking(r.stdout.split('\n')[0] ?? '');
  if (!tracking) return undefined;
  if (tracking.synced) return { kind: 'chrony', synced: true, offsetMs: tracking.offsetMs, server: tracking.server };
  const s = chronycCommand(o, ['sources']);
  const sources = await run(s.file, s.args, { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
  return { kind: 'chrony', synced: false, problem: sources?.exitCode === 0 ? chronySourcesProblem(sources.stdout) : undefined };
}

async function timesyncdConfigured(o: TimeObserveOptions): Promise<string | undefined> {
  const main = o.root('/etc/systemd/timesyncd.conf');
  const dropDir = o.root('/etc/systemd/timesyncd.conf.d');
  const drops = (await readdir(dropDir).catch(() => [] as string[])).filter((f) => f.endsWith('.conf')).sort();
  const texts = await Promise.all([main, ...drops.map((f) => path.join(dropDir, f))].map((f) => readFile(f, 'utf8').catch(() => '')));
  return timesyncdServers(texts);
}

async function timesyncdState(o: TimeObserveOptions, force: boolean): Promise<DaemonState | undefined> {
  const present = force || (await Promise.all(o.timesyncdBinaries.map((b) => exists(o.root(b))))).some(Boolean);
  if (!present) return undefined;
  const server = await timesyncdConfigured(o);
  if (await exists(o.root(o.timesyncdSyncFile))) return { kind: 'timesyncd', synced: true, server };
  return { kind: 'timesyncd', synced: false, server, problem: `${o.timesyncdSyncFile} not written yet` };
}

/**
 * Whether chronyc is there to ask: a lookup on PATH, where trying it would be a process each look
 * (the guard looks every second while it waits, and Harvester's image runs systemd-timesyncd).
 */
async function chronycPresent(o: TimeObserveOptions): Promise<boolean> {
  if (o.netns) return true;
  return o.chronyc.includes('/') ? exists(o.chronyc) : hasCommand(o.chronyc);
}

export async function observeDaemon(o: TimeObserveOptions): Promise<DaemonState> {
  if (o.daemon === 'none') return { kind: 'none', synced: false };
  if (o.daemon === 'chrony') return (await chronyState(o)) ?? { kind: 'chrony', synced: false, problem: `chronyd does not answer (${o.chronyc} tracking failed)` };
  if (o.daemon === 'timesyncd') return (await timesyncdState(o, true))!;
  return ((await chronycPresent(o)) ? await chronyState(o) : undefined) ?? (await timesyncdState(o, false)) ?? { kind: 'none', synced: false };
}

/**
 * The server's clock from the Date header of any HTTPS answer. The certificate is not verified: a
 * wrong local clock is exactly what makes verification fail, and only the header is read (a hint
 * about the time, never trusted for anything else).
 */
export async function observeServerClock(url: string, now: () => number, signal?: AbortSignal, timeoutMs = 5_000): Promise<ServerClock> {
  const sent = now();
  try {
    const res = await httpRequest(url, { timeoutMs, signal, tls: { rejectUnauthorized: false }, readBody: false });
    const got = now();
    const date = res.headers.date;
    const dateMs = typeof date === 'string' ? Date.parse(date) : NaN;
    if (!Number.isFinite(dateMs)) {
      return { url, rttMs: got - sent, problem: typeof date === 'string' ? `it answered with an unreadable Date (${JSON.stringify(date.slice(0, 60))})` : `it answered HTTP ${res.statusCode} without a Date header` };
    }
    return { url, dateMs, localMs: sent + (got - sent) / 2, rttMs: got - sent };
  } catch (err) {
    return { url, problem: `${url}: ${describeNetError(err)}` };
  }
}

/** When the install finished, from the journal the installer saved on COS_OEM. */
export async function installFinishedAt(root: (p: string) => string): Promise<number | undefined> {
  try {
    const j = JSON.parse(await readFile(root('/oem/install/journal.json'), 'utf8')) as { updatedAt?: string };
    const t = Date.parse(j.updatedAt ?? '');
    return Number.isFinite(t) ? t : undefined;
  } catch {
    return undefined;
  }
}

/** The URL a join node compares its clock with (RKE2's supervisor answers /ping); undefined on a create node. */
export function joinServerClockUrl(config: HarvesterConfig | undefined, override?: string): string | undefined {
  if (override) return override;
  if ((config?.install?.mode ?? '').toLowerCase() !== 'join' || !config?.serverUrl) return undefined;
  const base = supervisorUrl(config.serverUrl);
  return base ? `${base}/ping` : undefined;
}
