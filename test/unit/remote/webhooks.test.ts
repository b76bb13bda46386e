import { afterEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendWebhooks, prepareWebhooks, gatherWebhookVars } from '../../../installer/remote/webhooks.js';
import { renderGoTemplate } from '../../../config/go-template.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { HarvesterConfig, Webhook } from '../../../config/types.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Name/value pairs as sent (node's parsed headers drop a header named __proto__). */
  rawHeaders: string[];
  body: string;
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A local webhook receiver; `respond` decides per request (index from 0) what to do. */
async function receiver(respond: (i: number, req: http.IncomingMessage, res: http.ServerResponse) => void = (_i, _q, res) => res.end('ok')) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body });
      respond(seen.length - 1, req, res);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, base };
}

function cfg(webhooks: Webhook[]): HarvesterConfig {
  return { os: { hostname: 'node-1' }, install: { webhooks } };
}

function logger() {
  const sink = new MemorySink();
  return { sink, log: new Logger(sink) };
}

const vars = { Hostname: 'node-1', MACAddr: '52:54:00:12:34:56', IPAddrV4: '10.0.0.5', IPAddrV6: 'fe80::1' };

describe('renderGoTemplate', () => {
  it('substitutes fields, trims with {{- -}}, drops comments and renders missing keys as empty', () => {
    expect(renderGoTemplate('t', 'h={{.Hostname}}&m={{ .MACAddr }}', vars)).toBe('h=node-1&m=52:54:00:12:34:56');
    expect(renderGoTemplate('t', 'a  {{- .IPAddrV4 -}}  b', vars)).toBe('a10.0.0.5b');
    expect(renderGoTemplate('t', 'x{{/* note */}}y{{.Nope}}z', vars)).toBe('xyz');
  });
  it('refuses unclosed actions and unsupported actions with a message', () => {
    expect(() => renderGoTemplate('URL', 'http://x/{{.Hostname', vars)).toThrow(/template URL: unclosed action/);
    expect(() => renderGoTemplate('Payload', '{{ if .Hostname }}x{{ end }}', vars)).toThrow(/unsupported action/);
  });
});

describe('prepareWebhooks', () => {
  it('upper-cases the method and rejects unknown methods and events', () => {
    const ok = prepareWebhooks([{ event: 'STARTED', method: 'post', url: 'http://h/{{.Hostname}}' }], vars);
    expect('hooks' in ok && ok.hooks[0].method).toBe('POST');
    expect(prepareWebhooks([{ event: 'STARTED', method: 'FETCH', url: 'http://h/' }], vars)).toEqual({
      error: 'install.webhooks[0]: unknown HTTP method: FETCH',
    });
    expect(prepareWebhooks([{ event: 'DONE', method: 'GET', url: 'http://h/' }], vars)).toEqual({
      error: 'install.webhooks[0]: unknown install event: DONE',
    });
    expect(prepareWebhooks([{ event: 'FAILED', method: 'GET', url: 'ftp://h/' }], vars)).toMatchObject({
      error: expect.stringMatching(/invalid URL 'ftp:\/\/h\/'/),
    });
  });
  it('sends basic auth only when both user and password are set', () => {
    const r = prepareWebhooks(
      [
        { event: 'STARTED', method: 'GET', url: 'http://h/', basicAuth: { user: 'u', password: '' } },
        { event: 'STARTED', method: 'GET', url: 'http://h/', basicAuth: { user: 'u', password: 'p4ss' } },
      ],
      vars,
    );
    expect('hooks' in r && r.hooks.map((h) => h.basicAuth)).toEqual([undefined, { user: 'u', password: 'p4ss' }]);
  });
});

describe('gatherWebhookVars', () => {
  it('takes MAC and addresses from mgmt-br, else from the configured management NIC', () => {
    const a = (mac: string, address: string, family: 'IPv4' | 'IPv6') =>
      ({ mac, address, family, internal: false, netmask: '', cidr: null }) as never;
    const ifaces = { eth0: [a('aa:bb:cc:dd:ee:ff', '192.168.1.9', 'IPv4'), a('aa:bb:cc:dd:ee:ff', 'fe80::9', 'IPv6')] };
    const c: HarvesterConfig = { os: { hostname: 'n' }, install: { managementInterface: { interfaces: [{ hwAddr: 'AA:BB:CC:DD:EE:FF' }] } } };
    expect(gatherWebhookVars(c, ifaces)).toEqual({ Hostname: 'n', MACAddr: 'aa:bb:cc:dd:ee:ff', IPAddrV4: '192.168.1.9', IPAddrV6: 'fe80::9' });
    expect(gatherWebhookVars(c, { ...ifaces, 'mgmt-br': [a('11:22:33:44:55:66', '10.1.1.1', 'IPv4')] })).toMatchObject({ MACAddr: '11:22:33:44:55:66', IPAddrV4: '10.1.1.1', IPAddrV6: '' });
    expect(gatherWebhookVars({}, {})).toEqual({ Hostname: '' });
  });
});

