/**
 * node-identity: before RKE2 starts, the node is still who the cluster knows: its management
 * address is the one recorded (by the install, or by hvagent at the first boot), and the NICs of the
 * bond still carry the names NetworkManager's profiles bind. A changed DHCP address holds RKE2 back
 * with both addresses named, before etcd says "not a member of the etcd cluster"
 * (harvester/harvester#6941, #4290, #1683); a renamed NIC is named with its old name, new name and
 * MAC (#4591, #6808). The address is sampled over a short window, so one that flaps is called so.
 */
import { access } from 'node:fs/promises';
import { run } from '../../lib/exec.js';
import { sleep } from '../../lib/wait.js';
import { everyInterval } from './every-interval.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { parseDuration } from '../settings.js';
import { judgeAddress, type AddressFacts, type AddressJudgement } from '../identity/address.js';
import { describeNicChanges, nicChanges, nicRenameHint, type NicChange } from '../identity/nics.js';
import { loadNodeIdentity, loadSeenAddress, saveSeenAddress, type Loaded, type SeenAddress } from '../identity/record.js';
import { addressSamples, addressWindowEnd, globalIPv4, recordAddressSample } from '../identity/address-samples.js';
import { linkIdentities, type IpAddrEntry, type IpLink } from '../network/assess.js';
import { declaredNicsOf, networkWant } from './network-online.js';
import type { NodeIdentity } from '../../node/index.js';

/** What exists once RKE2 has run here: etcd's data (servers) or the kubelet's kubeconfig (every node). */
const CLUSTER_STATE = ['/var/lib/rancher/rke2/server/db/etcd', '/var/lib/rancher/rke2/agent/kubelet.kubeconfig'];

interface IdentitySettings {
  netns?: string;
  ipCommand: string;
  pollWindowMs: number;
  pollIntervalMs: number;
  historyMs: number;
  watchIntervalMs: number;
  interface?: string;
}

function settingsOf(ctx: GuardContext): IdentitySettings {
  const s = ctx.settings;
  const d = (k: string, fallback: number): number => (s[k] === undefined ? fallback : parseDuration(s[k], `guards.node-identity.${k}`));
  return {
    netns: typeof s.netns === 'string' ? s.netns : undefined,
    ipCommand: typeof s.ipCommand === 'string' ? s.ipCommand : 'ip',
    pollWindowMs: d('pollWindow', 5_000),
    pollIntervalMs: d('pollInterval', 1_000),
    historyMs: d('history', 120_000),
    watchIntervalMs: d('watchInterval', 30_000),
    interface: typeof s.interface === 'string' ? s.interface : undefined,
  };
}

async function ipJson<T>(t: IdentitySettings, args: string[]): Promise<T> {
  const r = await run(t.ipCommand, [...(t.netns ? ['-n', t.netns] : []), '-j', ...args], { timeoutMs: 10_000, allowFailure: true });
  const text = r.exitCode === 0 ? r.stdout.trim() : '';
  return (text ? JSON.parse(text) : []) as T;
}

/**
 * One look at the links and addresses (`ip -d addr show` prints each link as `ip -d link show` does,
 * plus its addresses: one process). The address is recorded with network-online's looks, and the
 * samples of the last `historyMs` (this pass's, earlier passes', network-online's) are returned,
 * so a flap between two passes is still seen.
 */
async function lookAt(ctx: GuardContext, t: IdentitySettings, iface: string): Promise<{ links: IpLink[]; samples: string[][] }> {
  const entries = await ipJson<Array<IpLink & IpAddrEntry>>(t, ['-d', 'addr', 'show']);
  const at = ctx.now();
  recordAddressSample(ctx.root('/'), iface, at, globalIPv4(entries, iface));
  return { links: entries, samples: addressSamples(ctx.root('/'), iface, at - t.historyMs).map((s) => s.addrs) };
}

async function clusterKnows(ctx: GuardContext): Promise<boolean> {
  for (const p of CLUSTER_STATE) if (await access(ctx.root(p)).then(() => true, () => false)) return true;
  return false;
}

interface Look {
  identity: Loaded<NodeIdentity>;
  seen: Loaded<SeenAddress>;
  facts: AddressFacts;
  judgement: AddressJudgement;
  nics: NicChange[];
}

/** The interface carrying the management address: the setting, the install's record, else what the config implies. */
async function managementInterface(ctx: GuardContext, t: IdentitySettings): Promise<string> {
  return t.interface ?? (await loadNodeIdentity(ctx.root)).value?.interface ?? networkWant(ctx.config, ctx.settings).iface;
}

