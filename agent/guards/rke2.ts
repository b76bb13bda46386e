/**
 * rke2 guard: the node's RKE2 role is running and ready — rke2-server answering /readyz on a create
 * (or promoted) node, the kubelet healthy on a joining agent. Ready within the deadline or a diagnosis
 * with the service's last log lines.
 */
import { NO_NODE_CONFIG, type Guard } from '../guard.js';
import { rke2Settings } from '../rke2/settings.js';
import { desiredRole } from '../rke2/role.js';
import { bringUp, isPromoted, probeRole } from '../rke2/bringup.js';
import { chooseServices } from '../rke2/services.js';
import { judgeUnderRancherd, rancherdState } from '../rke2/under-rancherd.js';

const guard: Guard = {
  name: 'rke2',
  // certificates: a server whose certificates expired while it was off gets them rotated first.
  dependsOn: ['network-online', 'node-identity', 'time-sync', 'certificates', 'registries', 'image-preload'],
  // A first rke2-server start brings up etcd and every control-plane pod; 20 minutes on slow disks.
  deadlineMs: 20 * 60_000,
  async reconcile(ctx) {
    const config = ctx.config;
    if (!config) return NO_NODE_CONFIG;
    const s = rke2Settings(ctx.settings);
    const role = desiredRole(config, await isPromoted(ctx));
    if (!role) return { status: 'skip', reason: `install mode '${config.install?.mode ?? ''}' does not run RKE2` };
    if (ctx.bootstrapper === 'rancherd') {
      // rancherd owns RKE2 here: observe and explain, never write its drop-ins nor start or stop it.
      const services = await chooseServices(s.supervisor, s.binary, ctx.root, s.env);
      const rke2 = await services.state(role);
      const probe = rke2.active ? await probeRole(role, config, s, ctx) : undefined;
      const rancherd = await rancherdState(services.kind === 'systemd');
      return judgeUnderRancherd({ role, rke2, probe, rancherd, rke2Tail: rke2.active ? undefined : await services.logTail(role) });
    }
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
