/**
 * POST /events/<machine>?credential=…: install progress from the installer (Harvester's webhooks
 * and hvinstall's own events), only with a boot credential of one of the machine's current boots
 * (credentials.ts; for a machine enrolled by its TPM, of the boot that proved it). What is kept is a
 * bounded, redacted summary (event-body.ts); an outcome
 * (success or failure) is written to the history before the answer.
 */
import { BOOT_CREDENTIAL_PARAM } from '../config/hvpxe-protocol.js';
import { readBounded, type RequestContext, type Route } from './http.js';
import { EVENT_BODY, summariseEventBody } from './event-body.js';
import { reportsFailure, reportsSuccess } from './boot-decision.js';
import { refuseCredential, target } from './route-guards.js';
import type { ServeContext } from './serve-context.js';

async function events(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const t = target(ctx, c, name);
  if (!t) return;
  const { m, a } = t;
  const body = await readBounded(c.req, EVENT_BODY.maxBytes);
  if (body === undefined) {
    c.res.setHeader('Connection', 'close');
    return c.reply(413, `event body larger than ${EVENT_BODY.maxBytes} bytes\n`);
  }
  const check = ctx.book.checkCredential(a, c.query.get(BOOT_CREDENTIAL_PARAM), 'events', !!m.tpmEkSha256);
  if (!check.ok) return refuseCredential(ctx, c, a, 'events', check);
  const summary = summariseEventBody(body, c.state.redactor);
  ctx.book.seen(a, c.client);
  ctx.book.recordEvent(a, summary);
  const data = typeof summary.data === 'object' ? summary.data : undefined;
  // An outcome decides the machine's next boot: on disk before the installer hears back (a failed write is retried).
  if (reportsSuccess(data) || reportsFailure(data)) await ctx.book.persistNow().catch(() => undefined);
  c.reply(204, '');
}

export function eventRoutes(ctx: ServeContext): Route[] {
  return [{ path: '/events/', method: 'POST', handle: (c, name) => events(ctx, c, name) }];
}
