/** The checks the machine routes share: the machine named in the path, and a refused credential. */
import { REFUSAL_TEXT, type CredentialCheck } from './credentials.js';
import type { MachineActivity } from './history-document.js';
import type { RequestContext } from './http.js';
import { machineByName, type Machine } from './profiles.js';
import type { ServeContext } from './serve-context.js';

const NOT_FOUND = 'no such machine, or no boot credential of its own (the config URL is the one in the script hvpxe served)\n';

/** The machine and its activity, or the 404 already sent. */
export function target(ctx: ServeContext, c: RequestContext, name: string): { m: Machine; a: MachineActivity } | undefined {
  const m = machineByName(c.state.catalog, name);
  const a = m ? ctx.book.track(m) : undefined;
  if (!m || !a) {
    c.req.resume();
    c.reply(404, NOT_FOUND);
    return undefined;
  }
  c.note.machine = m.name;
  return { m, a };
}

/** Records and answers a refused credential: 404 when it was none of the machine's, 403 with the reason otherwise. */
export function refuseCredential(ctx: ServeContext, c: RequestContext, a: MachineActivity, what: 'config' | 'events' | 'attest', check: Exclude<CredentialCheck, { ok: true }>): void {
  ctx.book.refuse(a, what, check.reason, REFUSAL_TEXT[check.reason], c.client);
  if (check.reason === 'missing' || check.reason === 'malformed' || check.reason === 'unknown') c.reply(404, NOT_FOUND);
  else c.reply(403, `refused: ${REFUSAL_TEXT[check.reason]}\n`);
}
