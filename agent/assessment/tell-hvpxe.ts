/**
 * A committed fallback told to hvpxe, when the node came from it: the install left hvpxe's
 * node-events URL and this machine's node-report token in NODE_REPORT_PATH (root-only; the token
 * can post a few post-install events for this machine and nothing else, docs/pxe.md). Bounded
 * retries within a deadline; it never throws and never holds up the boot (the controller runs
 * beside the guards); the token never reaches a log line (lib/redact.ts redacts its form too).
 */
import { readFile, stat } from 'node:fs/promises';
import { httpRequest } from '../../lib/http-request.js';
import { REPORT_TOKEN_RE, type NodeEventBody, type NodeReportGrant } from '../../config/hvpxe-protocol.js';
import type { Logger } from '../../lib/logger.js';
import type { HvpxeTold } from './record.js';

export const TELL_HVPXE = { deadlineMs: 120_000, attemptTimeoutMs: 10_000, retryDelayMs: 5_000 } as const;

export interface TellOptions {
  log: Logger;
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  signal?: AbortSignal;
  deadlineMs?: number;
  attemptTimeoutMs?: number;
  retryDelayMs?: number;
}

/** The grant the install wrote, checked; a reason when there is none to use. */
export async function readNodeReport(file: string): Promise<{ grant: NodeReportGrant } | { why: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { why: code === 'ENOENT' ? `no ${file}: the node was not installed by hvpxe (or before hvpxe issued node-report tokens)` : `${file} is unreadable (${code ?? (err as Error).message})` };
  }
  let g: Partial<NodeReportGrant>;
  try {
    g = JSON.parse(text) as Partial<NodeReportGrant>;
  } catch {
    return { why: `${file} is not JSON` };
  }
  if (typeof g.url !== 'string' || !/^https?:\/\//.test(g.url) || typeof g.token !== 'string' || !REPORT_TOKEN_RE.test(g.token)) return { why: `${file} holds no node-events URL and token` };
  if (((await stat(file)).mode & 0o077) !== 0) return { why: `${file} is readable by others than root: not used (chmod 600 it; the token is this node's)` };
  return { grant: { url: g.url, token: g.token, machine: String(g.machine ?? ''), events: Array.isArray(g.events) ? g.events : [] } };
}

/** One POST; 'retry' for what may pass later (no answer, 5xx, 429), else done or refused. */
async function postOnce(grant: NodeReportGrant, body: string, timeoutMs: number): Promise<{ kind: 'told' } | { kind: 'refused' | 'retry'; why: string }> {
  try {
    const res = await httpRequest(grant.url, { method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${grant.token}` }, timeoutMs, maxBodyBytes: 4096 });
    const text = res.body.trim().slice(0, 200);
    if (res.statusCode >= 200 && res.statusCode < 300) return { kind: 'told' };
    const why = `HTTP ${res.statusCode}${text ? `: ${text}` : ''}`;
    return { kind: res.statusCode >= 500 || res.statusCode === 429 ? 'retry' : 'refused', why };
  } catch (err) {
    const e = err as Error & { cause?: Error };
    return { kind: 'retry', why: e.cause?.message ?? e.message };
  }
}

/** Posts `event` to hvpxe with the node's token until it is taken, refused, or the deadline passes. */
export async function tellHvpxe(file: string, event: NodeEventBody, o: TellOptions): Promise<HvpxeTold> {
  const at = (): string => new Date(o.now()).toISOString();
  const found = await readNodeReport(file).catch((err: Error) => ({ why: err.message }));
  if ('why' in found) return { told: false, at: at(), detail: found.why };
  const { grant } = found;
  const deadline = o.now() + (o.deadlineMs ?? TELL_HVPXE.deadlineMs);
  const body = JSON.stringify(event);
  let why = '';
  for (let attempt = 1; ; attempt++) {
    const r = await postOnce(grant, body, o.attemptTimeoutMs ?? TELL_HVPXE.attemptTimeoutMs);
    if (r.kind === 'told') return { told: true, at: at(), detail: `${event.event} posted to ${grant.url}` };
    why = o.log.redactor.redactString(r.why);
    if (r.kind === 'refused') return { told: false, at: at(), detail: `hvpxe refused ${event.event} at ${grant.url}: ${why}` };
    o.log.debug('boot assessment: hvpxe not reached yet', { url: grant.url, attempt, error: why });
    if (o.signal?.aborted || o.now() + (o.retryDelayMs ?? TELL_HVPXE.retryDelayMs) >= deadline) break;
    await o.sleep(o.retryDelayMs ?? TELL_HVPXE.retryDelayMs, o.signal).catch(() => undefined);
  }
  return { told: false, at: at(), detail: `hvpxe at ${grant.url} not reached within ${Math.round((o.deadlineMs ?? TELL_HVPXE.deadlineMs) / 1000)} s: ${why}` };
}
