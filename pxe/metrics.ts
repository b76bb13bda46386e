/**
 * hvpxe's /metrics (Prometheus text format): machines by state, artifact bytes served, requests by
 * route and status code, refusals, configs served, profile reloads, the history's health and the
 * TFTP transfers. Counters live for the process; gauges are computed at each scrape.
 */
import { formatMetrics, LabelledCounter, type MetricFamily, type Sample } from '../lib/prometheus.js';
import { versionInfo } from '../lib/cli/version.js';
import type { MachineActivity } from './history-document.js';
import type { ArtifactSendVia } from './http.js';

/** Every state a machine is counted in (all are exported, zeros included, so a query never finds none). */
export const MACHINE_STATES = ['unseen', 'booting', 'installing', 'failed', 'installed', 'held'] as const;
export type MachineState = (typeof MACHINE_STATES)[number];

/** Where a machine's install stands, from what hvpxe saw of it. */
export function machineState(a: MachineActivity): MachineState {
  if (a.installed) return 'installed';
  if (a.hold) return 'held';
  const ev = a.progress?.event ?? '';
  if (/fail/i.test(ev)) return 'failed';
  if (a.events.length > 0 || a.fetched.config) return 'installing';
  if (a.fetched.ipxe || a.fetched.grub || a.lastSeen) return 'booting';
  return 'unseen';
}

/** What a scrape reports besides the machines. */
export interface ServerHealth {
  /** The last write of the history succeeded (1) or not (0); undefined without a state directory. */
  historyWritable?: boolean;
  historyWriteFailures?: number;
  /** An earlier history was set aside: machines are held until re-armed. */
  historyLost: boolean;
  /** The last reload of profiles.yaml was refused. */
  reloadRefused: boolean;
  tftpActive?: number;
  /** The machine store (store.ts): its kind and whether it can be read and written now. */
  store?: { kind: string; writable: boolean; failures: number };
}

function gauge(name: string, help: string, value: number, labels?: Record<string, string>): MetricFamily {
  return { name, help, type: 'gauge', samples: [{ ...(labels ? { labels } : {}), value }] };
}

/** A counter's samples with the given label sets present even at zero. */
function withZeros<K extends string>(counter: LabelledCounter<K>, zeros: Array<Record<K, string>>): Sample[] {
  const have = counter.samples();
  const key = (l: Record<string, string> | undefined): string => JSON.stringify(l ?? {});
  return [...zeros.filter((z) => !have.some((s) => key(s.labels) === key(z))).map((labels) => ({ labels, value: 0 })), ...have];
}

export class PxeMetrics {
  readonly requests = new LabelledCounter<'route' | 'code'>();
  readonly reloads = new LabelledCounter<'result'>();
  readonly refusals = new LabelledCounter<'what' | 'reason'>();
  readonly tftp = new LabelledCounter<'result'>();
  /** Install scripts and configs not served because the machine store could not be written. */
  readonly storeRefusals = new LabelledCounter<'what'>();
  /** Artifact bodies sent, by how (zero-copy-send.ts): streamed ones show TLS, the thread cap or a missing addon at work. */
  readonly artifactDownloads = new LabelledCounter<'via'>();
  artifactBytes = 0;
  configsServed = 0;

  /** One answered request; artifact bytes count only what was served (200, 206), never an error body. */
  request(route: string, code: number, artifactBytes: number, via?: ArtifactSendVia): void {
    this.requests.inc({ route, code: String(code) });
    if (route === '/artifacts/' && (code === 200 || code === 206) && artifactBytes > 0) {
      this.artifactBytes += artifactBytes;
      if (via) this.artifactDownloads.inc({ via });
    }
  }

  reload(ok: boolean): void {
    this.reloads.inc({ result: ok ? 'ok' : 'refused' });
  }

  refused(what: string, reason: string): void {
    this.refusals.inc({ what, reason });
  }

  storeRefusal(what: 'script' | 'config'): void {
    this.storeRefusals.inc({ what });
  }

