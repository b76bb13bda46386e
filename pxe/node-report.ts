/**
 * Post-install reports from installed nodes (config/hvpxe-protocol.ts). At install time the
 * installer trades its boot credential for a node-report token, once per boot credential and only
 * for a boot whose config was served (an install that is running); hvpxe keeps the token's sha256
 * with the machine, one per machine (the newest install's replaces the last). With it the node
 * posts a few events after its install (a fallback after a failed upgrade); the token unlocks
 * nothing else, and an event is kept in the machine's history only: it never changes what the
 * machine boots next (no install, no re-arm, no hold). Pure apart from the token's randomness.
 */
import { randomBytes } from 'node:crypto';
import { NODE_EVENTS, REPORT_TOKEN_RE, type NodeEventBody, type NodeEventName } from '../config/hvpxe-protocol.js';
import type { Redactor } from '../lib/redact.js';
import { checkCredential, credentialHash, type CredentialCheck } from './credentials.js';
import type { CredentialRecord, MachineActivity } from './history-document.js';

/** Characters kept of a node event's text fields. */
const FIELD_MAX = 200;

export type ReportRefusal = 'missing' | 'malformed' | 'unknown' | 'expired' | 'not attested' | 'no config served' | 'already issued';

export const REPORT_REFUSAL_TEXT: Record<ReportRefusal, string> = {
  missing: 'no credential',
  malformed: 'not a credential',
  unknown: "not this machine's (another machine's, an older install's, or forged)",
  expired: 'the boot credential expired: boot the machine again for a new one',
  'not attested': 'this machine is enrolled by its TPM and has not proven it for this boot',
  'no config served': 'no config was served for this boot credential: a node-report token goes only to an install that is running',
  'already issued': 'a node-report token was already issued for this boot credential',
};

/** A fresh node-report token and its hash. */
export function newReportToken(): { token: string; sha256: string } {
  const token = `hvnr_${randomBytes(32).toString('base64url')}`;
  return { token, sha256: credentialHash(token) };
}

/** Whether this boot credential may get a node-report token now. Pure. */
export function checkTokenRequest(records: readonly CredentialRecord[] | undefined, credential: string | null | undefined, now: number, attested: boolean): { ok: true; record: CredentialRecord } | { ok: false; reason: ReportRefusal } {
  const check: CredentialCheck = checkCredential(records, credential, 'events', now, attested);
  if (!check.ok) return { ok: false, reason: check.reason === 'used' ? 'already issued' : check.reason };
  if (!check.record.configAt) return { ok: false, reason: 'no config served' };
  if (check.record.reportTokenAt) return { ok: false, reason: 'already issued' };
  return check;
}

/** Whether `token` (the Authorization header's bearer) is this machine's node-report token. Pure. */
export function checkReportToken(a: Pick<MachineActivity, 'reportToken'> | undefined, authorization: string | undefined): { ok: true } | { ok: false; reason: ReportRefusal } {
  const m = /^Bearer (\S+)$/.exec(authorization ?? '');
  if (!m) return { ok: false, reason: 'missing' };
  if (!REPORT_TOKEN_RE.test(m[1]!)) return { ok: false, reason: 'malformed' };
  if (!a?.reportToken || a.reportToken.sha256 !== credentialHash(m[1]!)) return { ok: false, reason: 'unknown' };
  return { ok: true };
}

const text = (v: unknown, r: Redactor): string | undefined => (typeof v === 'string' && v !== '' ? r.redactString(v).slice(0, FIELD_MAX) : undefined);

/** A node event body read back: only the known events and fields, each bounded and redacted. Pure. */
export function parseNodeEvent(body: string, r: Redactor): { ok: true; event: NodeEventBody } | { ok: false; why: string } {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return { ok: false, why: 'not JSON' };
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return { ok: false, why: 'not a JSON object' };
  const o = v as Record<string, unknown>;
  if (!NODE_EVENTS.includes(o.event as NodeEventName)) return { ok: false, why: `event must be one of ${NODE_EVENTS.join(', ')}` };
  const at = typeof o.at === 'string' && !Number.isNaN(Date.parse(o.at)) ? new Date(Date.parse(o.at)).toISOString() : undefined;
  if (!at) return { ok: false, why: 'at must be a time' };
  const event: NodeEventBody = { event: o.event as NodeEventName, at };
  for (const k of ['message', 'running', 'failed'] as const) {
    const t = text(o[k], r);
    if (t) event[k] = t;
  }
  return { ok: true, event };
}

/** One line for /machines and `hvpxe machines`. Pure. */
export function nodeEventSummary(e: NodeEventBody): string {
  const what = e.event === 'FALLBACK' ? `upgrade fell back${e.failed ? ` from ${e.failed}` : ''}${e.running ? `, runs ${e.running}` : ''}` : `upgraded${e.running ? ` to ${e.running}` : ''}`;
  return `node ${what}${e.message ? `: ${e.message}` : ''}`.slice(0, FIELD_MAX);
}

/**
 * Keeps a node event with the machine: in its events (kept before progress, event-history.ts) and
 * as its last node report. Touches nothing a boot decision reads. Mutates the activity.
 */
export function applyNodeEvent(a: MachineActivity, e: NodeEventBody, receivedAt: string, keep: (events: MachineActivity['events']) => MachineActivity['events']): void {
  const data: Record<string, string> = { event: e.event, at: e.at, ...(e.message ? { message: e.message } : {}), ...(e.running ? { running: e.running } : {}), ...(e.failed ? { failed: e.failed } : {}) };
  a.events = keep([...a.events, { at: receivedAt, event: e.event, data, note: 'reported by the installed node' }]);
  a.nodeReport = { event: e.event, at: receivedAt, summary: nodeEventSummary(e) };
}
