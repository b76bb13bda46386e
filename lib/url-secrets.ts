/**
 * The parts of a URL that are credentials: the password of `user:pass@`, query parameters that
 * carry a token or a signature (`?token=`, `sig=`, `code=`, `X-Amz-Signature=`, hvpxe's boot
 * `credential=`), and the path of
 * services whose webhook URL is itself the secret (Slack's /services/T/B/secret, Discord's
 * /api/webhooks/id/token, Microsoft Teams' IncomingWebhook/secret, Mattermost's /hooks/key).
 * `redactUrlsIn` rewrites every URL in a text with those parts replaced, so a URL that nobody
 * registered as a secret is still safe in a log line or an error. Pure.
 */

export const REDACTED_PART = '<redacted>';

/** Query parameter names whose value is a credential, a signature or a one-time code. */
const SECRET_PARAM = /^(token|access[_-]?token|id[_-]?token|auth|authorization|key|api[_-]?key|apikey|secret|client[_-]?secret|password|passwd|pass|credential|sig|signature|code|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)$/i;

/** Header names whose value is a credential (Authorization, X-Api-Key, X-Auth-Token, Cookie, …). */
const SECRET_HEADER = /auth|token|secret|key|cookie|signature|password|credential/i;

export function isSecretParam(name: string): boolean {
  return SECRET_PARAM.test(name);
}

export function isSecretHeader(name: string): boolean {
  return SECRET_HEADER.test(name);
}

/** Known hosts whose webhook path carries the secret: the first `keep` path segments stay readable. */
const PATH_SECRET_SERVICES: Array<{ host: RegExp; prefix: RegExp; keep: number }> = [
  { host: /(^|\.)hooks\.slack\.com$/i, prefix: /^\/services\//, keep: 1 },
  { host: /(^|\.)discord(app)?\.com$/i, prefix: /^\/api\/webhooks\/[^/]+\//, keep: 3 },
  { host: /(^|\.)webhook\.office\.com$/i, prefix: /^\/webhookb2\//, keep: 1 },
  { host: /(^|\.)outlook\.office(365)?\.com$/i, prefix: /^\/webhook\//, keep: 1 },
];

/** Segments of a path that look like a token: long, and mixing letters with digits. */
function tokenLike(segment: string): boolean {
  return segment.length >= 20 && /^[A-Za-z0-9_\-.=~]+$/.test(segment) && /[0-9]/.test(segment) && /[A-Za-z]/.test(segment);
}

function parse(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/** Path segments that are the secret of a known webhook service (Mattermost's /hooks/<key> on any host). */
function pathSecrets(u: URL): { keep: number; secret: string[] } | undefined {
  const segments = u.pathname.split('/').slice(1);
  for (const s of PATH_SECRET_SERVICES) {
    if (s.host.test(u.hostname) && s.prefix.test(u.pathname)) return { keep: s.keep, secret: segments.slice(s.keep).filter(Boolean) };
  }
  const hooks = segments.indexOf('hooks');
  if (hooks >= 0 && segments.length === hooks + 2 && tokenLike(segments[hooks + 1]!)) return { keep: hooks + 1, secret: [segments[hooks + 1]!] };
  return undefined;
}

/**
 * The credential values of a URL, to register with a Redactor: the password, secret query values,
 * a known service's path secret and, with `tokenSegments` (a webhook URL: its path is often the
 * credential), any path segment that looks like a token.
 */
export function urlSecrets(url: string, opts: { tokenSegments?: boolean } = {}): string[] {
  const u = parse(url);
  if (!u) return [];
  const out: string[] = [];
  if (u.password) out.push(decodeURIComponent(u.password), u.password);
  for (const [k, v] of u.searchParams) if (isSecretParam(k) && v) out.push(v, encodeURIComponent(v));
  out.push(...(pathSecrets(u)?.secret ?? []));
  if (opts.tokenSegments) out.push(...u.pathname.split('/').filter(tokenLike));
  return [...new Set(out.filter((s) => s.length >= 4))];
}

/** The URL with its credentials replaced; a string that is not a URL comes back unchanged. */
export function redactUrl(url: string): string {
  const u = parse(url);
  if (!u || !/^[a-z][a-z0-9+.-]*:$/i.test(u.protocol)) return url;
  let changed = false;
  if (u.password) {
    u.password = REDACTED_PART;
    changed = true;
  }
  for (const k of [...new Set(u.searchParams.keys())]) {
    if (isSecretParam(k) && u.searchParams.get(k)) {
      u.searchParams.set(k, REDACTED_PART);
      changed = true;
    }
  }
  const path = pathSecrets(u);
  if (path?.secret.length) {
    u.pathname = `/${[...u.pathname.split('/').slice(1, 1 + path.keep), REDACTED_PART].join('/')}`;
    changed = true;
  }
  // Unchanged URLs are returned as given, not as URL re-serialised them.
  return changed ? u.href.split(encodeURIComponent(REDACTED_PART)).join(REDACTED_PART) : url;
}

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;

/** Every URL in a text through redactUrl (trailing punctuation of the sentence left outside). */
export function redactUrlsIn(text: string): string {
  return text.replace(URL_IN_TEXT, (m) => {
    const tail = /[.,;:!?)\]]+$/.exec(m)?.[0] ?? '';
    return redactUrl(m.slice(0, m.length - tail.length)) + tail;
  });
}

/**
 * A URL's credentials taken out for a request: the URL without them, and the Basic Authorization
 * header its `user:pass@` asks for (Go's net/http sends one too), or none.
 */
export function withoutUserinfo(url: string): { url: string; authorization?: string } {
  const u = parse(url);
  if (!u || (!u.username && !u.password)) return { url };
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  return { url: u.href, authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` };
}
