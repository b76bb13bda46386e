/**
 * systemd-timesyncd hears that the network came up only from systemd-networkd (sd-network:
 * systemd src/timesync/timesyncd-manager.c, manager_network_monitor_listen). Under NetworkManager
 * it tries its servers at its start, usually before the management network has an address, and then
 * backs off: 15 s doubling up to 6 min between tries (timesyncd-manager.h,
 * NTP_RETRY_INTERVAL_MIN_USEC/MAX_USEC). time-sync runs once the network is online, so one restart
 * of timesyncd then makes it ask now instead of at its next try, which is what RKE2 waits for.
 */
import { run } from '../../lib/exec.js';
import type { DaemonState } from './clock.js';
import { systemdBooted } from '../systemd-booted.js';

/** `auto`: systemctl restart when systemd runs this node's root; `never`; or the command to run (tests). */
export type TimesyncdRestart = 'auto' | 'never' | string[];

/** Restart timesyncd when it is the clock's daemon, not synchronised, and not restarted before by this agent. Pure. */
export function timesyncdNeedsNudge(daemon: DaemonState, nudgedBefore: boolean): boolean {
  return daemon.kind === 'timesyncd' && !daemon.synced && !nudgedBefore;
}

/** The restart, as `how` says; what happened, for the log. Never throws: the wait goes on either way. */
export async function restartTimesyncd(how: TimesyncdRestart, nodeRoot: string): Promise<string> {
  if (how === 'never') return 'not restarted (time-sync settings: restartTimesyncd never)';
  if (how === 'auto' && (nodeRoot !== '/' || !(await systemdBooted()))) return 'not restarted (systemd does not run this node root)';
  const command = how === 'auto' ? ['systemctl', 'restart', 'systemd-timesyncd.service'] : how;
  const [file, ...args] = command;
  const r = await run(file!, args, { allowFailure: true, timeoutMs: 15_000 }).catch((err: Error) => ({ exitCode: -1, stderr: err.message }));
  return r.exitCode === 0 ? `restarted: ${command.join(' ')}` : `${command.join(' ')} failed (exit ${r.exitCode}): ${String(r.stderr).trim().slice(0, 300)}`;
}
