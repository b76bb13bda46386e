/**
 * How a machine is kept in etcd, and the compare-and-swap that changes it (store-etcd.ts does the
 * requests). Under the fleet's prefix (--etcd-prefix, e.g. /hvpxe/rack-a):
 *   machines/<name>              its record (history-document.ts's MachineActivity, without credentials)
 *   credentials/<name>/<sha256>  one boot credential's record, under a lease that outlives its use
 *   servers/<server>             a running hvpxe, under a lease it keeps alive (install-claim.ts)
 * A change is written only if every key it was decided on is unchanged: the machine's record and
 * each of its credentials (their mod revision; 0 for a key that must not exist yet). When the
 * compare fails, the same request reads them back, and the change is decided again. Pure.
 */
import type { Compare, KeyValue, RequestOp } from './etcd-client.js';
import { b64, prefixEnd } from './etcd-client.js';
import type { CredentialRecord, MachineActivity } from './history-document.js';

/** A machine as this server last read it from etcd, with the revision of each key. */
export interface StoredMachine {
  doc: Omit<MachineActivity, 'credentials'>;
  rev: number;
  creds: Map<string, { rec: CredentialRecord; rev: number; lease: string }>;
}

export const keys = {
  machine: (prefix: string, name: string): string => `${prefix}/machines/${name}`,
  machines: (prefix: string): string => `${prefix}/machines/`,
  credential: (prefix: string, name: string, sha256: string): string => `${prefix}/credentials/${name}/${sha256}`,
  credentialsOf: (prefix: string, name: string): string => `${prefix}/credentials/${name}/`,
  credentials: (prefix: string): string => `${prefix}/credentials/`,
  server: (prefix: string, server: string): string => `${prefix}/servers/${server}`,
  servers: (prefix: string): string => `${prefix}/servers/`,
};

/** What a key under the prefix is: a machine, a credential of one, a server, or nothing of ours. Pure. */
export function keyKind(prefix: string, key: string): { kind: 'machine'; name: string } | { kind: 'credential'; name: string; sha256: string } | { kind: 'server'; server: string } | undefined {
  if (!key.startsWith(`${prefix}/`)) return undefined;
  const [kind, a, b, ...rest] = key.slice(prefix.length + 1).split('/');
  if (kind === 'machines' && a && b === undefined) return { kind: 'machine', name: a };
  if (kind === 'credentials' && a && b && rest.length === 0) return { kind: 'credential', name: a, sha256: b };
  if (kind === 'servers' && a && b === undefined) return { kind: 'server', server: a };
  return undefined;
}

/** The machine as the book sees it: its record with its credentials, oldest first. Pure. */
export function machineOf(s: StoredMachine): MachineActivity {
  const creds = [...s.creds.values()].map((c) => c.rec).sort((x, y) => x.issuedAt.localeCompare(y.issuedAt));
  return { ...structuredClone(s.doc), ...(creds.length ? { credentials: structuredClone(creds) } : {}) } as MachineActivity;
}

/** A stored machine from its keys as read back (undefined when its record is gone). Pure. */
export function storedOf(prefix: string, doc: KeyValue | undefined, creds: readonly KeyValue[]): StoredMachine | undefined {
  if (!doc) return undefined;
  const out: StoredMachine = { doc: JSON.parse(doc.value) as StoredMachine['doc'], rev: doc.modRevision, creds: new Map() };
  for (const kv of creds) {
    const k = keyKind(prefix, kv.key);
    if (k?.kind === 'credential') out.creds.set(k.sha256, { rec: JSON.parse(kv.value) as CredentialRecord, rev: kv.modRevision, lease: kv.lease });
  }
  return out;
}

const modIs = (key: string, rev: number): Compare => ({ key: b64(key), target: 'MOD', result: 'EQUAL', mod_revision: String(rev) });

/**
 * The transaction writing `after` over `before` (undefined: the machine has no record yet), or
 * undefined when nothing changed. New credentials go under `lease`; a changed one keeps its lease
 * (a put without one would detach it). The failure branch reads the machine's keys back. Pure.
 */
export function planWrite(prefix: string, before: StoredMachine | undefined, after: MachineActivity, lease: string | undefined): { compare: Compare[]; success: RequestOp[]; failure: RequestOp[] } | undefined {
  const name = after.name;
  const { credentials, ...doc } = after;
  const docKey = keys.machine(prefix, name);
  const compare: Compare[] = [modIs(docKey, before?.rev ?? 0)];
  const success: RequestOp[] = [];
  if (!before || JSON.stringify(before.doc) !== JSON.stringify(doc)) success.push({ request_put: { key: b64(docKey), value: b64(JSON.stringify(doc)) } });
  const kept = new Set<string>();
  for (const rec of credentials ?? []) {
    kept.add(rec.sha256);
    const key = keys.credential(prefix, name, rec.sha256);
    const old = before?.creds.get(rec.sha256);
    compare.push(modIs(key, old?.rev ?? 0));
    if (old && JSON.stringify(old.rec) === JSON.stringify(rec)) continue;
    const useLease = old ? old.lease : lease;
    success.push({ request_put: { key: b64(key), value: b64(JSON.stringify(rec)), ...(useLease && useLease !== '0' ? { lease: useLease } : {}) } });
  }
  for (const [sha, old] of before?.creds ?? []) {
    if (kept.has(sha)) continue;
    const key = keys.credential(prefix, name, sha);
    compare.push(modIs(key, old.rev));
    success.push({ request_delete_range: { key: b64(key) } });
  }
  if (success.length === 0) return undefined;
  const failure: RequestOp[] = [{ request_range: { key: b64(docKey) } }, { request_range: { key: b64(keys.credentialsOf(prefix, name)), range_end: prefixEnd(keys.credentialsOf(prefix, name)) } }];
  return { compare, success, failure };
}

/** Whether a change adds a credential (it needs a lease first). Pure. */
export function addsCredential(before: StoredMachine | undefined, after: MachineActivity): boolean {
  return (after.credentials ?? []).some((c) => !before?.creds.has(c.sha256));
}
