/**
 * What to do about RKE2's certificates, from facts to a plan. Pure.
 *
 * RKE2's client and serving certificates last 365 days; RKE2 renews the ones close to expiry each
 * time it starts (docs.rke2.io/security/certificates), so a node that runs for a year without a
 * restart, or that was off when they expired, finds them expired: the API server, the kubelet and
 * every VM on the node stop (harvester/harvester#5833), and a server whose supervisor certificate
 * expired while it was off does not come up at all (rancher/rke2#8318). Harvester's
 * auto-rotate-rke2-certs acts through the cluster, which is gone by then (harvester/harvester#9351).
 *
 * So: every certificate's days left are reported (status, console, metrics, a Node Event from
 * `warnDays` on), and a node whose server certificates expired while RKE2 was not running gets
 * `rke2 certificate rotate` before hvagent starts RKE2 (the manual procedure the RKE2 docs give:
 * stop rke2-server, rotate, start). Only once per expired set: the record of an earlier rotate for
 * the same certificates (path and notAfter) stops a second one, whatever its outcome. Under
 * rancherd hvagent reports and does not act; CA certificates (ten years) are reported, never rotated
 * (`rke2 certificate rotate` does not renew a CA).
 */

export const DAY_MS = 86_400_000;

export type CertScope = 'server' | 'agent';

/** One certificate file as read (its first certificate: RKE2's client bundles carry the CA after it). */
export interface CertificateFact {
  /** Node path, e.g. /var/lib/rancher/rke2/server/tls/serving-kube-apiserver.crt. */
  path: string;
  /** server: under server/tls (rke2 certificate rotate renews it); agent: under agent/ (rke2-agent renews it from the server). */
  scope: CertScope;
  ca: boolean;
  notAfterMs: number;
}

export interface UnreadableCertificate {
  path: string;
  problem: string;
}

/** An earlier `rke2 certificate rotate` by hvagent (/var/lib/rancher/hvagent/certificate-rotation.json). */
export interface RotationRecord {
  version: 1;
  at: string;
  outcome: 'rotated' | 'failed';
  /** The command's last output line, or why it failed. */
  detail: string;
  /** The expired server certificates it was run for. */
  expired: Array<{ path: string; notAfter: string }>;
}

export interface CertificateFacts {
  certs: CertificateFact[];
  unreadable: UnreadableCertificate[];
  nowMs: number;
  /** Report (and send an Event) when a certificate has fewer days left than this. */
  warnDays: number;
  bootstrapper: 'rancherd' | 'hvagent';
  /** rke2-server runs now: hvagent does not stop it to rotate. Read only when server certificates expired. */
  rke2ServerRunning: boolean;
  /** hvagent has not started RKE2 yet in this run (the guard's reconcile); the daily watch only reports. */
  beforeStart: boolean;
  record?: RotationRecord;
}

export type CertLevel = 'ok' | 'expiring' | 'expired';

export interface CertificateRow {
  path: string;
  scope: CertScope;
  ca: boolean;
  notAfter: string;
  /** Whole days left, rounded down; negative once expired. */
  daysLeft: number;
  level: CertLevel;
}

export interface CertificatePlan {
  /** Soonest first. */
  rows: CertificateRow[];
  /** The worst level; `none` when there are no certificates yet. */
  level: CertLevel | 'none';
  /** Run `rke2 certificate rotate` for these expired server certificates. */
  rotate?: RotationRecord['expired'];
  /** Set when expired server certificates stay expired before hvagent starts RKE2: RKE2 waits, with this diagnosis. */
  failure?: string;
  /** One line for the status detail and the console: days left of the soonest. */
  summary: string;
  /** What hvagent did not do and what a person does instead. */
  notes: string[];
  /** The Node Event to send (once the API answers): from `warnDays` days left on. */
  event?: { reason: 'RKE2CertificateExpiring' | 'RKE2CertificateExpired'; message: string };
}

const ROTATE_BY_HAND = 'systemctl stop rke2-server; rke2 certificate rotate; systemctl start rke2-server';

export function certificateRows(certs: CertificateFact[], nowMs: number, warnDays: number): CertificateRow[] {
  return certs
    .map((c) => {
      const left = c.notAfterMs - nowMs;
      const level: CertLevel = left <= 0 ? 'expired' : left < warnDays * DAY_MS ? 'expiring' : 'ok';
      return { path: c.path, scope: c.scope, ca: c.ca, notAfter: new Date(c.notAfterMs).toISOString(), daysLeft: Math.floor(left / DAY_MS), level };
    })
    .sort((a, b) => Date.parse(a.notAfter) - Date.parse(b.notAfter) || a.path.localeCompare(b.path));
}

