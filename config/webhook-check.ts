/**
 * What makes one install webhook unusable, in Harvester's order and words
 * (harvester/harvester-installer pkg/console/webhooks.go prepareWebhook): the event, the method
 * (upper-cased first), the URL and payload templates (Go text/template with missingkey=zero, so an
 * unknown field renders as ""), then, beyond Harvester, a rendered URL that is not http(s). Pure and
 * free of network code: the sender (webhooks.ts) and the validator (config/rules.ts) both
 * call it, so `validate` warns about exactly the webhooks the install would drop.
 */
import type { Webhook } from './types.js';
import { renderGoTemplate } from './go-template.js';

export const WEBHOOK_EVENTS: readonly string[] = ['STARTED', 'SUCCEEDED', 'FAILED'];
/** Go's net/http method constants, the list Harvester's IsValidHTTPMethod accepts. */
export const WEBHOOK_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE'];
/** The fields Harvester's webhook context carries (getWebhookContext). */
export const WEBHOOK_TEMPLATE_FIELDS: readonly string[] = ['Hostname', 'MACAddr', 'IPAddrV4', 'IPAddrV6'];

export interface WebhookProblem {
  field: 'event' | 'method' | 'url' | 'payload';
  message: string;
}

export interface RenderedWebhook {
  event: string;
  method: string;
  url: string;
  payload: string;
}

/** Renders a webhook's URL and payload, or says (as Harvester would) why the webhook cannot be sent. */
export function renderWebhook(h: Webhook, vars: Record<string, string | undefined>): { hook: RenderedWebhook } | { problem: WebhookProblem } {
  const event = String(h.event ?? '');
  const method = String(h.method ?? '').toUpperCase();
  if (!WEBHOOK_EVENTS.includes(event)) return { problem: { field: 'event', message: `unknown install event: ${event}` } };
  if (!WEBHOOK_METHODS.includes(method)) return { problem: { field: 'method', message: `unknown HTTP method: ${method}` } };
  let url: string;
  let payload: string;
  try {
    url = renderGoTemplate('URL', String(h.url ?? ''), vars);
  } catch (err) {
    return { problem: { field: 'url', message: (err as Error).message } };
  }
  try {
    payload = renderGoTemplate('Payload', String(h.payload ?? ''), vars);
  } catch (err) {
    return { problem: { field: 'payload', message: (err as Error).message } };
  }
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`unsupported protocol ${u.protocol}`);
  } catch (err) {
    return { problem: { field: 'url', message: `invalid URL '${url}': ${(err as Error).message}` } };
  }
  return { hook: { event, method, url, payload } };
}

/** The template fields a text references that Harvester's context does not have (they render as ""). */
export function unknownTemplateFields(text: string): string[] {
  const used: string[] = [];
  const recorder = new Proxy({} as Record<string, string | undefined>, {
    get: (_t, key) => {
      if (typeof key === 'string' && !WEBHOOK_TEMPLATE_FIELDS.includes(key) && !used.includes(key)) used.push(key);
      return undefined;
    },
  });
  try {
    renderGoTemplate('check', text, recorder);
  } catch {
    // a template that does not parse is renderWebhook's finding
  }
  return used;
}
