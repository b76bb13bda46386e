/**
 * The node-report token (config/hvpxe-protocol.ts): during an automatic install from hvpxe, the
 * installer trades its boot credential for the machine's token, and the install writes it with
 * hvpxe's node-events URL to NODE_REPORT_PATH (root-only, COS_OEM), where hvagent finds it to tell
 * hvpxe of a fallback. Best effort: an install is never stopped for it (the node then cannot tell
 * hvpxe, and says so when it would).
 */
import { request } from 'undici';
import { BOOT_CREDENTIAL_PARAM, NODE_EVENTS_PATH, REPORT_TOKEN_PATH, REPORT_TOKEN_RE, type NodeReportGrant } from '../../config/hvpxe-protocol.js';
import type { Logger } from '../../lib/logger.js';
import { sleep } from '../../lib/wait.js';

export const REPORT_TOKEN_REQUEST = { attempts: 3, timeoutMs: 5_000, retryDelayMs: 2_000 } as const;

/** The token URL beside hvpxe's events URL (`…/events/<machine>?credential=…` → `…/report-token/<machine>?credential=…`). Pure. */
export function reportTokenUrl(eventsUrl: string | undefined): string | undefined {
  if (!eventsUrl) return undefined;
  let u: URL;
  try {
    u = new URL(eventsUrl);
  } catch {
    return undefined;
  }
  const m = /^(.*)\/events\/([^/]+)$/.exec(u.pathname);
  if (!m || !u.searchParams.get(BOOT_CREDENTIAL_PARAM)) return undefined;
  u.pathname = `${m[1]}${REPORT_TOKEN_PATH}${m[2]}`;
  return u.toString();
}

/** A grant as hvpxe answers it, checked: its token's form, an http(s) node-events URL for the same machine. Pure. */
export function checkGrant(v: unknown, eventsUrl: string): NodeReportGrant | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const g = v as Partial<NodeReportGrant>;
  if (typeof g.token !== 'string' || !REPORT_TOKEN_RE.test(g.token) || typeof g.url !== 'string' || typeof g.machine !== 'string' || !Array.isArray(g.events)) return undefined;
  const url = URL.canParse(g.url) ? new URL(g.url) : undefined;
  const from = new URL(eventsUrl);
  if (!url || !/^https?:$/.test(url.protocol) || url.origin !== from.origin || !url.pathname.endsWith(`${NODE_EVENTS_PATH}${encodeURIComponent(g.machine)}`)) return undefined;
  return { url: g.url, token: g.token, machine: g.machine, events: g.events };
}

/** Asks hvpxe for the node-report token (bounded retries); undefined, logged, when it cannot be had. */
export async function requestReportToken(eventsUrl: string | undefined, log: Logger, opts: Partial<Record<keyof typeof REPORT_TOKEN_REQUEST, number>> = {}): Promise<NodeReportGrant | undefined> {
  const url = reportTokenUrl(eventsUrl);
  if (!url || !eventsUrl) return undefined;
  const o = { ...REPORT_TOKEN_REQUEST, ...opts };
  let last = '';
  for (let attempt = 1; attempt <= o.attempts; attempt++) {
    try {
      const res = await request(url, { method: 'POST', body: '', signal: AbortSignal.timeout(o.timeoutMs) });
      const text = await res.body.text();
      if (res.statusCode === 200) {
        const grant = checkGrant(JSON.parse(text) as unknown, eventsUrl);
        if (grant) {
          log.redactor.add(grant.token);
          log.info('hvpxe node-report token received: the node can tell hvpxe of a fallback', { url: grant.url });
          return grant;
        }
        last = 'the answer is not a node-report grant';
        break;
      }
      last = `HTTP ${res.statusCode}: ${log.redactor.redactString(text.trim()).slice(0, 200)}`;
      if (res.statusCode < 500) break;
    } catch (err) {
      last = log.redactor.redactString((err as Error).message);
    }
    if (attempt < o.attempts) await sleep(o.retryDelayMs);
  }
  log.warn('no hvpxe node-report token: the installed node will not tell hvpxe of a fallback', { url: log.redactor.redactString(url), error: last });
  return undefined;
}