describe('sendWebhooks', () => {
  it('sends only the hooks of the event, with rendered URL, payload, header lists and basic auth', async () => {
    const r = await receiver();
    const { log, sink } = logger();
    await sendWebhooks(
      'STARTED',
      cfg([
        {
          event: 'STARTED',
          method: 'post',
          url: `${r.base}/hook/{{.Hostname}}?mac={{.MACAddr}}`,
          payload: '{"ip":"{{.IPAddrV4}}","v6":"{{.IPAddrV6}}"}',
          headers: { 'Content-Type': ['application/json'], 'X-Multi': ['a', 'b'] },
          basicAuth: { user: 'admin', password: 's3cr3t-pw' },
        },
        { event: 'SUCCEEDED', method: 'GET', url: `${r.base}/not-this-one` },
      ]),
      { vars, log },
    );
    expect(r.seen).toHaveLength(1);
    const s = r.seen[0];
    expect(s.method).toBe('POST');
    expect(s.url).toBe('/hook/node-1?mac=52:54:00:12:34:56');
    expect(JSON.parse(s.body)).toEqual({ ip: '10.0.0.5', v6: 'fe80::1' });
    expect(s.headers['content-type']).toBe('application/json');
    expect(s.headers['x-multi']).toBe('a, b');
    expect(s.headers.authorization).toBe(`Basic ${Buffer.from('admin:s3cr3t-pw').toString('base64')}`);
    const logs = sink.lines.join('');
    expect(logs).toContain('webhook sent');
    expect(logs).not.toContain('s3cr3t-pw');
    expect(logs).not.toContain(Buffer.from('admin:s3cr3t-pw').toString('base64'));
  });

  it('header names like constructor and __proto__ are plain headers: sent with their own values', async () => {
    const r = await receiver();
    const { log } = logger();
    const headers = JSON.parse('{"constructor": ["c-value"], "__proto__": ["p-value"], "X-Multi": ["a", "b"]}') as Record<string, string[]>;
    await sendWebhooks('STARTED', cfg([{ event: 'STARTED', method: 'POST', url: `${r.base}/h`, headers }]), { vars, log });
    expect(r.seen).toHaveLength(1);
    const sent = r.seen[0].rawHeaders.flatMap((v, i, all) => (i % 2 === 0 ? [`${v.toLowerCase()}: ${all[i + 1]}`] : []));
    expect(sent).toEqual(expect.arrayContaining(['constructor: c-value', '__proto__: p-value', 'x-multi: a', 'x-multi: b']));
  });

  it('retries a timed-out request 3 more times, then logs and stops the remaining hooks', async () => {
    const r = await receiver((i, req, res) => {
      if (req.url === '/slow') return; // never answers: every attempt times out
      res.end('ok');
    });
    const { log, sink } = logger();
    await sendWebhooks(
      'FAILED',
      cfg([
        { event: 'FAILED', method: 'GET', url: `${r.base}/slow` },
        { event: 'FAILED', method: 'GET', url: `${r.base}/after` },
      ]),
      { vars, log, timeoutMs: 150, retrySleepMs: 10 },
    );
    expect(r.seen.map((s) => s.url)).toEqual(['/slow', '/slow', '/slow', '/slow']);
    const lines = sink.lines.map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.msg === 'webhook timed out; retrying')).toHaveLength(3);
    expect(lines.at(-1)).toMatchObject({ level: 'error', msg: 'webhook failed; skipping the remaining webhooks for this event' });
    expect(lines.at(-1).error).toMatch(/no response within 0.15 s/);
  });

  it('a request that times out once and then answers counts as sent', async () => {
    const r = await receiver((i, _req, res) => {
      if (i === 0) return;
      res.end('ok');
    });
    const { log, sink } = logger();
    await sendWebhooks('SUCCEEDED', cfg([{ event: 'SUCCEEDED', method: 'PUT', url: `${r.base}/x` }]), { vars, log, timeoutMs: 150, retrySleepMs: 10 });
    expect(r.seen).toHaveLength(2);
    expect(sink.lines.map((l) => JSON.parse(l)).at(-1)).toMatchObject({ msg: 'webhook sent', attempts: 2 });
  });

  it('does not retry a 500: logs it and skips the remaining hooks of the event', async () => {
    const r = await receiver((_i, req, res) => {
      res.statusCode = req.url === '/bad' ? 500 : 200;
      res.end();
    });
    const { log, sink } = logger();
    await sendWebhooks(
      'STARTED',
      cfg([
        { event: 'STARTED', method: 'GET', url: `${r.base}/bad` },
        { event: 'STARTED', method: 'GET', url: `${r.base}/next` },
      ]),
      { vars, log },
    );
    expect(r.seen.map((s) => s.url)).toEqual(['/bad']);
    const last = JSON.parse(sink.lines.at(-1)!);
    expect(last.error).toBe(`got 500 status code from ${r.base}/bad`);
  });

  it('never throws when the receiver is down; the failure is logged', async () => {
    const r = await receiver();
    const port = new URL(r.base).port;
    await new Promise((res) => servers.pop()!.close(res));
    const { log, sink } = logger();
    await expect(sendWebhooks('STARTED', cfg([{ event: 'STARTED', method: 'GET', url: `http://127.0.0.1:${port}/` }]), { vars, log })).resolves.toBeUndefined();
    expect(JSON.parse(sink.lines.at(-1)!).error).toMatch(/ECONNREFUSED|fetch failed|connect/i);
  });

  it('an invalid webhook disables all hooks and is logged; nothing is sent', async () => {
    const r = await receiver();
    const { log, sink } = logger();
    await sendWebhooks(
      'STARTED',
      cfg([
        { event: 'STARTED', method: 'GET', url: `${r.base}/ok` },
        { event: 'STARTED', method: '', url: `${r.base}/nomethod` },
      ]),
      { vars, log },
    );
    expect(r.seen).toHaveLength(0);
    expect(JSON.parse(sink.lines[0])).toMatchObject({ msg: 'webhooks disabled: invalid webhook', error: 'install.webhooks[1]: unknown HTTP method: ' });
  });

  it('keeps tokens in headers and URLs out of the log', async () => {
    const r = await receiver((_i, _req, res) => {
      res.statusCode = 404;
      res.end();
    });
    const { log, sink } = logger();
    await sendWebhooks(
      'STARTED',
      cfg([{ event: 'STARTED', method: 'POST', url: `${r.base}/h?token=tok-123456`, headers: { Authorization: ['Bearer bearer-abcdef'] } }]),
      { vars, log },
    );
    expect(r.seen[0].headers.authorization).toBe('Bearer bearer-abcdef');
    const logs = sink.lines.join('');
    expect(logs).toContain('got 404 status code');
    expect(logs).not.toContain('tok-123456');
    expect(logs).not.toContain('bearer-abcdef');
  });

  it('does nothing without webhooks and stops when aborted', async () => {
    const { log, sink } = logger();
    await sendWebhooks('STARTED', {}, { log });
    expect(sink.lines).toHaveLength(0);
    const ac = new AbortController();
    // Aborted once the request is in (and left hanging), not after a fixed delay a loaded host may outrun.
    const r = await receiver(() => setTimeout(() => ac.abort(new Error('install cancelled')), 50));
    await sendWebhooks('STARTED', cfg([{ event: 'STARTED', method: 'GET', url: `${r.base}/hang` }]), { vars, log, signal: ac.signal, timeoutMs: 60_000 });
    expect(r.seen).toHaveLength(1);
    expect(JSON.parse(sink.lines.at(-1)!).level).toBe('error');
  });
});

