/**
 * rke2 guard: the node's RKE2 role is running and ready — rke2-server answering /readyz on a create
 * (or promoted) node, the kubelet healthy on a joining agent. Ready within the deadline or a diagnosis
 * with the service's last log lines.
 */
import { NO_NODE_CONFIG, type Guard } from '../guard.js';
import { rke2Settings } from '../rke2/settings.js';
import { desiredRole } from '../rke2/role.js';
import { bringUp, isPromoted } from '../rke2/bringup.js';

const guard: Guard = {
  name: 'rke2',
  dependsOn: ['network-online', 'node-identity', 'time-sync', 'registries', 'image-preload'],
  // A first rke2-server start brings up etcd and every control-plane pod; 20 minutes on slow disks.
  deadlineMs: 20 * 60_000,
  async reconcile(ctx) {
    const config = ctx.config;
    if (!config) return NO_NODE_CONFIG;
    const s = rke2Settings(ctx.settings);
    const role = desiredRole(config, await isPromoted(ctx));
    if (!role) return { status: 'skip', reason: `install mode '${config.install?.mode ?? ''}' does not run RKE2` };
    const joining = (config.install?.mode ?? '').toLowerCase() === 'join';
    const out = await bringUp(ctx, config, role, s, joining);
    if (out.ready) return { status: 'ok', detail: `rke2-${role} ready (${out.services.kind})` };
    if (out.fatal) {
      return { status: 'fail', diagnosis: out.reason ?? 'rke2 failed', hint: 'fix the cause above, then `hvagent once --guard rke2`' };
    }
    return { status: 'retry', reason: out.reason ?? 'not ready' };
  },
};

export default guard;
