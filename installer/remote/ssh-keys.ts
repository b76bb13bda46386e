/**
 * SSH keys from github:/gitlab: users and URLs, fetched once at install and written as keys.
 * Harvester leaves such an entry to yip, which downloads it at every boot (rancher/yip
 * pkg/plugins/ssh.go, TLS unverified, 10 tries a second apart): a node that boots without DNS or
 * internet access, or while GitHub is down, has no SSH login then. Here the keys are fetched with a
 * deadline (per attempt, bounded attempts: lib/http-fetch.ts, certificates checked, the proxy
 * environment and an extra CA honoured) and checked line by line as Harvester's console checks an
 * SSH key URL (harvester/harvester-installer pkg/console/util.go getRemoteSSHKeys: "fail to parse
 * on line N: ...", "no key found").
 *
 * When the source cannot be reached the entry is kept as written, so yip fetches it at boot as it
 * does on Harvester: the install network is often not the production one (a PXE VLAN without a
 * route out), and refusing the install would refuse what Harvester installs; nothing is lost against
 * Harvester, and a warning says so. When the source answers that there are no keys (no such user,
 * no key, a body that is not keys) and the node has no other login (a password or another key), the
 * install is refused before any disk is touched: that node could not be logged into.
 */
import type { HarvesterConfig } from '../../config/types.js';
import { AUTHORIZED_KEY, SSH_KEY_PROVIDERS, sshKeySourceUrl } from '../../config/ssh-key.js';
import { fetchBytes, FetchError, type FetchErrorKind } from '../../lib/http-fetch.js';

export interface SshKeyFetchOptions {
  /** Per attempt; default 15 s (Harvester's HTTP timeout). */
  timeoutMs?: number;
  /** Default 3. */
  attempts?: number;
  retryDelayMs?: number;
  caFile?: string;
  /** github/gitlab URL patterns (%s: the user); tests point them at a local server. */
  providers?: Readonly<Record<string, string>>;
}

export interface SshKeyResolution {
  entry: string;
  url: string;
  /** The keys fetched (when the fetch worked and found keys). */
  keys?: string[];
  /** Why not, for people. */
  problem?: string;
  /** The source answered that there are no keys (not a network failure). */
  definitive?: boolean;
}

export interface ResolvedSshKeys {
  config: HarvesterConfig;
  resolutions: SshKeyResolution[];
  warnings: string[];
  /** Non-empty: the install must not go on (the node would have no login). */
  errors: string[];
}

/** Harvester's getRemoteSSHKeys over a fetched body: every non-empty line a key. Pure. */
export function parseFetchedKeys(body: string): { keys: string[] } | { problem: string } {
  const keys: string[] = [];
  const lines = body.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') continue;
    if (!AUTHORIZED_KEY.test(line)) return { problem: `fail to parse on line ${i + 1}: ${line.length > 80 ? line.slice(0, 77) + '...' : line}` };
    keys.push(line.trim());
  }
  return keys.length > 0 ? { keys } : { problem: 'no key found' };
}

/** Network failures (the source may answer at boot); the rest are the source's own answer. */
const UNREACHABLE: ReadonlySet<FetchErrorKind> = new Set(['dns', 'refused', 'timeout', 'tls', 'network', 'http-server']);

async function resolveOne(entry: string, url: string, opts: SshKeyFetchOptions): Promise<SshKeyResolution> {
  try {
    const r = await fetchBytes(url, {
      timeoutMs: opts.timeoutMs ?? 15_000,
      attempts: opts.attempts ?? 3,
      retryDelayMs: opts.retryDelayMs ?? 1000,
      caFile: opts.caFile,
      maxBytes: 1024 * 1024,
    });
    const parsed = parseFetchedKeys(r.body.toString('utf8'));
    if ('problem' in parsed) return { entry, url, problem: parsed.problem, definitive: true };
    // Each key says where it came from (an authorized_keys comment), unless it has a comment already.
    const keys = parsed.keys.map((k) => (k.split(/\s+/).length === 2 ? `${k} ${entry.replace(/\s+/g, '')}` : k));
    return { entry, url, keys };
  } catch (err) {
    if (!(err instanceof FetchError)) throw err;
    return { entry, url, problem: err.message, definitive: !UNREACHABLE.has(err.kind) };
  }
}

/**
 * Replaces every github:/gitlab:/URL entry of os.ssh_authorized_keys by the keys it names, in place
 * of the entry. Never throws for a source that fails: see the header for what happens then.
 */
export async function resolveSshKeys(config: HarvesterConfig, opts: SshKeyFetchOptions = {}): Promise<ResolvedSshKeys> {
  const entries = config.os?.sshAuthorizedKeys ?? [];
  const providers = opts.providers ?? SSH_KEY_PROVIDERS;
  const sources = entries.map((e) => ({ entry: e, url: sshKeySourceUrl(e, providers) }));
  const resolutions = await Promise.all(sources.filter((s) => s.url).map((s) => resolveOne(s.entry.trim(), s.url!, opts)));
  if (resolutions.length === 0) return { config, resolutions, warnings: [], errors: [] };
  const byEntry = new Map(resolutions.map((r) => [r.entry, r]));
  const keys: string[] = [];
  for (const s of sources) {
    const r = s.url ? byEntry.get(s.entry.trim()) : undefined;
    if (r?.keys) keys.push(...r.keys);
    else keys.push(s.entry);
  }
  const literal = sources.filter((s) => !s.url).length;
  const fetched = resolutions.reduce((n, r) => n + (r.keys?.length ?? 0), 0);
  const login = !!config.os?.password || literal > 0 || fetched > 0;
  const warnings: string[] = [];
  const errors: string[] = [];
  for (const r of resolutions) {
    if (r.keys) continue;
    const what = `os.ssh_authorized_keys: ${r.entry}: ${r.problem} (${r.url})`;
    if (r.definitive && !login) {
      errors.push(`${what}; the node would have no login (no password, no other SSH key)`);
    } else if (r.definitive) {
      warnings.push(`${what}; kept as written, it gives no key at boot either`);
    } else {
      warnings.push(`${what}; kept as written, so yip fetches it at every boot as on Harvester: a node that boots without access to ${new URL(r.url).host} has no SSH login from it`);
    }
  }
  return { config: { ...config, os: { ...config.os, sshAuthorizedKeys: keys } }, resolutions, warnings, errors };
}