async function look(ctx: GuardContext, t: IdentitySettings, iface: string): Promise<Look> {
  const [identity, seen, { links, samples }, known] = await Promise.all([loadNodeIdentity(ctx.root), loadSeenAddress(ctx.root), lookAt(ctx, t, iface), clusterKnows(ctx)]);
  const want = networkWant(ctx.config, ctx.settings);
  const id = identity.value;
  const facts: AddressFacts = {
    iface,
    method: id?.method ?? want.method,
    samples,
    mac: links.find((l) => l.ifname === iface)?.address,
    install: id?.address ? { address: id.address, source: id.addressSource ?? 'install' } : undefined,
    seen: seen.value?.interface === iface ? seen.value : undefined,
    clusterKnows: known,
  };
  const declared = id?.nics.length ? id.nics : declaredNicsOf(ctx.config);
  return { identity, seen, facts, judgement: judgeAddress(facts), nics: nicChanges(declared, linkIdentities(links)) };
}

function report(ctx: GuardContext, l: Look): void {
  const j = l.judgement;
  ctx.report?.({
    verdict: j.verdict,
    interface: l.facts.iface,
    address: j.verdict === 'ok' ? j.address : undefined,
    current: l.facts.samples.at(-1) ?? [],
    expected: l.facts.seen?.address ?? l.facts.install?.address,
    recordedBy: l.facts.seen ? `hvagent (${l.facts.seen.why})` : l.facts.install ? `install (${l.facts.install.source})` : undefined,
    clusterKnows: l.facts.clusterKnows,
    nicsRenamed: l.nics.filter((c) => c.kind === 'renamed'),
    nicsGone: l.nics.filter((c) => c.kind === 'gone'),
  });
}

function withNics(text: string, nics: NicChange[]): string {
  const named = describeNicChanges(nics);
  return named.length ? `${text}; ${named.join('; ')}` : text;
}

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  if (!ctx.config) return { status: 'skip', reason: 'no node configuration found under /oem: nothing to compare with' };
  if ((ctx.config.install?.mode ?? '').toLowerCase() === 'install') return { status: 'skip', reason: "install mode 'install' sets up no cluster node" };
  const t = settingsOf(ctx);
  const iface = await managementInterface(ctx, t);
  // The window counts the looks network-online took since the address came: on a boot, most of
  // it has passed by the time this guard starts.
  const windowEnd = addressWindowEnd(addressSamples(ctx.root('/'), iface, ctx.now() - t.historyMs), ctx.now(), t.pollWindowMs);
  let l: Look;
  for (;;) {
    l = await look(ctx, t, iface);
    if (ctx.now() >= windowEnd || ctx.signal.aborted) break;
    ctx.progress(`sampling ${l.facts.iface}: ${(l.facts.samples.at(-1) ?? []).join(', ') || 'no address'}`);
    await sleep(t.pollIntervalMs, ctx.signal).catch(() => undefined);
  }
  report(ctx, l);
  for (const p of [l.identity.problem, l.seen.problem]) if (p) ctx.log.warn('node identity record', { problem: p });
  const j = l.judgement;
  switch (j.verdict) {
    case 'ok': {
      if (j.record && (l.seen.value?.address !== j.record.address || l.seen.value.interface !== l.facts.iface)) {
        await saveSeenAddress(ctx.root, { version: 1, address: j.record.address, interface: l.facts.iface, recordedAt: new Date(ctx.now()).toISOString(), why: j.record.why });
        ctx.log.info('node address recorded', { address: j.record.address, interface: l.facts.iface, why: j.record.why });
      }
      const renamed = nicRenameHint(l.nics);
      if (renamed) ctx.log.warn('a management NIC was renamed', { detail: describeNicChanges(l.nics).join('; '), hint: renamed });
      return { status: 'ok', detail: withNics(j.text, l.nics) };
    }
    case 'waiting':
      return { status: 'retry', reason: j.text };
    case 'flapping':
      ctx.log.warn('management address flaps', { addresses: j.addresses });
      return { status: 'retry', reason: j.text };
    case 'changed':
      ctx.log.error('management address changed', { expected: j.expected, current: j.current });
      // Retried until the deadline (a renewed lease may bring the address back); then failed with the hint.
      return { status: 'retry', reason: `${withNics(j.text, l.nics)}. Hint: ${j.hint}` };
  }
}

/** After success: keep sampling; a change while RKE2 runs is logged and shown (the cluster notices it too). */
async function watch(ctx: GuardContext): Promise<void> {
  const t = settingsOf(ctx);
  let last: string | undefined;
  await everyInterval(ctx.signal, t.watchIntervalMs, async () => {
    const l = await look(ctx, t, await managementInterface(ctx, t));
    report(ctx, l);
    if (l.judgement.verdict !== last) {
      if (l.judgement.verdict === 'ok') ctx.log.info('node identity', { detail: l.judgement.text });
      else ctx.log.warn('node identity changed while running', { verdict: l.judgement.verdict, detail: l.judgement.text });
      ctx.progress(withNics(l.judgement.text, l.nics));
    }
    last = l.judgement.verdict;
  });
}

const guard: Guard = {
  name: 'node-identity',
  dependsOn: ['network-online'],
  deadlineMs: 5 * 60_000,
  reconcile,
  watch,
};

export default guard;
