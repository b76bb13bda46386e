/**
 * Install webhooks with Harvester's semantics (harvester/harvester-installer pkg/console/webhooks.go):
 * - URL and payload are Go templates over Hostname, MACAddr, IPAddrV4, IPAddrV6 (missing → "").
 * - Method is upper-cased and must be a known HTTP method; event must be STARTED|SUCCEEDED|FAILED.
 *   One invalid webhook disables all of them (Harvester's PrepareWebhooks fails as a whole); that is
 *   logged and the install carries on.
 * - Each request has a 15 s timeout; only a timed-out request is retried, 3 more times, 5 s apart.
 * - Status < 200 or >= 400, a non-timeout error or exhausted retries is logged and stops the
 *   remaining hooks of that event.
 * - basicAuth is sent only when both user and password are set; `insecure` skips TLS verification;
 *   headers are a map of lists.
 * sendWebhooks never throws: a webhook must not fail an install.
 */
import { networkInterfaces } from 'node:os';
import { Agent, request, type Dispatcher } from 'undici';
import type { HarvesterConfig, Webhook, WebhookEvent } from '../../config/types.js';
import { Logger } from '../../lib/logger.js';
import { isSecretKey } from '../../lib/redact.js';
import { isSecretHeader, urlSecrets, withoutUserinfo } from '../../lib/url-secrets.js';
import { ownValue, setOwn } from '../../lib/own-keys.js';
import { sleep } from '../../lib/wait.js';
import { renderWebhook } from '../../config/webhook-check.js';

export interface WebhookVars {
  Hostname?: string;
  MACAddr?: string;
  IPAddrV4?: string;
  IPAddrV6?: string;
}

export interface SendWebhooksOptions {
  vars?: WebhookVars;
  log?: Logger;
  signal?: AbortSignal;
  /** Per-request timeout; Harvester: 15 s. */
  timeoutMs?: number;
  /** Sleep before retrying a timed-out request; Harvester: 5 s. */
  retrySleepMs?: number;
  /** Retries after a timeout; Harvester: 3. */
  maxTimeoutRetries?: number;
}

export interface PreparedWebhook {
  event: WebhookEvent;
  method: string;
  url: string;
  payload: string;
  headers: Array<[string, string]>;
  insecure: boolean;
  basicAuth?: { user: string; password: string };
}


/** Renders and checks every webhook; one invalid hook makes the whole list unusable (Harvester). Pure. */
export function prepareWebhooks(hooks: readonly Webhook[], vars: WebhookVars): { hooks: PreparedWebhook[] } | { error: string } {
  const out: PreparedWebhook[] = [];
  const ctx = vars as Record<string, string | undefined>;
  for (const [i, h] of hooks.entries()) {
    const r = renderWebhook(h, ctx);
    if ('problem' in r) return { error: `install.webhooks[${i}]: ${r.problem.message}` };
    const headers: Array<[string, string]> = [];
    for (const [k, vs] of Object.entries(h.headers ?? {})) {
      for (const v of Array.isArray(vs) ? vs : [vs]) headers.push([k, String(v)]);
    }
    const user = h.basicAuth?.user ?? '';
    const password = h.basicAuth?.password ?? '';
    out.push({
      event: r.hook.event as WebhookEvent,
      method: r.hook.method,
      url: r.hook.url,
      payload: r.hook.payload,
      headers,
      insecure: h.insecure === true,
      basicAuth: user !== '' && password !== '' ? { user, password } : undefined,
    });
  }
  return { hooks: out };
}

/** The secrets a prepared hook carries, to register with the log redactor before anything is logged. */
export function webhookSecrets(h: PreparedWebhook): string[] {
  const s: string[] = [];
  if (h.basicAuth) s.push(h.basicAuth.password, Buffer.from(`${h.basicAuth.user}:${h.basicAuth.password}`).toString('base64'));
  for (const [k, v] of h.headers) if (isSecretKey(k) || isSecretHeader(k)) s.push(v);
  // The rendered URL: its credentials, signatures and token-like path (Slack, Discord, Teams, …).
  s.push(...urlSecrets(h.url, { tokenSegments: true }));
  return s;
}

/**
 * Template variables the way Harvester gathers them: the hostname from the config, MAC and first
 * IPv4/IPv6 from the management bridge (`mgmt-br`), falling back to the NIC whose MAC the config
 * names for the management interface.
 */
