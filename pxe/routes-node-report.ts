/**
 * Post-install reports (node-report.ts):
 *   POST /report-token/<machine>?credential=…  the installer trades its boot credential for the
 *        machine's node-report token (JSON NodeReportGrant), once per boot credential;
 *   POST /node-events/<machine>                the installed node's event (FALLBACK, UPGRADED) with
 *        `Authorization: Bearer <token>`; kept in the machine's history, deciding nothing.
 * Every refusal for a known machine is recorded (refusals in /machines, the log, a metric).
 */
import { BOOT_CREDENTIAL_PARAM, NODE_EVENT_BODY_MAX, NODE_EVENTS, NODE_EVENTS_PATH, REPORT_TOKEN_PATH, type NodeReportGrant } from '../config/hvpxe-protocol.js';
import { JSON_TYPE, readBounded, type RequestContext, type Route } from './http.js';
import { parseNodeEvent, REPORT_REFUSAL_TEXT, type ReportRefusal } from './node-report.js';
import { target, withStore } from './route-guards.js';
import type { Machine } from './profiles.js';
import type { ServeContext } from './serve-context.js';

const NOT_FOUND = 'no such machine, or not its credential\n';

async function refuse(ctx: ServeContext, c: RequestContext, m: Machine, what: 'report-token' | 'node-events', reason: ReportRefusal): Promise<void> {
  await ctx.book.refuse(m, what, reason, REPORT_REFUSAL_TEXT[reason], c.client);
  if (reason === 'missing' || reason === 'malformed' || reason === 'unknown') c.reply(what === 'node-events' ? 401 : 404, NOT_FOUND, undefined, what === 'node-events' ? { 'WWW-Authenticate': 'Bearer' } : undefined);
  else c.reply(403, `refused: ${REPORT_REFUSAL_TEXT[reason]}\n`);
}

async function reportToken(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = await target(ctx, c, name);
  if (!m) return;
  c.req.resume();
  const issued = await withStore(ctx, c, m, 'report token', () => ctx.book.issueReportToken(m, c.query.get(BOOT_CREDENTIAL_PARAM), !!m.tpmEkSha256, c.client));
  if (!issued) return;
  if (!issued.ok) return refuse(ctx, c, m, 'report-token', issued.reason);
  ctx.log.info('node-report token issued', { machine: m.name, client: c.client || undefined });
  const grant: NodeReportGrant = { url: `${c.state.serverUrl.replace(/\/+$/, '')}${NODE_EVENTS_PATH}${encodeURIComponent(m.name)}`, token: issued.token, machine: m.name, events: NODE_EVENTS };
  c.reply(200, JSON.stringify(grant) + '\n', JSON_TYPE, { 'Cache-Control': 'no-store' });
}

async function nodeEvent(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = await target(ctx, c, name);
  if (!m) return;
  const body = await readBounded(c.req, NODE_EVENT_BODY_MAX);
  if (body === undefined) {
    c.res.setHeader('Connection', 'close');
    return c.reply(413, `node event body larger than ${NODE_EVENT_BODY_MAX} bytes\n`);
  }
  const auth = c.req.headers.authorization;
  const parsed = parseNodeEvent(body.toString('utf8'), c.state.redactor);
  // The token first: without it, nothing about the body is answered.
  const stored = await withStore(ctx, c, m, 'node event', async () => (parsed.ok ? ctx.book.nodeEvent(m, auth, parsed.event, c.client) : ctx.book.nodeEvent(m, auth, undefined, c.client)));
  if (!stored) return;
  if (!stored.ok) return refuse(ctx, c, m, 'node-events', stored.reason);
  if (!parsed.ok) return c.reply(400, `not a node event: ${parsed.why}\n`);
  ctx.log.info('node event', { machine: m.name, event: parsed.event.event });
  c.reply(204, '');
}

export function nodeReportRoutes(ctx: ServeContext): Route[] {
  return [
    { path: REPORT_TOKEN_PATH, method: 'POST', handle: (c, name) => reportToken(ctx, c, name) },
    { path: NODE_EVENTS_PATH, method: 'POST', handle: (c, name) => nodeEvent(ctx, c, name) },
  ];
}
