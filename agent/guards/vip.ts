/**
 * vip guard (control-plane nodes): the kube-vip static pod manifest is in RKE2's pod-manifests
 * directory, and the VIP answers the Kubernetes API on 6443 once kube-vip leads. Reports which
 * node holds the VIP (kube-vip's lease).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { NO_NODE_CONFIG, type Guard } from '../guard.js';
import { rke2Settings } from '../rke2/settings.js';
import { desiredRole } from '../rke2/role.js';
import { isPromoted } from '../rke2/bringup.js';
import { loadServerTls, probeUrl } from '../rke2/health.js';
import { loadKubeCredentials } from '../kube/kubeconfig.js';
import { KubeClient } from '../kube/client.js';
import { findKubeVipManifest, vipHolder } from '../vip/holder.js';
import { vipFromServerUrl } from '../promote/server-dropin.js';

const guard: Guard = {
  name: 'vip',
  dependsOn: ['rke2'],
  deadlineMs: 5 * 60_000,
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
    if (!manifest) {
      return {
        status: 'fail',
        diagnosis: `no kube-vip manifest in ${s.podManifestsDir}`,
        hint: 'the installer renders it for create nodes (hvinstall render); restore it and run `hvagent once --guard vip`',
      };
    }

    const url = s.vipUrl ?? `https://${vip}:6443/readyz`;
    const probe = await probeUrl(url, await loadServerTls(ctx.root(s.serverTlsDir)));
    if (!probe.done) {
      return { status: 'retry', reason: `VIP ${vip} does not answer on 6443 yet (kube-vip from ${manifest} may not lead yet): ${probe.reason}` };
    }
    let holder: string | undefined;
    try {
      const client = new KubeClient(await loadKubeCredentials(s.adminKubeconfig, ctx.root));
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
