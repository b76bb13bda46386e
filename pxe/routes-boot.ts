/**
 * The boot scripts: GET /boot.ipxe (identifies the machine), /ipxe/auto?mac=&uuid=&… (its script),
 * /ipxe/<machine>?mac=|uuid= (a named machine's script, only to a request that identifies it), and
 * the grub script the TFTP side serves (tftp-routes.ts). An install script carries a fresh boot
 * credential (credentials.ts); a finished or held machine gets a local boot and no credential.
 */
import { archServed } from './arch.js';
import { renderGrubLocalBootScript, renderGrubMachineScript, renderGrubUnsupportedArchScript, renderGrubUntrackedScript } from './grub.js';
import { renderBootScript, renderLocalBootScript, renderMachineScript, renderNoMatchScript, renderUnsupportedArchScript, renderUntrackedScript, type Platform } from './ipxe.js';
import { TEXT, type RequestContext, type Route } from './http.js';
import { machineByName, matchMachine, normaliseMac, normaliseUuid, requestIdentifies, type Machine, type MatchQuery } from './profiles.js';
import type { ServeContext } from './serve-context.js';
import type { ServedState } from './state.js';

/** Which boot chain a script is rendered for, and the architecture it said it runs. */
export interface Chain {
  kind: 'ipxe' | 'grub';
  platform?: Platform;
  arch?: string;
}

const NO_STORE = { 'Cache-Control': 'no-store' };

export function matchQuery(query: URLSearchParams): MatchQuery {
  return { mac: query.get('mac') ?? undefined, uuid: query.get('uuid') ?? undefined, hostname: query.get('hostname') ?? undefined };
}

function platformOf(query: URLSearchParams): Platform | undefined {
  const p = query.get('platform');
  return p === 'pcbios' || p === 'efi' ? p : undefined;
}

/** An architecture as a machine's console may show it (a plain word), else a description. */
function shownArch(arch: string): string {
  return /^[A-Za-z0-9_-]{1,32}$/.test(arch) ? arch : 'an unknown architecture';
}

/**
 * A matched machine's script for a chain: the installer with a fresh boot credential, or its disk
 * (installed, or held because hvpxe cannot tell), or why it cannot boot here.
 */
export async function machineScript(ctx: ServeContext, state: ServedState, m: Machine, chain: Chain, client: string, matchedBy?: string): Promise<string> {
  const grub = chain.kind === 'grub';
  const shown = archServed(chain.arch, chain.platform) ? undefined : shownArch(chain.arch!);
  const answer = await ctx.book.script(m, state.catalog, { via: chain.kind, client, matchedBy, refusedArch: shown });
  if (answer.kind === 'untracked') return grub ? renderGrubUntrackedScript(m) : renderUntrackedScript(m);
  if (answer.kind === 'arch') return grub ? renderGrubUnsupportedArchScript(m, shown!) : renderUnsupportedArchScript(m, shown!);
  if (answer.kind === 'install') {
    const credential = answer.credential;
    return grub
      ? renderGrubMachineScript(state.catalog, m, ctx.url, ctx.tftpDevice(), { matchedBy, credential })
      : renderMachineScript(state.catalog, m, ctx.url, { platform: chain.platform, matchedBy, credential });
  }
  const d = answer.decision;
  if (d.loop) ctx.log.warn('machine loops back to the network after a local boot', { machine: m.name, detail: d.loop });
  else if (d.kind === 'hold') ctx.log.warn('serving a local boot to a held machine', { machine: m.name, why: d.why });
  else ctx.log.info('serving a local boot to an installed machine', { machine: m.name, installedAt: d.installedAt });
  return grub ? renderGrubLocalBootScript(m, d) : renderLocalBootScript(m, d, { platform: chain.platform });
}

/** The log line for a machine no profile matches (identifiers normalised, so nothing raw reaches the log). */
export function noMatch(ctx: ServeContext, q: MatchQuery, client: string, via: 'ipxe' | 'grub'): void {
  ctx.log.warn('no profile matches a booting machine', { mac: normaliseMac(q.mac), uuid: normaliseUuid(q.uuid), client: client || undefined, via });
}

async function ipxeAuto(ctx: ServeContext, c: RequestContext): Promise<void> {
  const q = matchQuery(c.query);
  const match = matchMachine(c.state.catalog, q);
  if (!match) {
    noMatch(ctx, q, c.client, 'ipxe');
    return c.reply(200, renderNoMatchScript(q), TEXT);
  }
  c.note.machine = match.machine.name;
  const chain: Chain = { kind: 'ipxe', platform: platformOf(c.query), arch: c.query.get('buildarch') ?? undefined };
  c.reply(200, await machineScript(ctx, c.state, match.machine, chain, c.client, match.by), TEXT, NO_STORE);
}

async function ipxeNamed(ctx: ServeContext, c: RequestContext, name: string): Promise<void> {
  const m = machineByName(c.state.catalog, name);
  // The same answer for "unknown" and "not yours", so scripts cannot be probed.
  if (!m || !requestIdentifies(m, matchQuery(c.query))) return c.reply(404, "no such machine (the request must carry the machine's mac= or uuid=)\n");
  c.note.machine = m.name;
  c.reply(200, await machineScript(ctx, c.state, m, { kind: 'ipxe', platform: platformOf(c.query) }, c.client), TEXT, NO_STORE);
}

export function bootRoutes(ctx: ServeContext): Route[] {
  return [
    { path: '/boot.ipxe', handle: (c) => c.reply(200, renderBootScript(ctx.url), TEXT) },
    { path: '/ipxe/auto', handle: (c) => ipxeAuto(ctx, c) },
    { path: '/ipxe/', handle: (c, name) => ipxeNamed(ctx, c, name) },
  ];
}
