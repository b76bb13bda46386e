/**
 * A normalisation step of the validation pipeline (after the schema, before the rules): server_url
 * in the form Harvester writes and RKE2 joins with, `https://<host>:443`. An unusable one is reported
 * and left as written. Create mode has no server_url (a rule says so).
 */
import type { FindingList } from './findings.js';
import { isDns1123Subdomain, isIPv4 } from './net.js';
import type { HarvesterConfig } from './types.js';

/** getFormattedServerURL (pkg/console/util.go): trims, adds https://, requires an IPv4 or DNS host, no path, port 443. */
export function formatServerUrl(raw: string): { url?: string; error?: string } {
  let s = raw.trim();
  // Harvester would prepend https:// and then trip over the path; say what is actually wrong.
  if (/^http:\/\//i.test(s)) return { error: 'server url invalid: http:// is not supported, the management address is https://<vip>:443' };
  if (!s.startsWith('https://')) s = 'https://' + s;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return { error: `server url invalid: ${raw.trim()} is not a valid ip/domain` };
  }
  const host = u.hostname;
  if (!isIPv4(host) && !isDns1123Subdomain(host)) return { error: `server url invalid: ${host || raw.trim()} is not a valid ip/domain` };
  if (u.pathname && u.pathname !== '/') return { error: `server url invalid: path is not allowed in management address: ${u.pathname}` };
  if (u.port && u.port !== '443') return { error: 'server url invalid: currently non-443 port are not allowed' };
  return { url: `https://${host}:443` };
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
