/**
 * A normalisation step of the validation pipeline (after the schema, before the rules): server_url
 * in the form Harvester writes and RKE2 joins with, `https://<host>:443`. An unusable one is reported
 * and left as written. Create mode has no server_url (a rule says so).
 */
import type { FindingList } from './findings.js';
import { isDns1123Subdomain, isIPv4 } from './net.js';
import type { HarvesterConfig } from './types.js';

/**
 * getFormattedServerURL (harvester/harvester-installer pkg/console/util.go): trims, adds https://,
 * requires an IPv4 or DNS-1123 host, no path, port 443; the result is https://host:443. Harvester
 * parses with Go's url.ParseRequestURI, which keeps the text as written: `https://1.2.3.4/` has the
 * path "/" (refused) where a WHATWG URL parser would report the same path for `https://1.2.3.4`.
 * So the URL is split by hand, as ParseRequestURI does (no fragment; the query after the first '?').
 */
export function formatServerUrl(raw: string): { url?: string; error?: string } {
  const addr = raw.trim();
  if (addr === '') return { error: 'server url invalid: management address cannot be empty' };
  // Harvester would prepend https:// and then trip over the path; say what is actually wrong.
  if (/^http:\/\//i.test(addr)) return { error: 'server url invalid: http:// is not supported, the management address is https://<vip>:443' };
  const rest = addr.startsWith('https://') ? addr.slice('https://'.length) : addr;
  const q = rest.indexOf('?');
  const beforeQuery = q < 0 ? rest : rest.slice(0, q);
  const slash = beforeQuery.indexOf('/');
  const authority = slash < 0 ? beforeQuery : beforeQuery.slice(0, slash);
  const pathPart = slash < 0 ? '' : beforeQuery.slice(slash);
  const userinfo = authority.slice(0, authority.lastIndexOf('@') + 1);
  const hostPort = authority.slice(userinfo.length);
  const hp = /^([^:[\]]*)(?::(\d*))?$/.exec(hostPort);
  if (!hp || /\s/.test(addr)) return { error: `server url invalid: ${addr} is invalid` };
  const host = hp[1];
  const port = hp[2] ?? '';
  if (!isIPv4(host) && !isDns1123Subdomain(host)) return { error: `server url invalid: ${addr} is not a valid ip/domain` };
  if (pathPart !== '') return { error: `server url invalid: path is not allowed in management address: ${pathPart}` };
  if (port !== '' && port !== '443') return { error: 'server url invalid: currently non-443 port are not allowed' };
  // Harvester keeps a query (https://h:443?x); rancherd appends /cacerts and its other paths to the
  // URL, which would then land in the query: the join cannot work.
  if (q >= 0) return { error: `server url invalid: a query (${rest.slice(q)}) is not allowed in the management address` };
  return { url: `https://${userinfo}${host}:443` };
}

/** The config with server_url normalised (or reported); create mode and an absent server_url pass through. */
export function normaliseServerUrl(cfg: HarvesterConfig, out: FindingList): HarvesterConfig {
  if (!cfg.serverUrl || cfg.install?.mode === 'create') return cfg;
  const r = formatServerUrl(cfg.serverUrl);
  if (r.error) {
    out.error('/serverUrl', r.error, 'write the cluster VIP as https://<vip>:443 (or just the VIP)');
    return cfg;
  }
  return { ...cfg, serverUrl: r.url };
}
