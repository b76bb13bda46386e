/**
 * The operator's side of hvpxe: /machines, /metrics and the full /healthz, served on the admin
 * listener (127.0.0.1:8081 by default) and only to a request with the operator's bearer token
 * (`Authorization: Bearer <token>`, the token read from a 0600 file, created at first start). The
 * boot listener serves none of them: what it publishes is only what a booting machine needs, and a
 * listing of machines and their identifiers would hand out what unlocks their scripts.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import type http from 'node:http';
import { writeFileAtomic } from '../lib/atomic-write.js';
import { ExitCode, HvError } from '../lib/errors.js';
import { PROMETHEUS_CONTENT_TYPE } from '../lib/prometheus.js';
import { JSON_TYPE, type RequestContext, type Route } from './http.js';
import type { MachineActivity } from './history-document.js';
import type { ServeContext } from './serve-context.js';
import type { ServerHealth } from './metrics.js';
import type { StoreHealth } from './store.js';

export const ADMIN_TOKEN_FILE = 'admin-token';
export const DEFAULT_ADMIN_LISTEN = '127.0.0.1:8081';

/** The operator token: read from its file (which must be 0600), or (`create`) created there when there is none. */
export async function loadAdminToken(file: string, create = true): Promise<{ token: string; created: boolean }> {
  let st;
  try {
    st = await stat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || !create) {
      throw new HvError(`cannot read the admin token ${file}: ${(err as NodeJS.ErrnoException).code}`, { where: file, hint: 'hvpxe serve creates it in its state directory at start-up; pass --admin-token-file or --state-dir', exitCode: ExitCode.usage });
    }
    const token = randomBytes(32).toString('base64url');
    await writeFileAtomic(file, `${token}\n`, { mode: 0o600 });
    return { token, created: true };
  }
  if ((st.mode & 0o077) !== 0) {
    throw new HvError(`the admin token ${file} is readable by others (mode ${(st.mode & 0o777).toString(8)})`, { where: file, hint: `chmod 600 ${file}`, exitCode: ExitCode.usage });
  }
  const token = (await readFile(file, 'utf8')).trim();
  if (token.length < 16 || /\s/.test(token)) throw new HvError(`the admin token in ${file} must be one word of at least 16 characters`, { where: file, exitCode: ExitCode.usage });
  return { token, created: false };
}

/** Whether a request carries the operator token. */
export function authorised(req: http.IncomingMessage, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m) return false;
  const given = Buffer.from(m[1]);
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** What /healthz says, and what the operator must look at. */
export interface HealthReport {
  status: 'ok' | 'degraded';
  problems: string[];
}

export interface AdminSources {
  health: () => ServerHealth & { lastReloadError?: string; historyFailingSince?: string; historyLastError?: string; historyFile?: string; lostAt?: string; lostKeptAs?: string; store?: StoreHealth };
  reloads: () => number;
}

export function healthReport(h: ReturnType<AdminSources['health']>, held: number): HealthReport {
  const problems: string[] = [];
  if (h.reloadRefused) problems.push(`the last reload of profiles.yaml was refused (still serving the previous profiles): ${h.lastReloadError}`);
  if (h.historyWritable === false) problems.push(`the machine history ${h.historyFile} cannot be written since ${h.historyFailingSince} (${h.historyLastError}); retrying, and no config is served until it can`);
  if (h.store?.kind === 'etcd' && !h.store.writable) problems.push(`the machine store (${h.store.where}) cannot be read and written since ${h.store.failingSince} (${h.store.lastError}): no install script and no config is served until it can; known machines boot their disk; artifacts are still served`);
  if (h.historyLost) problems.push(`the machine history was lost at ${h.lostAt} (kept as ${h.lostKeptAs}): every machine boots its disk until \`hvpxe rearm\``);
  if (held > 0) problems.push(`${held} machine${held === 1 ? '' : 's'} held on local boot because hvpxe cannot tell whether ${held === 1 ? 'it' : 'they'} finished installing (\`hvpxe machines\`; \`hvpxe rearm\` installs)`);
  return { status: problems.length ? 'degraded' : 'ok', problems };
}

/** A machine as /machines shows it: credentials and its node-report token without their hashes. */
function shown(a: MachineActivity): Record<string, unknown> {
  const { credentials, reportToken, ...rest } = a;
  const token = reportToken ? { reportToken: { issuedAt: reportToken.issuedAt, ...(reportToken.via ? { via: reportToken.via } : {}) } } : {};
  return { ...rest, ...token, ...(credentials ? { credentials: credentials.map(({ sha256: _sha, ...c }) => c) } : {}) };
}

export function adminRoutes(ctx: ServeContext, src: AdminSources): Route[] {
  const machines = async (c: RequestContext): Promise<void> => {
    await ctx.book.applyRearms();
    const list = ctx.book.all(c.state.catalog).map((a) => ({ ...shown(a), boot: ctx.book.nextBoot(a, c.state.catalog) }));
    const lost = ctx.book.historyLost;
    c.reply(200, JSON.stringify({ machines: list, ...(lost ? { historyLost: lost } : {}), store: ctx.book.store.kind, server: ctx.book.server }, null, 2) + '\n', JSON_TYPE, { 'Cache-Control': 'no-store' });
  };
  const healthz = (c: RequestContext): void => {
    const h = src.health();
    const report = healthReport(h, ctx.book.all(c.state.catalog).filter((a) => a.hold).length);
    c.reply(200, JSON.stringify({ ...report, loadedAt: c.state.loadedAt, reloads: src.reloads(), machines: c.state.catalog.machines.length, history: h.historyFile ? { file: h.historyFile, writable: h.historyWritable, failures: h.historyWriteFailures } : undefined }) + '\n', JSON_TYPE);
  };
  return [
    { path: '/healthz', handle: healthz },
    { path: '/machines', handle: machines },
    { path: '/metrics', handle: (c) => c.reply(200, ctx.metrics.render(ctx.book.all(c.state.catalog), src.health()), PROMETHEUS_CONTENT_TYPE) },
  ];
}
