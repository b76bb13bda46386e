/**
 * vip guard (control-plane nodes): the kube-vip static pod manifest is in RKE2's pod-manifests
 * directory, and the VIP answers the Kubernetes API on 6443 once kube-vip leads. Reports which
 * node holds the VIP (kube-vip's lease).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { NO_NODE_CONFIG, type Guard, type GuardContext, type GuardResult } from '../guard.js';
import { sleep } from '../../lib/wait.js';
import { rke2Settings } from '../rke2/settings.js';
import { desiredRole } from '../rke2/role.js';
import { isPromoted } from '../rke2/bringup.js';
import { loadServerTls, probeUrl } from '../rke2/health.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import { KubeClient } from '../kube/client.js';
import { findKubeVipManifest, vipHolder } from '../vip/holder.js';
import { vipFromServerUrl } from '../promote/server-dropin.js';

/**
 * Under rancherd the harvester chart's kube-vip DaemonSet announces the VIP (services mode, ARP;
 * harvester/harvester deploy/charts/harvester kube-vip values): hvagent never announces it and only
 * reports whether it answers and who holds it. hvinstall's own static-pod kube-vip beside it would
 * be a second leader election for the same address: that is a failure to fix, not to fight.
 */
export interface VipUnderRancherd {
  vip: string;
  /** hvinstall's kube-vip static pod manifest, if one is in RKE2's pod-manifests. */
  staticPod?: string;
  probe: { done: true; value: string } | { done: false; reason: string };
  holder?: string;
}

export function judgeVipUnderRancherd(f: VipUnderRancherd): GuardResult {
  if (f.staticPod) {
    return {
      status: 'fail',
      diagnosis: `${f.staticPod} runs hvinstall's kube-vip as a static pod for VIP ${f.vip}, beside the harvester chart's kube-vip that owns it on this image: two leader elections for one address`,
      hint: 'remove the static pod manifest (the harvester chart announces the VIP); hvinstall renders it only for images without rancherd',
    };
  }
  const owner = "announced by the harvester chart's kube-vip, not by hvagent";
  if (f.probe.done) return { status: 'ok', detail: `VIP ${f.vip} answers on 6443 (${owner}); held by ${f.holder ?? 'an unknown node (lease unreadable)'}` };
  return { status: 'ok', detail: `VIP ${f.vip} does not answer on 6443 yet (${owner}, once Harvester is deployed): ${f.probe.reason}` };
}

async function observeVip(ctx: GuardContext, vip: string, s: ReturnType<typeof rke2Settings>, staticPod: string | undefined): Promise<VipUnderRancherd> {
  const probe = await probeUrl(s.vipUrl ?? `https://${vip}:6443/readyz`, await loadServerTls(ctx.root(s.serverTlsDir)), { signal: ctx.stopping });
  let holder: string | undefined;
  if (probe.done) holder = await readHolder(ctx, s);
  return { vip, staticPod: staticPod ? `${s.podManifestsDir}/${staticPod}` : undefined, probe, holder };
}

async function readHolder(ctx: GuardContext, s: ReturnType<typeof rke2Settings>): Promise<string | undefined> {
  try {
    const client = new KubeClient(await loadKubeCredentials(s.adminKubeconfig, ctx.root), { signal: ctx.stopping });
    try {
      return await vipHolder(client);
    } finally {
      await client.close();
    }
  } catch (err) {
    ctx.log.warn('cannot read kube-vip lease', { error: (err as Error).message });
    return undefined;
  }
}

const WATCH_INTERVAL_MS = 30_000;

const guard: Guard = {
  name: 'vip',
  dependsOn: ['rke2'],
  deadlineMs: 5 * 60_000,
  // Under rancherd the VIP is the chart's: keep reporting whether it answers and who holds it.
  async watch(ctx) {
    if (ctx.bootstrapper !== 'rancherd') return;
    let last: string | undefined;
    while (!ctx.signal.aborted) {
      try {
        await sleep(typeof ctx.settings.vipWatchIntervalMs === 'number' ? ctx.settings.vipWatchIntervalMs : WATCH_INTERVAL_MS, ctx.signal);
      } catch {
        return;
      }
      const r = await guard.reconcile(ctx);
      const text = r.status === 'ok' ? r.detail : r.status === 'fail' ? `problem: ${r.diagnosis}` : r.status === 'skip' ? r.reason : r.reason;
      if (text && text !== last) ctx.progress(text);
      last = text;
    }
  },
  async reconcile(ctx) {
    const config = ctx.config;
    if (!config) return NO_NODE_CONFIG;
    const s = rke2Settings(ctx.settings);
    if (desiredRole(config, await isPromoted(ctx)) !== 'server') {
      return { status: 'skip', reason: 'not a control-plane node (kube-vip runs on control-plane nodes only)' };
    }
    // A promoted join node knows the VIP from server_url.
    const vip = config.install?.vip || vipFromServerUrl(config.serverUrl);
    const mode = (config.install?.vipMode ?? '').toLowerCase();
    if (mode === 'none' || !vip) return { status: 'skip', reason: mode === 'none' ? 'vip_mode is none' : 'no VIP configured on this node' };

    const dir = ctx.root(s.podManifestsDir);
    const files: Record<string, string> = {};
    for (const f of (await readdir(dir).catch(() => [] as string[])).filter((n) => /\.ya?ml$/.test(n))) {
      files[f] = await readFile(path.join(dir, f), 'utf8').catch(() => '');
    }
    const manifest = findKubeVipManifest(files);
    if (ctx.bootstrapper === 'rancherd') return judgeVipUnderRancherd(await observeVip(ctx, vip, s, manifest));
    if (!manifest) {
      return {
        status: 'fail',
        diagnosis: `no kube-vip manifest in ${s.podManifestsDir}`,
        hint: 'the installer renders it for create nodes (hvinstall render); restore it and run `hvagent once --guard vip`',
      };
    }

    const url = s.vipUrl ?? `https://${vip}:6443/readyz`;
    const probe = await probeUrl(url, await loadServerTls(ctx.root(s.serverTlsDir)), { signal: ctx.stopping });
    if (!probe.done) {
      return { status: 'retry', reason: `VIP ${vip} does not answer on 6443 yet (kube-vip from ${manifest} may not lead yet): ${probe.reason}` };
    }
    let holder: string | undefined;
    try {
      const client = new KubeClient(await loadKubeCredentials(s.adminKubeconfig, ctx.root), { signal: ctx.stopping });
      try {
        holder = await vipHolder(client);
      } finally {
        await client.close();
      }
    } catch (err) {
      ctx.log.warn('cannot read kube-vip lease', { error: (err as Error).message });
    }
    return { status: 'ok', detail: `VIP ${vip} answers on 6443; held by ${holder ?? 'an unknown node (lease unreadable)'}` };
  },
};

export default guard;
