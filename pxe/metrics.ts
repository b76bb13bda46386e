/**
 * hvpxe's /metrics (Prometheus text format): machines by state, artifact bytes served, requests by
 * route and status code, profile reloads. Counters live for the process; the machine gauge is
 * computed from the machine history at each scrape.
 */
import { formatMetrics, LabelledCounter, type MetricFamily } from '../lib/prometheus.js';
import { versionInfo } from '../lib/cli/version.js';
import type { MachineActivity } from './history.js';

/** Every state a machine is counted in (all are exported, zeros included, so a query never finds none). */
export const MACHINE_STATES = ['unseen', 'booting', 'installing', 'failed', 'installed'] as const;
export type MachineState = (typeof MACHINE_STATES)[number];

/** Where a machine's install stands, from what hvpxe saw of it. */
export function machineState(a: MachineActivity): MachineState {
  if (a.installed) return 'installed';
  const ev = a.progress?.event ?? '';
  if (/fail/i.test(ev)) return 'failed';
  if (a.events.length > 0 || a.fetched.config) return 'installing';
  if (a.fetched.ipxe || a.lastSeen) return 'booting';
  return 'unseen';
}

export class PxeMetrics {
  readonly requests = new LabelledCounter<'route' | 'code'>();
  readonly reloads = new LabelledCounter<'result'>();
  artifactBytes = 0;

  request(route: string, code: number, artifactBytes: number): void {
    this.requests.inc({ route, code: String(code) });
    if (route === '/artifacts/' && artifactBytes > 0) this.artifactBytes += artifactBytes;
  }

  reload(ok: boolean): void {
    this.reloads.inc({ result: ok ? 'ok' : 'refused' });
  }

  render(machines: MachineActivity[]): string {
    const byState = new Map<MachineState, number>(MACHINE_STATES.map((s) => [s, 0]));
    for (const m of machines) byState.set(machineState(m), byState.get(machineState(m))! + 1);
    const v = versionInfo('hvpxe');
    const families: MetricFamily[] = [
      { name: 'hvpxe_build_info', help: 'The hvpxe version and the commit it was built from.', type: 'gauge', samples: [{ labels: { version: v.version, commit: v.commit }, value: 1 }] },
      { name: 'hvpxe_machines', help: 'Machines known to hvpxe, by install state.', type: 'gauge', samples: MACHINE_STATES.map((s) => ({ labels: { state: s }, value: byState.get(s)! })) },
      { name: 'hvpxe_artifact_bytes_served_total', help: 'Bytes of artifacts (kernel, initrd, ISO, squashfs) sent to machines.', type: 'counter', samples: [{ value: this.artifactBytes }] },
      { name: 'hvpxe_http_requests_total', help: 'HTTP requests answered, by route and status code.', type: 'counter', samples: this.requests.samples() },
      { name: 'hvpxe_reloads_total', help: 'Reloads of profiles.yaml (SIGHUP, systemctl reload), by result.', type: 'counter', samples: [{ labels: { result: 'ok' }, value: 0 }, { labels: { result: 'refused' }, value: 0 }].map((z) => this.reloads.samples().find((s) => s.labels?.result === z.labels.result) ?? z) },
    ];
    return formatMetrics(families);
  }
}
