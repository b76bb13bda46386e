/**
 * The rke2 guard on an image where rancherd bootstraps (agent/mode.ts): hvagent never writes RKE2's
 * drop-ins nor starts or stops its units; it looks at rke2-<role> and rancherd and says what is
 * going on — ready, starting, rancherd still bootstrapping, or rancherd failed with its last log
 * lines. The judgement is pure; the facts come from systemd (or the supervised stand-in in tests).
 */
import { run } from '../../lib/exec.js';
import type { Probe } from '../../lib/wait.js';
import type { GuardResult } from '../guard.js';
import type { Rke2Role } from './role.js';
import type { ServiceState } from './services.js';

export interface RancherdState {
  /** systemd's ActiveState of rancherd.service; unknown without systemd. */
  active: 'active' | 'activating' | 'inactive' | 'failed' | 'deactivating' | 'unknown';
  /** systemd's Result (success, exit-code, timeout, …). */
  result?: string;
  tail?: string;
}

export interface UnderRancherdFacts {
  role: Rke2Role;
  rke2: ServiceState;
  /** The readiness probe, when rke2 runs. */
  probe?: Probe<string>;
  rancherd: RancherdState;
  rke2Tail?: string;
}

const lines = (tail: string | undefined, what: string): string => (tail ? `\nlast log lines of ${what}:\n${tail.split('\n').map((l) => `  ${l}`).join('\n')}` : '');

/** Pure. */
export function judgeUnderRancherd(f: UnderRancherdFacts): GuardResult {
  const unit = `rke2-${f.role}`;
  if (f.rke2.active) {
    if (f.probe?.done) return { status: 'ok', detail: `${unit} ready (started by rancherd; hvagent watches only)` };
    return { status: 'retry', reason: `${unit} runs (started by rancherd) but is not ready: ${f.probe && !f.probe.done ? f.probe.reason : 'not probed'}` };
  }
  switch (f.rancherd.active) {
    case 'failed':
      return {
        status: 'fail',
        diagnosis: `rancherd.service failed (${f.rancherd.result ?? 'unknown result'}) and ${unit} is not running: the bootstrap stopped${lines(f.rancherd.tail, 'rancherd')}`,
        hint: 'read `journalctl -u rancherd`; fix the cause (/etc/rancher/rancherd/config.yaml, the network, the images), then `systemctl restart rancherd`',
      };
    case 'active':
    case 'activating':
      return { status: 'retry', reason: `rancherd is bootstrapping; ${unit} is not running yet` };
    case 'unknown':
      return { status: 'retry', reason: `${unit} is not running, and without systemd hvagent cannot see rancherd` };
    default:
      return { status: 'retry', reason: `${unit} is not running and rancherd is ${f.rancherd.active}${f.rancherd.result ? ` (${f.rancherd.result})` : ''}: it bootstraps once, later boots start ${unit} from its enabled unit${lines(f.rke2Tail, unit)}` };
  }
}

/** ActiveState and Result of rancherd.service, with its last log lines when it failed. */
export async function rancherdState(systemdBooted: boolean): Promise<RancherdState> {
  if (!systemdBooted) return { active: 'unknown' };
  const r = await run('systemctl', ['show', 'rancherd.service', '-p', 'ActiveState', '-p', 'Result'], { allowFailure: true, timeoutMs: 15_000 });
  const props = Object.fromEntries(r.stdout.split('\n').map((l) => l.split('=')).filter((kv) => kv.length === 2)) as Record<string, string>;
  const active = (['active', 'activating', 'inactive', 'failed', 'deactivating'].includes(props.ActiveState ?? '') ? props.ActiveState : 'unknown') as RancherdState['active'];
  const state: RancherdState = { active, result: props.Result };
  if (active === 'failed') {
    state.tail = (await run('journalctl', ['-u', 'rancherd.service', '-n', '15', '--no-pager', '-o', 'cat'], { allowFailure: true, timeoutMs: 15_000 })).stdout.trim();
  }
  return state;
}
