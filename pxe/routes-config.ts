/**
 * The secrets' routes: GET /config/<machine>.yaml?credential=… (the machine's config, once per boot
 * credential) and POST /attest/<machine>?credential=… (TPM attestation for a machine enrolled by
 * its endorsement key, tpm/attestation.ts). Every refusal for a known machine is recorded where the
 * operator sees it (its refusals in /machines, the log, hvpxe_refused_total). Unknown machines and
 * requests without a credential of theirs get the same 404, so names cannot be probed.
 */
import { BOOT_CREDENTIAL_PARAM, ATTEST_BODY_MAX } from '../config/hvpxe-protocol.js';
import { JSON_TYPE, readBounded, type RequestContext, type Route } from './http.js';
import { refuseCredential, target, withStore } from './route-guards.js';
import { renderMachineConfig } from './render-config.js';
import { serialiseServedConfig } from './state.js';
import type { ServeContext } from './serve-context.js';
import { parseAttestMessage } from './tpm/attestation.js';

async function config(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = await target(ctx, c, name);
  if (!m) return;
  // HEAD would use up the credential without delivering the config.
  if (c.req.method === 'HEAD') return c.reply(405, 'GET only\n', undefined, { Allow: 'GET' });
  const credential = c.query.get(BOOT_CREDENTIAL_PARAM);
  const attested = !!m.tpmEkSha256;
  const check = await withStore(ctx, c, m, 'config', () => ctx.book.checkCredential(m.name, credential, 'config', attested));
  if (!check) return;
  if (!check.ok) return refuseCredential(ctx, c, m, 'config', check);
  const yaml = serialiseServedConfig(m, renderMachineConfig(c.state.catalog, m, ctx.url, credential!));
  // Once in the store, or not at all: every server (and a restart) must know the credential is used and an install runs.
  const served = await withStore(ctx, c, m, 'config', () => ctx.book.configServed(m, credential!, attested, c.client));
  if (!served) return ctx.metrics.storeRefusal('config');
  // Used by another request (another server) between the check and the write.
  if (!served.ok) return refuseCredential(ctx, c, m, 'config', served);
  ctx.metrics.configsServed++;
  ctx.log.info('config served', { machine: m.name, client: c.client || undefined, attested: served.record.attestedAt ? true : undefined });
  c.reply(200, yaml, 'application/yaml', { 'Cache-Control': 'no-store' });
}

async function attest(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = await target(ctx, c, name);
  if (!m) return;
  const body = await readBounded(c.req, ATTEST_BODY_MAX);
  if (!m.tpmEkSha256) return c.reply(404, 'this machine is not enrolled by a TPM\n');
  if (body === undefined) return c.reply(413, `attestation message larger than ${ATTEST_BODY_MAX} bytes\n`);
  const check = await withStore(ctx, c, m, 'attestation', () => ctx.book.checkCredential(m.name, c.query.get(BOOT_CREDENTIAL_PARAM), 'attest', false));
  if (!check) return;
  if (!check.ok) return refuseCredential(ctx, c, m, 'attest', check);
  const msg = parseAttestMessage(body);
  if (!msg) return c.reply(400, 'not an attestation message (config/hvpxe-protocol.ts)\n');
  const now = Date.now();
  const r = msg.step === 'challenge' ? ctx.attestations.challenge(check.record.sha256, m.tpmEkSha256, msg, now) : ctx.attestations.prove(check.record.sha256, msg, now);
  if (!r.ok) {
    await ctx.book.refuse(m, 'attest', r.reason, r.detail, c.client);
    return c.reply(403, `refused: ${r.detail}\n`);
  }
  if (msg.step === 'challenge') return c.reply(200, JSON.stringify(r.value) + '\n', JSON_TYPE, { 'Cache-Control': 'no-store' });
  if ((await withStore(ctx, c, m, 'attestation', () => ctx.book.attested(m, check.record.sha256).then(() => true))) === undefined) return;
  ctx.log.info('machine proved its enrolled TPM', { machine: m.name, client: c.client || undefined });
  c.reply(204, '');
}

export function configRoutes(ctx: ServeContext): Route[] {
  return [
    { path: /^\/config\/([a-z0-9.-]{1,253})\.yaml$/, label: '/config/', handle: (c, name) => config(ctx, c, name) },
    { path: '/attest/', method: 'POST', handle: (c, name) => attest(ctx, c, name) },
  ];
}
