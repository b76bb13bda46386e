/**
 * The image's own containerd unit, if it runs one on the preload's socket. hvagent is not ordered
 * after it (the network, identity and clock guards run while containerd starts: first boot waits
 * for neither), so the preload can find the socket silent while that unit is still starting. It
 * must then wait for that containerd, not start a standalone one on the same root and socket: two
 * containerds would fight over the socket and the metadata database.
 */
import { run } from '../../lib/exec.js';
import { systemdBooted } from '../systemd-booted.js';

export interface UnitState {
  unit: string;
  /** systemd's LoadState: `loaded`, `not-found`, `masked`, … */
  load: string;
  /** ActiveState: `active`, `activating`, `inactive`, `failed`, … */
  active: string;
  /** A start (or other) job is queued for it: it will start once what it is ordered after has. */
  jobQueued: boolean;
}

/** `systemctl show -p LoadState -p ActiveState -p Job <unit>` output. Pure. */
export function parseUnitShow(unit: string, text: string): UnitState {
  const prop = (name: string): string => new RegExp(`^${name}=(.*)$`, 'm').exec(text)?.[1]?.trim() ?? '';
  return { unit, load: prop('LoadState') || 'unknown', active: prop('ActiveState') || 'unknown', jobQueued: /^[1-9]\d*/.test(prop('Job')) };
}

/** The unit is up or on its way up: a containerd will answer on its socket. Pure. */
export function unitWillServe(s: UnitState): boolean {
  return s.load === 'loaded' && (s.jobQueued || s.active === 'active' || s.active === 'activating' || s.active === 'reloading');
}

/** "containerd.service is activating (a start job queued)", for the log and errors. Pure. */
export function describeUnit(s: UnitState): string {
  return `${s.unit} is ${s.active}${s.jobQueued ? ' (a job queued)' : ''}`;
}

/**
 * The unit's state, when systemd runs this node root ('/'); undefined otherwise (a node root under
 * test, or no systemd), or when systemctl cannot say.
 */
export async function readContainerdUnit(unit: string, nodeRoot: string): Promise<UnitState | undefined> {
  if (nodeRoot !== '/' || !(await systemdBooted())) return undefined;
  const r = await run('systemctl', ['show', '-p', 'LoadState', '-p', 'ActiveState', '-p', 'Job', unit], { allowFailure: true, timeoutMs: 15_000 }).catch(() => undefined);
  return r && r.exitCode === 0 ? parseUnitShow(unit, r.stdout) : undefined;
}
