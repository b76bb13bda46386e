/**
 * Turns RKE2's `x509: certificate has expired or is not yet valid` into what it means on a new
 * node: the clock is off (harvester/harvester#2860, #6837). Go's crypto/x509 names both times
 * ("current time T is before NOTBEFORE" / "is after NOTAFTER"), which gives the offset without a
 * network; without them, the join server's clock is asked.
 */
import { formatOffset, offsetSentence, serverOffset } from '../time/clock.js';
import type { ServerClock } from '../time/clock.js';

const X509_TIME = /x509: certificate has expired or is not yet valid(?::\s*current time (\S+) is (before|after) (\S+?)(?=[\s"',;)\]]|$))?/;

export interface CertificateTimeError {
  /** The log's wording, for the diagnosis. */
  quote: string;
  current?: number;
  relation?: 'before' | 'after';
  bound?: number;
}

/** The last certificate-time error in a log tail, if any. Pure. */
export function findCertificateTimeError(tail: string): CertificateTimeError | undefined {
  const lines = tail.split('\n').filter((l) => l.includes('x509: certificate has expired or is not yet valid'));
  const line = lines.at(-1);
  if (!line) return undefined;
  const m = X509_TIME.exec(line)!;
  const current = m[1] ? Date.parse(m[1]) : NaN;
  const bound = m[3] ? Date.parse(m[3]) : NaN;
  if (!Number.isFinite(current) || !Number.isFinite(bound)) return { quote: 'x509: certificate has expired or is not yet valid' };
  return { quote: m[0], current, relation: m[2] as 'before' | 'after', bound };
}

/** One line naming the clock as the cause. Pure; `server` is the join server's clock when measured. */
export function explainCertificateTime(e: CertificateTimeError, server?: ServerClock): string {
  const said = `RKE2 logged "${e.quote}"`;
  if (e.relation === 'before') {
    return `${offsetSentence(e.current! - e.bound!, 'the certificate\'s start at least')}: ${said}. Set the clock right (NTP: hvagent status shows time-sync), then restart RKE2`;
  }
  if (e.relation === 'after') {
    return `a certificate expired ${formatOffset(e.current! - e.bound!)} ago by this node's clock: ${said}. Either the clock is ahead (check hvagent status, time-sync) or the certificate really expired (RKE2 rotates its own at start; \`rke2 certificate rotate\`)`;
  }
  const so = server ? serverOffset(server) : undefined;
  if (server && so) return `${offsetSentence(so.offsetMs, `the join server's (${server.url})`)}: ${said}. Set the clock right, then restart RKE2`;
  return `${said}: the clock is probably wrong (hvagent status shows time-sync${server?.problem ? `; the join server's clock is unknown: ${server.problem}` : ''})`;
}