export function gatherWebhookVars(config: HarvesterConfig, ifaces = networkInterfaces()): WebhookVars {
  const vars: WebhookVars = { Hostname: config.os?.hostname ?? '' };
  const wantedMacs = (config.install?.managementInterface?.interfaces ?? [])
    .map((i) => i.hwAddr?.toLowerCase())
    .filter((m): m is string => !!m);
  const byMac = Object.entries(ifaces).find(([, addrs]) => addrs?.some((a) => wantedMacs.includes(a.mac.toLowerCase())));
  const chosen = ifaces['mgmt-br'] ?? byMac?.[1];
  if (chosen && chosen.length > 0) {
    vars.MACAddr = chosen[0].mac;
    vars.IPAddrV4 = chosen.find((a) => a.family === 'IPv4')?.address ?? '';
    vars.IPAddrV6 = chosen.find((a) => a.family === 'IPv6')?.address ?? '';
  }
  return vars;
}

class WebhookTimeout extends Error {}

async function sendOnce(h: PreparedWebhook, timeoutMs: number, signal: AbortSignal | undefined): Promise<void> {
  const dispatcher: Dispatcher | undefined = h.insecure ? new Agent({ connect: { rejectUnauthorized: false } }) : undefined;
  const timeout = AbortSignal.timeout(timeoutMs);
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of h.headers) {
    // Header names are the config's keys: own properties only (`constructor`, `__proto__` are headers too).
    const cur = ownValue(headers, k) as string | string[] | undefined;
    setOwn(headers, k, cur === undefined ? v : Array.isArray(cur) ? [...cur, v] : [cur, v]);
  }
  // user:pass@ in the URL is sent as Basic credentials, as Go's client does; basicAuth wins.
  const target = withoutUserinfo(h.url);
  if (target.authorization) headers.authorization = target.authorization;
  if (h.basicAuth) headers.authorization = `Basic ${Buffer.from(`${h.basicAuth.user}:${h.basicAuth.password}`).toString('base64')}`;
  try {
    const res = await request(target.url, {
      method: h.method as Dispatcher.HttpMethod,
      headers,
      body: h.payload !== '' ? h.payload : undefined,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await res.body.dump().catch(() => undefined);
    if (res.statusCode < 200 || res.statusCode >= 400) throw new Error(`got ${res.statusCode} status code from ${h.url}`);
  } catch (err) {
    if (timeout.aborted && !signal?.aborted) throw new WebhookTimeout(`${h.method} ${h.url}: no response within ${timeoutMs / 1000} s`);
    const code = (err as { code?: string }).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      throw new WebhookTimeout(`${h.method} ${h.url}: no response within ${timeoutMs / 1000} s`);
    }
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    throw new Error(cause ? `${(err as Error).message}: ${cause}` : (err as Error).message);
  } finally {
    await dispatcher?.close().catch(() => undefined);
  }
}

/** Sends the webhooks configured for `event`. Never throws; failures are logged. */
export async function sendWebhooks(
  event: 'STARTED' | 'SUCCEEDED' | 'FAILED',
  config: HarvesterConfig,
  opts: SendWebhooksOptions = {},
): Promise<void> {
  const log = (opts.log ?? new Logger()).child({ component: 'webhooks', event });
  try {
    const configured = config.install?.webhooks ?? [];
    if (configured.length === 0) return;
    for (const h of configured) {
      log.redactor.add(h.basicAuth?.password);
      for (const [k, vs] of Object.entries(h.headers ?? {})) {
        if (isSecretKey(k) || isSecretHeader(k)) for (const v of vs ?? []) log.redactor.add(String(v));
      }
    }
    const vars = opts.vars ?? gatherWebhookVars(config);
    const prepared = prepareWebhooks(configured, vars);
    if ('error' in prepared) {
      log.error('webhooks disabled: invalid webhook', { error: prepared.error });
      return;
    }
    for (const h of prepared.hooks) log.redactor.add(...webhookSecrets(h));
    const timeoutMs = opts.timeoutMs ?? 15_000;
    const retrySleepMs = opts.retrySleepMs ?? 5_000;
    const maxRetries = opts.maxTimeoutRetries ?? 3;
    for (const h of prepared.hooks.filter((p) => p.event === event)) {
      let lastErr: Error | undefined;
      for (let attempt = 0; attempt <= maxRetries; attempt++) {
        try {
          await sendOnce(h, timeoutMs, opts.signal);
          lastErr = undefined;
          log.info('webhook sent', { method: h.method, url: h.url, attempts: attempt + 1 });
          break;
        } catch (err) {
          lastErr = err as Error;
          if (!(err instanceof WebhookTimeout) || attempt === maxRetries || opts.signal?.aborted) break;
          log.warn('webhook timed out; retrying', { url: h.url, attempt: attempt + 1, retryInMs: retrySleepMs });
          await sleep(retrySleepMs, opts.signal);
        }
      }
      if (lastErr) {
        log.error('webhook failed; skipping the remaining webhooks for this event', {
          method: h.method,
          url: h.url,
          error: lastErr.message,
        });
        return;
      }
    }
  } catch (err) {
    log.error('webhooks failed', { error: err instanceof Error ? err.message : String(err) });
  }
}
