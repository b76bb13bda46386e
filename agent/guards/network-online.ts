/**
 * network-online: replaces the racy one-shot `nm-online -x` (harvester#10885, #11662). Waits until
 * the management interface has carrier, the bond has an active slave, an IPv4 address, a default
 * route and DNS (when declared), holding steady for a moment, so that LACP flaps are waited out.
 */
import type { HarvesterConfig } from '../../config/types.js';
import { sleep } from '../../lib/wait.js';
import { everyInterval } from './every-interval.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { assessNetwork, bondLinkFailures, type NetworkAssessment, type NetworkWant } from '../network/assess.js';
import { observeNetwork, type ObserveOptions } from '../network/observe.js';
import { loadNodeIdentity } from '../identity/record.js';
import type { DeclaredNic } from '../identity/nics.js';
import type { NodeIdentity } from '../../node/index.js';
import { globalIPv4, recordAddressSample } from '../identity/address-samples.js';

const DEFAULT_LEASE_FILES = ['/var/lib/NetworkManager/*.lease', '/var/lib/NetworkManager/*.leases', '/var/lib/dhcp/*.leases'];

function num(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}

/**
 * What "online" means for this node: from the config, overridable by settings; the install's
 * identity record names the bond's NICs with their MACs (so a renamed one can be named). Pure.
 */
export function networkWant(config: HarvesterConfig | undefined, settings: Record<string, unknown>, identity?: NodeIdentity): NetworkWant {
  const mi = config?.install?.managementInterface;
  const vlan = mi?.vlanId ?? 0;
  const bridge = typeof settings.bridge === 'string' ? settings.bridge : 'mgmt-br';
  const iface = typeof settings.interface === 'string' ? settings.interface : vlan >= 2 && vlan <= 4094 ? `${bridge}.${vlan}` : bridge;
  const bond = settings.bond === false ? undefined : typeof settings.bond === 'string' ? settings.bond : 'mgmt-bo';
  const method = (settings.method ?? mi?.method ?? 'dhcp') === 'static' ? 'static' : 'dhcp';
  return {
    iface,
    bridge,
    bond,
    expectedSlaves: mi?.interfaces?.length ?? 0,
    declaredNics: identity?.nics.length ? identity.nics : declaredNicsOf(config),
    method,
    staticIp: mi?.ip,
    gateway: mi?.gateway,
    dnsServers: config?.os?.dnsNameservers ?? [],
    requireDns: settings.requireDns === true,
  };
}

/** The management NICs as the config names them (name and/or MAC). */
export function declaredNicsOf(config: HarvesterConfig | undefined): DeclaredNic[] {
  return (config?.install?.managementInterface?.interfaces ?? []).map((n) => ({ ...(n.name ? { name: n.name } : {}), ...(n.hwAddr ? { mac: n.hwAddr.trim().toLowerCase() } : {}) }));
}

function observeOptions(ctx: GuardContext, want: NetworkWant): ObserveOptions {
  const s = ctx.settings;
  return {
    root: ctx.root,
    iface: want.iface,
    netns: typeof s.netns === 'string' ? s.netns : undefined,
    ipCommand: typeof s.ipCommand === 'string' ? s.ipCommand : undefined,
    leaseFiles: Array.isArray(s.dhcpLeaseFiles) ? (s.dhcpLeaseFiles as string[]) : DEFAULT_LEASE_FILES,
    resolvConf: typeof s.resolvConf === 'string' ? s.resolvConf : '/etc/resolv.conf',
    signal: ctx.signal,
  };
}

async function check(ctx: GuardContext, want: NetworkWant): Promise<NetworkAssessment> {
  return (await observe(ctx, want)).assessment;
}

async function observe(ctx: GuardContext, want: NetworkWant): Promise<{ assessment: NetworkAssessment; failures: number }> {
  const facts = await observeNetwork(observeOptions(ctx, want));
  // node-identity's window counts these looks at the address (agent/identity/address-samples.ts)
  recordAddressSample(ctx.root('/'), want.iface, ctx.now(), globalIPv4(facts.addrs, want.iface));
  return { assessment: assessNetwork(facts, want), failures: bondLinkFailures(facts, want.bond) };
}

/**
 * One pass: poll for up to `pollWindowMs` until online, then require it to stay online for
 * `stableMs` (a bond that is renegotiating drops carrier again within moments).
 */
async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  const want = networkWant(ctx.config, ctx.settings, (await loadNodeIdentity(ctx.root)).value);
  // One look is an `ip -j` run (two in another network namespace): once a second is soon enough
  // for a boot (the other guards poll as often); every 250 ms meant four process starts a second
  // or more on a node that is still booting.
  const pollMs = num(ctx.settings.pollIntervalMs, 1000);
  const stableMs = num(ctx.settings.stableMs, 2000);
  const windowEnd = ctx.now() + num(ctx.settings.pollWindowMs, 10_000);
  let onlineSince: number | undefined;
  let failuresSince = 0;
  let last: NetworkAssessment;
  let lastMissing: string | undefined;
  for (;;) {
    const seen = await observe(ctx, want);
    last = seen.assessment;
    if (last.online && onlineSince !== undefined && seen.failures !== failuresSince) {
      // A slave lost its link between two looks: the bond is still settling.
      ctx.log.info('network flapped while settling', { missing: `bond ${want.bond}: a slave lost its link (link failures ${failuresSince} -> ${seen.failures})` });
      onlineSince = undefined;
    }
    if (last.online) {
      if (onlineSince === undefined) {
        onlineSince = ctx.now();
        failuresSince = seen.failures;
      }
      if (ctx.now() - onlineSince >= stableMs) return { status: 'ok', detail: last.detail };
      ctx.progress(`online, holding steady (${last.detail})`);
    } else {
      if (onlineSince !== undefined) ctx.log.info('network flapped while settling', { missing: last.missing });
      onlineSince = undefined;
      if (last.missing !== lastMissing) ctx.log.info('network not online yet', { missing: last.missing });
      lastMissing = last.missing;
      ctx.progress(last.missing);
    }
    if (ctx.now() >= windowEnd) {
      if (!last.online) return { status: 'retry', reason: last.missing };
      if (ctx.now() >= windowEnd + stableMs) return { status: 'retry', reason: `online but not steady for ${stableMs} ms: links still flapping (${last.detail})` };
    }
    if (ctx.signal.aborted) return { status: 'retry', reason: last.online === false ? last.missing : 'interrupted while settling' };
    await sleep(pollMs, ctx.signal).catch(() => undefined);
  }
}

/** After online: keep observing, log when the network drops and comes back (not fatal). */
async function watch(ctx: GuardContext): Promise<void> {
  const want = networkWant(ctx.config, ctx.settings, (await loadNodeIdentity(ctx.root)).value);
  const every = num(ctx.settings.watchIntervalMs, 5000);
  let wasOnline = true;
  await everyInterval(ctx.signal, every, async () => {
    const a = await check(ctx, want).catch((err: Error): NetworkAssessment => ({ online: false, missing: `cannot observe: ${err.message}` }));
    if (a.online !== wasOnline) {
      if (a.online) ctx.log.info('management network back online', { detail: a.detail });
      else ctx.log.warn('management network went offline', { missing: a.missing });
      ctx.progress(a.online ? a.detail : `offline since ${new Date(ctx.now()).toISOString()}: ${a.missing}`);
      wasOnline = a.online;
    }
  });
}

const guard: Guard = {
  name: 'network-online',
  dependsOn: [],
  deadlineMs: 5 * 60_000,
  reconcile,
  watch,
};
export default guard;
