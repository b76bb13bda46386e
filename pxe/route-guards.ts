/** The checks the machine routes share: the machine named in the path, and a refused credential. */
import { REFUSAL_TEXT, type CredentialCheck } from './credentials.js';
import type { RequestContext } from './http.js';
import { machineByName, type Machine } from './profiles.js';
import type { ServeContext } from './serve-context.js';
import { StoreUnavailable } from './store.js';

const NOT_FOUND = 'no such machine, or no boot credential of its own (the config URL is the one in the script hvpxe served)\n';

/** The machine named in the path, or the 404 already sent. */
export async function target(ctx: ServeContext, c: RequestContext, name: string): Promise<Machine | undefined> {
  const m = machineByName(c.state.catalog, name);
  if (!m || !(await ctx.book.makeRoom(m))) {
    c.req.resume();
    c.reply(404, NOT_FOUND);
    return undefined;
  }
  c.note.machine = m.name;
  return m;
}

/** Records and answers a refused credential: 404 when it was none of the machine's, 403 with the reason otherwise. */
export async function refuseCredential(ctx: ServeContext, c: RequestContext, m: Machine, what: 'config' | 'events' | 'attest', check: Exclude<CredentialCheck, { ok: true }>): Promise<void> {
  await ctx.book.refuse(m, what, check.reason, REFUSAL_TEXT[check.reason], c.client);
  if (check.reason === 'missing' || check.reason === 'malformed' || check.reason === 'unknown') c.reply(404, NOT_FOUND);
  else c.reply(403, `refused: ${REFUSAL_TEXT[check.reason]}\n`);
}

/** The answer when the machine store cannot record what a request changes: nothing was done, try again. */
export function storeUnavailable(ctx: ServeContext, c: RequestContext, m: Machine, what: string, err: Error): void {
  ctx.log.error(`${what} not served: the machine store cannot be written`, { machine: m.name, error: err.message });
  c.reply(503, 'hvpxe cannot record this in its machine store right now; retry shortly\n', undefined, { 'Retry-After': '10' });
}

/** Runs what needs the machine store; when it cannot be read or written, answers 503 and gives undefined. */
export async function withStore<T>(ctx: ServeContext, c: RequestContext, m: Machine, what: string, run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof StoreUnavailable)) throw err;
    storeUnavailable(ctx, c, m, what, err);
    return undefined;
  }
}
