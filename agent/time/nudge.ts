/**
 * systemd-timesyncd hears that the network came up only from systemd-networkd (sd-network:
 * systemd src/timesync/timesyncd-manager.c, manager_network_monitor_listen). Under NetworkManager
 * it tries its servers at its start, usually before the management network has an address, and then
 * backs off: 15 s doubling up to 6 min between tries (timesyncd-manager.h,
 * NTP_RETRY_INTERVAL_MIN_USEC/MAX_USEC). time-sync runs once the network is online, so it asks
 * timesyncd once to try its servers now, which is what RKE2 waits for.
 *
 * How: timesyncd's D-Bus method SetRuntimeNTPServers (Debian 12's systemd 252 has it)
 * drops its current server, marks its lists as not waited out and connects at once
 * (src/timesync/timesyncd-bus.c, method_set_runtime_servers). It is given the runtime servers it
 * already has (read just before: none, unless something set them), so nothing about which servers
 * it uses changes. A restart did the same but cost the start of a sandboxed service: 2–3 s on the
 * emulated first boot, on the way to RKE2's start. Where the method is missing or timesyncd is not
 * on the bus, the restart is the fallback.
 */
import { run, type RunResult } from '../../lib/exec.js';
import type { DaemonState } from './clock.js';
import { systemdBooted } from '../systemd-booted.js';

/** `auto`: ask over D-Bus (restart if that fails) when systemd runs this node's root; `never`; or the command to run (tests). */
export type TimesyncdRestart = 'auto' | 'never' | string[];

/** The commands `auto` runs; other paths only in tests. */
export interface NudgeTools {
  busctl: string;
  systemctl: string;
}

const DEFAULT_TOOLS: NudgeTools = { busctl: 'busctl', systemctl: 'systemctl' };
const TIMESYNC1 = ['org.freedesktop.timesync1', '/org/freedesktop/timesync1', 'org.freedesktop.timesync1.Manager'] as const;
const TIMEOUT_MS = 15_000;

/** Nudge timesyncd when it is the clock's daemon, not synchronised, and not nudged before by this agent. Pure. */
export function timesyncdNeedsNudge(daemon: DaemonState, nudgedBefore: boolean): boolean {
  return daemon.kind === 'timesyncd' && !daemon.synced && !nudgedBefore;
}

/** The servers in busctl's JSON of an `as` property (`{"type":"as","data":[...]}`), or undefined. Pure. */
export function parseRuntimeServers(json: string): string[] | undefined {
  try {
    const v = JSON.parse(json) as { type?: unknown; data?: unknown };
    if (v.type !== 'as' || !Array.isArray(v.data) || !v.data.every((s) => typeof s === 'string')) return undefined;
    return v.data as string[];
  } catch {
    return undefined;
  }
}

async function runQuietly(file: string, args: string[]): Promise<Pick<RunResult, 'exitCode' | 'stdout' | 'stderr'>> {
  return run(file, args, { allowFailure: true, timeoutMs: TIMEOUT_MS }).catch((err: Error) => ({ exitCode: -1, stdout: '', stderr: err.message }));
}

function failure(command: string[], r: { exitCode: number; stderr: string }): string {
  return `${command.join(' ')} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(0, 300)}`;
}

/** SetRuntimeNTPServers with the servers timesyncd has, else a restart; what happened, for the log. Never throws. */
export async function askTimesyncdNow(tools: NudgeTools = DEFAULT_TOOLS): Promise<string> {
  const get = [tools.busctl, '--json=short', 'get-property', ...TIMESYNC1, 'RuntimeNTPServers'];
  const got = await runQuietly(get[0]!, get.slice(1));
  const servers = got.exitCode === 0 ? parseRuntimeServers(got.stdout) : undefined;
  let why: string;
  if (servers) {
    const set = [tools.busctl, 'call', ...TIMESYNC1, 'SetRuntimeNTPServers', 'as', String(servers.length), ...servers];
    const done = await runQuietly(set[0]!, set.slice(1));
    if (done.exitCode === 0) return `asked over D-Bus: SetRuntimeNTPServers with its runtime servers (${servers.length ? servers.join(' ') : 'none'}), unchanged`;
    why = failure(set, done);
  } else {
    why = got.exitCode === 0 ? `${get.join(' ')} printed ${JSON.stringify(got.stdout.trim().slice(0, 200))}, not a list of servers` : failure(get, got);
  }
  const restart = [tools.systemctl, 'restart', 'systemd-timesyncd.service'];
  const r = await runQuietly(restart[0]!, restart.slice(1));
  return r.exitCode === 0 ? `restarted: ${restart.join(' ')} (D-Bus: ${why})` : `${failure(restart, r)} (D-Bus: ${why})`;
}

/** The nudge, as `how` says; what happened, for the log. Never throws: the wait goes on either way. */
export async function nudgeTimesyncd(how: TimesyncdRestart, nodeRoot: string): Promise<string> {
  if (how === 'never') return 'not asked (time-sync settings: restartTimesyncd never)';
  if (how === 'auto') {
    if (nodeRoot !== '/' || !(await systemdBooted())) return 'not asked (systemd does not run this node root)';
    return askTimesyncdNow();
  }
  const [file, ...args] = how;
  const r = await runQuietly(file!, args);
  return r.exitCode === 0 ? `restarted: ${how.join(' ')}` : failure(how, r);
}
