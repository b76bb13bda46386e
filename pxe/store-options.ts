/**
 * The store options of `hvpxe serve` and `hvpxe rearm` (--store file|etcd, --etcd-*), checked,
 * and `hvpxe rearm` against etcd: the machine's record changed with a compare-and-swap, which
 * every running server sees by its watch.
 */
import { ExitCode, HvError } from '../lib/errors.js';
import { EtcdClient } from './etcd-client.js';
import { keys, machineOf, planWrite, storedOf } from './etcd-layout.js';
import { rearmActivity, type MachineActivity } from './history-document.js';

export const STORE_OPTIONS = {
  store: { type: 'string' },
  'etcd-endpoints': { type: 'string' },
  'etcd-prefix': { type: 'string' },
  'etcd-ca': { type: 'string' },
  'etcd-cert': { type: 'string' },
  'etcd-key': { type: 'string' },
} as const;

export const STORE_USAGE = `  --store file|etcd   where machines are kept: file (default: --state-dir) or etcd (a fleet of servers, docs/fleet.md)
  --etcd-endpoints URL,…      the etcd members (http://10.0.0.5:2379,…)
  --etcd-prefix /hvpxe/FLEET  the keys of this fleet (default /hvpxe/default)
  --etcd-ca FILE, --etcd-cert FILE, --etcd-key FILE   TLS to etcd (the CA, this server's client certificate and key)`;

export const DEFAULT_ETCD_PREFIX = '/hvpxe/default';
const PREFIX_RE = /^(\/[A-Za-z0-9._-]+)+$/;
export const SERVER_NAME_RE = /^[A-Za-z0-9._:-]{1,128}$/;

export interface EtcdSettings {
  endpoints: string[];
  prefix: string;
  tls?: { ca?: string; cert?: string; key?: string };
}

function usage(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvpxe serve --help' (docs/fleet.md)", exitCode: ExitCode.usage });
}

/** The etcd settings from the flags, or undefined for the file store; throws (exit 2) on a bad combination. */
export function etcdSettings(v: Record<string, string | boolean | undefined>): EtcdSettings | undefined {
  const store = (v.store as string | undefined) ?? 'file';
  if (store !== 'file' && store !== 'etcd') throw usage(`--store must be file or etcd, got '${store}'`);
  const etcdFlags = ['etcd-endpoints', 'etcd-prefix', 'etcd-ca', 'etcd-cert', 'etcd-key'].filter((f) => v[f] !== undefined);
  if (store === 'file') {
    if (etcdFlags.length) throw usage(`--${etcdFlags[0]} needs --store etcd`);
    return undefined;
  }
  const endpoints = String(v['etcd-endpoints'] ?? '').split(',').map((e) => e.trim()).filter(Boolean);
  if (endpoints.length === 0) throw usage('--store etcd needs --etcd-endpoints URL,… (the etcd members)');
  const bad = endpoints.find((e) => !/^https?:\/\/[^/\s?#]+\/?$/.test(e));
  if (bad) throw usage(`--etcd-endpoints: '${bad}' is not http(s)://HOST:PORT`);
  const prefix = String(v['etcd-prefix'] ?? DEFAULT_ETCD_PREFIX).replace(/\/+$/, '');
  if (!PREFIX_RE.test(prefix)) throw usage(`--etcd-prefix must be a path like /hvpxe/rack-a (letters, digits, . _ -), got '${v['etcd-prefix']}'`);
  if (!!v['etcd-cert'] !== !!v['etcd-key']) throw usage('--etcd-cert and --etcd-key go together');
  const tls = v['etcd-ca'] || v['etcd-cert'] ? { ca: v['etcd-ca'] as string | undefined, cert: v['etcd-cert'] as string | undefined, key: v['etcd-key'] as string | undefined } : undefined;
  return { endpoints, prefix, tls };
}

export function etcdClient(s: EtcdSettings): EtcdClient {
  return new EtcdClient({ endpoints: s.endpoints, tls: s.tls });
}

/** A machine's record and its credentials, read from etcd (undefined: none). */
async function readMachine(client: EtcdClient, prefix: string, name: string): Promise<ReturnType<typeof storedOf>> {
  const r = await client.txn([], [{ request_range: { key: Buffer.from(keys.machine(prefix, name)).toString('base64') } }]);
  return storedOf(prefix, r.ranges[0]?.[0], []);
}

export type RearmResult = { kind: 'unknown'; known: string[] } | { kind: 'not-installed' } | { kind: 'rearmed'; was: MachineActivity };

/** `hvpxe rearm --store etcd NAME`: the record re-armed with a compare-and-swap (re-read and retried when it changed meanwhile). */
export async function rearmInEtcd(client: EtcdClient, prefix: string, name: string): Promise<RearmResult> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const before = await readMachine(client, prefix, name);
    if (!before) {
      const all = await client.range(keys.machines(prefix), { prefix: true });
      return { kind: 'unknown', known: all.kvs.map((kv) => kv.key.slice(keys.machines(prefix).length)) };
    }
    const a = machineOf(before);
    if (!a.installed && !a.hold) return { kind: 'not-installed' };
    const was = structuredClone(a);
    rearmActivity(a, new Date().toISOString());
    const plan = planWrite(prefix, before, a, undefined)!;
    // Only the record changes: its compare alone (the credentials are not rewritten).
    const r = await client.txn(plan.compare.slice(0, 1), plan.success);
    if (r.succeeded) return { kind: 'rearmed', was };
  }
  throw new HvError(`machine ${name} kept changing in etcd under 8 attempts to re-arm it`, { exitCode: ExitCode.usage });
}