  tftpTransfer(result: 'ok' | 'failed' | 'refused'): void {
    this.tftp.inc({ result });
  }

  render(machines: MachineActivity[], health: ServerHealth): string {
    const byState = new Map<MachineState, number>(MACHINE_STATES.map((s) => [s, 0]));
    for (const m of machines) byState.set(machineState(m), byState.get(machineState(m))! + 1);
    const v = versionInfo('hvpxe');
    const families: MetricFamily[] = [
      gauge('hvpxe_build_info', 'The hvpxe version and the commit it was built from.', 1, { version: v.version, commit: v.commit }),
      { name: 'hvpxe_machines', help: 'Machines known to hvpxe, by install state (held: booting its disk because hvpxe cannot tell whether it finished).', type: 'gauge', samples: MACHINE_STATES.map((s) => ({ labels: { state: s }, value: byState.get(s)! })) },
      { name: 'hvpxe_artifact_bytes_served_total', help: 'Bytes of artifacts (kernel, initrd, ISO, squashfs) sent to machines.', type: 'counter', samples: [{ value: this.artifactBytes }] },
      { name: 'hvpxe_artifact_downloads_total', help: 'Artifact bodies sent, by how: sendfile, or streamed through hvpxe (TLS, every sending thread busy, no sendfile addon).', type: 'counter', samples: withZeros(this.artifactDownloads, [{ via: 'sendfile' }, { via: 'streamed' }]) },
      { name: 'hvpxe_configs_served_total', help: 'Configs handed to machines (one per boot credential).', type: 'counter', samples: [{ value: this.configsServed }] },
      { name: 'hvpxe_http_requests_total', help: 'HTTP requests answered, by route and status code.', type: 'counter', samples: this.requests.samples() },
      { name: 'hvpxe_refused_total', help: 'Requests refused for a machine (config, events, attest), by reason.', type: 'counter', samples: this.refusals.samples() },
      { name: 'hvpxe_reloads_total', help: 'Reloads of profiles.yaml (SIGHUP, systemctl reload), by result.', type: 'counter', samples: withZeros(this.reloads, [{ result: 'ok' }, { result: 'refused' }]) },
      gauge('hvpxe_last_reload_refused', 'Whether the last reload of profiles.yaml was refused (the previous profiles are still served).', health.reloadRefused ? 1 : 0),
      gauge('hvpxe_history_lost', 'Whether an unreadable machine history was set aside at start-up (machines boot their disk until re-armed).', health.historyLost ? 1 : 0),
      { name: 'hvpxe_tftp_transfers_total', help: 'TFTP transfers, by result (refused: over a concurrency cap).', type: 'counter', samples: withZeros(this.tftp, [{ result: 'ok' }, { result: 'failed' }, { result: 'refused' }]) },
    ];
    if (health.historyWritable !== undefined) {
      families.push(gauge('hvpxe_history_writable', 'Whether the last write of the machine history succeeded.', health.historyWritable ? 1 : 0));
      families.push({ name: 'hvpxe_history_write_failures_total', help: 'Failed writes of the machine history (each is retried).', type: 'counter', samples: [{ value: health.historyWriteFailures ?? 0 }] });
    }
    if (health.store) {
      const kind = { store: health.store.kind };
      families.push(gauge('hvpxe_store_available', 'Whether the machine store can be read and written now (etcd: the last probe or write succeeded).', health.store.writable ? 1 : 0, kind));
      families.push({ name: 'hvpxe_store_failures_total', help: 'Failed writes and probes of the machine store.', type: 'counter', samples: [{ labels: kind, value: health.store.failures }] });
      families.push({ name: 'hvpxe_store_refused_total', help: 'Install scripts and configs not served because the machine store could not be written (the machine got its disk, or a 503).', type: 'counter', samples: withZeros(this.storeRefusals, [{ what: 'script' }, { what: 'config' }]) });
    }
    if (health.tftpActive !== undefined) families.push(gauge('hvpxe_tftp_transfers_active', 'TFTP transfers in progress.', health.tftpActive));
    return formatMetrics(families);
  }
}
