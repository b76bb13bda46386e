/**
 * The secrets' routes: GET /config/<machine>.yaml?credential=… (the machine's config, once per boot
 * credential) and POST /attest/<machine>?credential=… (TPM attestation for a machine enrolled by
 * its endorsement key, tpm/attestation.ts). Every refusal for a known machine is recorded where the
 * operator sees it (its refusals in /machines, the log, hvpxe_refused_total). Unknown machines and
 * requests without a credential of theirs get the same 404, so names cannot be probed.
 */
import { BOOT_CREDENTIAL_PARAM, ATTEST_BODY_MAX } from '../config/hvpxe-protocol.js';
import { JSON_TYPE, readBounded, type RequestContext, type Route } from './http.js';
import { refuseCredential, target } from './route-guards.js';
import { renderMachineConfig } from './render-config.js';
import { serialiseServedConfig } from './state.js';
import type { ServeContext } from './serve-context.js';
import { parseAttestMessage } from './tpm/attestation.js';

async function config(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const t = target(ctx, c, name);
  if (!t) return;
  const { m, a } = t;
  // HEAD would use up the credential without delivering the config.
  if (c.req.method === 'HEAD') return c.reply(405, 'GET only\n', undefined, { Allow: 'GET' });
  const check = ctx.book.checkCredential(a, c.query.get(BOOT_CREDENTIAL_PARAM), 'config', !!m.tpmEkSha256);
  if (!check.ok) return refuseCredential(ctx, c, a, 'config', check);
  const credential = c.query.get(BOOT_CREDENTIAL_PARAM)!;
  const yaml = serialiseServedConfig(m, renderMachineConfig(c.state.catalog, m, ctx.url, credential));
  const before = { installing: a.installing, fetched: a.fetched.config };
  ctx.book.seen(a, c.client);
  ctx.book.configServed(a, check.record);
  try {
    // Once on disk, or not at all: a restart must know the credential is used and an install runs.
    await ctx.book.persistNow();
  } catch (err) {
    check.record.configAt = undefined;
    a.installing = before.installing;
    a.fetched.config = before.fetched;
    ctx.log.error('config not served: the machine history cannot be written', { machine: m.name, error: (err as Error).message });
    return c.reply(503, 'hvpxe cannot record this install in its machine history right now; retry shortly\n', undefined, { 'Retry-After': '10' });
  }
  ctx.metrics.configsServed++;
  ctx.log.info('config served', { machine: m.name, client: c.client || undefined, attested: check.record.attestedAt ? true : undefined });
  c.reply(200, yaml, 'application/yaml', { 'Cache-Control': 'no-store' });
}

async function attest(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const t = target(ctx, c, name);
  if (!t) return;
  const { m, a } = t;
  const body = await readBounded(c.req, ATTEST_BODY_MAX);
  if (!m.tpmEkSha256) return c.reply(404, 'this machine is not enrolled by a TPM\n');
  if (body === undefined) return c.reply(413, `attestation message larger than ${ATTEST_BODY_MAX} bytes\n`);
  const check = ctx.book.checkCredential(a, c.query.get(BOOT_CREDENTIAL_PARAM), 'attest', false);
  if (!check.ok) return refuseCredential(ctx, c, a, 'attest', check);
  const msg = parseAttestMessage(body);
  if (!msg) return c.reply(400, 'not an attestation message (config/hvpxe-protocol.ts)\n');
  const now = Date.now();
  if (msg.step === 'challenge') {
    const r = ctx.attestations.challenge(check.record.sha256, m.tpmEkSha256, msg, now);
    if (!r.ok) {
      ctx.book.refuse(a, 'attest', r.reason, r.detail, c.client);
      return c.reply(403, `refused: ${r.detail}\n`);
    }
    return c.reply(200, JSON.stringify(r.value) + '\n', JSON_TYPE, { 'Cache-Control': 'no-store' });
  }
  const r = ctx.attestations.prove(check.record.sha256, msg, now);
  if (!r.ok) {
    ctx.book.refuse(a, 'attest', r.reason, r.detail, c.client);
    return c.reply(403, `refused: ${r.detail}\n`);
  }
  check.record.attestedAt = new Date(now).toISOString();
  ctx.book.persist();
  ctx.log.info('machine proved its enrolled TPM', { machine: m.name, client: c.client || undefined });
  c.reply(204, '');
}

export function configRoutes(ctx: ServeContext): Route[] {
  return [
    { path: /^\/config\/([a-z0-9.-]{1,253})\.yaml$/, label: '/config/', handle: (c, name) => config(ctx, c, name) },
    { path: '/attest/', method: 'POST', handle: (c, name) => attest(ctx, c, name) },
  ];
}