function baseName(p: string): string {
  return p.slice(p.lastIndexOf('/') + 1);
}

function describe(r: CertificateRow): string {
  const day = r.notAfter.slice(0, 10);
  if (r.level === 'expired') return `${baseName(r.path)} expired on ${day}`;
  return `${baseName(r.path)} expires in ${r.daysLeft} day${r.daysLeft === 1 ? '' : 's'} (${day})`;
}

function summarise(rows: CertificateRow[], unreadable: UnreadableCertificate[]): string {
  const bad = unreadable.length ? `; ${unreadable.length} unreadable (${unreadable.map((u) => baseName(u.path)).join(', ')})` : '';
  if (!rows.length) return `no RKE2 certificates yet (RKE2 makes them at its first start)${bad}`;
  const expired = rows.filter((r) => r.level === 'expired');
  const expiring = rows.filter((r) => r.level === 'expiring');
  const soonest = rows[0]!;
  const head = expired.length ? `EXPIRED: ${expired.length} of ${rows.length} RKE2 certificates` : expiring.length ? `expiring: ${expiring.length} of ${rows.length} RKE2 certificates` : `${rows.length} RKE2 certificates`;
  return `${head}; soonest: ${describe(soonest)}${bad}`;
}

/** True when the record was written for exactly these expired certificates (or a superset). */
export function recordCovers(record: RotationRecord | undefined, expired: RotationRecord['expired']): boolean {
  if (!record) return false;
  return expired.every((e) => record.expired.some((r) => r.path === e.path && r.notAfter === e.notAfter));
}

/** Why expired server certificates are not rotated now, or undefined when they are. */
function whyNotRotate(f: CertificateFacts, expired: RotationRecord['expired']): { note: string; fail: boolean } | undefined {
  if (f.bootstrapper === 'rancherd') return { note: `rancherd owns RKE2 here: hvagent reports and does not rotate; on the node: ${ROTATE_BY_HAND}`, fail: false };
  if (!f.beforeStart) return { note: `the server certificates expired while RKE2 ran: ${ROTATE_BY_HAND}`, fail: false };
  if (f.rke2ServerRunning) return { note: `rke2-server is running: hvagent rotates only before it starts RKE2; ${ROTATE_BY_HAND}`, fail: false };
  if (recordCovers(f.record, expired)) {
    const r = f.record!;
    const what = r.outcome === 'rotated' ? 'and they are still expired' : `and it failed: ${r.detail}`;
    return { note: `hvagent ran rke2 certificate rotate for these certificates at ${r.at} ${what}; it does not run it twice: ${ROTATE_BY_HAND}, then hvagent once --guard certificates`, fail: true };
  }
  return undefined;
}

/** The server certificates (not CAs) expired at nowMs: what `rke2 certificate rotate` renews. */
export function expiredServerCertificates(rows: CertificateRow[]): RotationRecord['expired'] {
  return rows.filter((r) => r.scope === 'server' && !r.ca && r.level === 'expired').map((r) => ({ path: r.path, notAfter: r.notAfter }));
}

export function planCertificates(f: CertificateFacts): CertificatePlan {
  const rows = certificateRows(f.certs, f.nowMs, f.warnDays);
  const notes: string[] = f.unreadable.map((u) => `${u.path}: ${u.problem}`);
  const serverExpired = expiredServerCertificates(rows);
  let rotate: CertificatePlan['rotate'];
  let failure: string | undefined;
  if (serverExpired.length) {
    const not = whyNotRotate(f, serverExpired);
    if (not) {
      notes.push(not.note);
      if (not.fail) failure = not.note;
    } else rotate = serverExpired;
  }
  if (rows.some((r) => r.scope === 'agent' && !r.ca && r.level === 'expired')) notes.push('rke2-agent renews its own certificates from the server at its start: systemctl restart rke2-agent');
  if (rows.some((r) => r.ca && r.level !== 'ok')) notes.push('a CA certificate expires: rke2 certificate rotate does not renew CAs (rke2 certificate rotate-ca, docs.rke2.io/security/certificates)');
  const level = rows.some((r) => r.level === 'expired') ? 'expired' : rows.some((r) => r.level === 'expiring') ? 'expiring' : rows.length ? 'ok' : 'none';
  const summary = summarise(rows, f.unreadable);
  const event =
    level === 'expired' || level === 'expiring'
      ? { reason: level === 'expired' ? ('RKE2CertificateExpired' as const) : ('RKE2CertificateExpiring' as const), message: `${summary}${notes.length ? `. ${notes.join('. ')}` : ''}` }
      : undefined;
  return { rows, level, rotate, failure, summary, notes, event };
}
