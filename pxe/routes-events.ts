/**
 * POST /events/<machine>?credential=…: install progress from the installer (Harvester's webhooks
 * and hvinstall's own events), only with a boot credential of one of the machine's current boots
 * (credentials.ts; for a machine enrolled by its TPM, of the boot that proved it). What is kept is a
 * bounded, redacted summary (event-body.ts); an outcome (success or failure) is written to the
 * store before the answer, and in a fleet (etcd) every event is: a 2xx means it is stored.
 */
import { BOOT_CREDENTIAL_PARAM } from '../config/hvpxe-protocol.js';
import { readBounded, type RequestContext, type Route } from './http.js';
import { EVENT_BODY, summariseEventBody } from './event-body.js';
import { refuseCredential, target, withStore } from './route-guards.js';
import type { ServeContext } from './serve-context.js';

async function events(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = await target(ctx, c, name);
  if (!m) return;
  const body = await readBounded(c.req, EVENT_BODY.maxBytes);
  if (body === undefined) {
    c.res.setHeader('Connection', 'close');
    return c.reply(413, `event body larger than ${EVENT_BODY.maxBytes} bytes\n`);
  }
  const credential = c.query.get(BOOT_CREDENTIAL_PARAM);
  const attested = !!m.tpmEkSha256;
  const check = await withStore(ctx, c, m, 'event', () => ctx.book.checkCredential(m.name, credential, 'events', attested));
  if (!check) return;
  if (!check.ok) return refuseCredential(ctx, c, m, 'events', check);
  const summary = summariseEventBody(body, c.state.redactor);
  const stored = await withStore(ctx, c, m, 'event', () => ctx.book.event(m, credential!, attested, summary, c.client));
  if (!stored) return;
  if (!stored.ok) return refuseCredential(ctx, c, m, 'events', stored);
  c.reply(204, '');
}

export function eventRoutes(ctx: ServeContext): Route[] {
  return [{ path: '/events/', method: 'POST', handle: (c, name) => events(ctx, c, name) }];
}
