/**
 * hvagent's metrics for node_exporter's textfile collector (--collector.textfile.directory): each
 * guard's phase and attempts, when it last succeeded, what the image preload imported, and when each
 * of RKE2's certificates expires (a timestamp, so the file never goes stale between the daily checks:
 * alert on `hvagent_rke2_certificate_expiry_timestamp_seconds - time() < 30 * 86400`). Written
 * atomically next to every status document write, so the collector never reads half a file.
 */
import { formatMetrics, type MetricFamily } from '../lib/prometheus.js';
import { versionInfo } from '../lib/cli/version.js';
import type { GuardPhase, StatusDocument } from './guard.js';

/** The usual textfile-collector directory (node_exporter's own examples and packages use it). */
export const METRICS_TEXTFILE_PATH = '/var/lib/node_exporter/textfile_collector/hvagent.prom';

export const GUARD_PHASES: readonly GuardPhase[] = ['pending', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'watching', 'stopped'];

/** The numbers the image-preload guard reports (ctx.report) that become metrics. */
export interface PreloadReport {
  importedBytes?: number;
  importedArchives?: number;
  listedImages?: number;
}

/** What the certificates guard reports (agent/guards/certificates.ts) that becomes metrics. */
export interface CertificatesReport {
  certificates?: Array<{ path: string; scope: string; notAfter: string }>;
}

function certificateFamily(doc: StatusDocument): MetricFamily | undefined {
  const certs = ((doc.guards.find((g) => g.name === 'certificates')?.data ?? {}) as CertificatesReport).certificates;
  if (!certs?.length) return undefined;
  return {
    name: 'hvagent_rke2_certificate_expiry_timestamp_seconds',
    help: "When each of RKE2's certificates expires (notAfter, Unix time), as the certificates guard last read it.",
    type: 'gauge',
    samples: certs.map((c) => ({ labels: { path: c.path, scope: c.scope }, value: Date.parse(c.notAfter) / 1000 })),
  };
}

/** `lastSuccess`: per guard, the epoch ms it last reached `succeeded` in this process. */
export function formatAgentMetrics(doc: StatusDocument, lastSuccess: ReadonlyMap<string, number>): string {
  const preload = (doc.guards.find((g) => g.name === 'image-preload')?.data ?? {}) as PreloadReport;
  const v = versionInfo('hvagent');
  const families: MetricFamily[] = [
    { name: 'hvagent_build_info', help: 'The hvagent version and the commit it was built from.', type: 'gauge', samples: [{ labels: { version: v.version, commit: v.commit }, value: 1 }] },
    {
      name: 'hvagent_guard_phase',
      help: "Each guard's phase: 1 for the current one, 0 for the others.",
      type: 'gauge',
      samples: doc.guards.flatMap((g) => GUARD_PHASES.map((p) => ({ labels: { guard: g.name, phase: p }, value: g.phase === p ? 1 : 0 }))),
    },
    { name: 'hvagent_guard_attempts', help: "Each guard's attempts in this agent run.", type: 'gauge', samples: doc.guards.map((g) => ({ labels: { guard: g.name }, value: g.attempts })) },
    {
      name: 'hvagent_guard_last_success_timestamp_seconds',
      help: 'When each guard last succeeded (Unix time); guards that have not are left out.',
      type: 'gauge',
      samples: doc.guards.filter((g) => lastSuccess.has(g.name)).map((g) => ({ labels: { guard: g.name }, value: lastSuccess.get(g.name)! / 1000 })),
    },
  ];
  if (preload.importedBytes !== undefined) {
    families.push(
      { name: 'hvagent_preload_imported_bytes', help: 'Bytes of image archives the last preload imported into containerd.', type: 'gauge', samples: [{ value: preload.importedBytes }] },
      { name: 'hvagent_preload_imported_archives', help: 'Image archives the last preload imported.', type: 'gauge', samples: [{ value: preload.importedArchives ?? 0 }] },
      { name: 'hvagent_preload_images', help: 'Images the bundle lists (all present after a successful preload).', type: 'gauge', samples: [{ value: preload.listedImages ?? 0 }] },
    );
  }
  const certs = certificateFamily(doc);
  if (certs) families.push(certs);
  return formatMetrics(families);
}