describe('webhook credentials in the URL', () => {
  it('user:pass@ is sent as Basic credentials; the logged URL carries no password, signature, code or token-like path', async () => {
    const { seen, base } = await receiver((_i, _q, res) => {
      res.statusCode = 500;
      res.end();
    });
    const url = `${base.replace('http://', 'http://hook:hook-pass-1@')}/hooks/Zx9Qw8Er7Ty6Ui5Op4As3Df2?sig=sig-value-2&code=code-value-3&event=STARTED`;
    const { sink, log } = logger();
    await sendWebhooks('STARTED', cfg([{ event: 'STARTED', method: 'POST', url, payload: '{}' }]), { vars, log });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.authorization).toBe(`Basic ${Buffer.from('hook:hook-pass-1').toString('base64')}`);
    expect(seen[0]!.url).toBe('/hooks/Zx9Qw8Er7Ty6Ui5Op4As3Df2?sig=sig-value-2&code=code-value-3&event=STARTED');
    const logged = sink.lines.join('');
    expect(logged).toContain('webhook failed');
    for (const s of ['hook-pass-1', 'sig-value-2', 'code-value-3', 'Zx9Qw8Er7Ty6Ui5Op4As3Df2']) expect(logged).not.toContain(s);
    expect(logged).toContain('event=STARTED');
  });
});
