/**
 * kube-vip as a static pod on the create node, so the VIP answers as soon as the first control plane
 * is up (Harvester instead waits for its chart's DaemonSet, harvester/harvester deploy/charts/harvester). ARP mode with leader
 * election on the management interface, control plane on 6443 and LoadBalancer services.
 */
import { stringify } from 'yaml';
import type { HarvesterConfig } from '../config/types.js';
import { ExitCode, HvError } from '../lib/errors.js';
import { managementInterfaceName } from './management-interface.js';

export const KUBE_VIP_MANIFEST_PATH = '/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml';
export const KUBE_VIP_IMAGE = 'ghcr.io/kube-vip/kube-vip:v0.8.9';
/** RKE2 writes the admin kubeconfig here once the server is up; kubelet retries the mount until then. */
export const RKE2_KUBECONFIG = '/etc/rancher/rke2/rke2.yaml';

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

export function vipMode(config: HarvesterConfig): 'static' | 'dhcp' | 'none' {
  const m = String(config.install?.vipMode ?? 'static').toLowerCase();
  if (m !== 'static' && m !== 'dhcp' && m !== 'none') throw new HvError(`unknown vip mode: ${m}`, { where: 'install.vip_mode', exitCode: ExitCode.checkFailed });
  return m;
}

/**
 * The kube-vip Pod object for a control-plane node, or undefined when vip_mode is none. A create node
 * uses install.vip; a promoted join node passes the VIP (its server_url host) as `vip`.
 */
export function kubeVipPod(config: HarvesterConfig, opts: { vip?: string } = {}): Record<string, unknown> | undefined {
  const mode = vipMode(config);
  if (mode === 'none') return undefined;
  const vip = (opts.vip ?? config.install?.vip ?? '').trim();
  if (!IPV4.test(vip)) {
    throw new HvError(mode === 'dhcp' && !vip ? 'vip_mode dhcp: the VIP obtained by DHCP must be in install.vip before rendering' : `${vip || '(empty)'} is not a valid IP address`, {
      where: 'install.vip',
      hint: mode === 'dhcp' ? 'the installer leases the VIP with vip_hw_addr first and fills install.vip' : 'give the cluster VIP as an IPv4 address',
      exitCode: ExitCode.checkFailed,
    });
  }
  const annotations: Record<string, string> = {};
  if (mode === 'dhcp') {
    const hw = config.install?.vipHwAddr?.trim() ?? '';
    if (!MAC.test(hw)) throw new HvError(`${hw || '(empty)'} is an invalid hardware address`, { where: 'install.vip_hw_addr', hint: 'vip_mode dhcp needs the MAC the DHCP server leases the VIP to', exitCode: ExitCode.checkFailed });
    // The lease belongs to this MAC: Harvester keeps it on the services it exposes (kube-vip.io/hwaddr); recorded here for the agent.
    annotations['hvinstall.io/vip-mode'] = 'dhcp';
    annotations['hvinstall.io/vip-hw-addr'] = hw.toLowerCase();
  }
  const env: Array<[string, string]> = [
    ['vip_arp', 'true'],
    ['port', '6443'],
    ['vip_interface', managementInterfaceName(config)],
    ['vip_cidr', '32'],
    ['cp_enable', 'true'],
    ['cp_namespace', 'kube-system'],
    ['svc_enable', 'true'],
    ['vip_leaderelection', 'true'],
    ['vip_leasename', 'plndr-cp-lock'],
    ['vip_leaseduration', '5'],
    ['vip_renewdeadline', '3'],
    ['vip_retryperiod', '1'],
    ['address', vip],
  ];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'kube-vip',
      namespace: 'kube-system',
      labels: { 'app.kubernetes.io/name': 'kube-vip', 'app.kubernetes.io/managed-by': 'hvinstall' },
      ...(Object.keys(annotations).length ? { annotations } : {}),
    },
    spec: {
      hostNetwork: true,
      hostAliases: [{ ip: '127.0.0.1', hostnames: ['kubernetes'] }],
      priorityClassName: 'system-node-critical',
      containers: [
        {
          name: 'kube-vip',
          image: KUBE_VIP_IMAGE,
          imagePullPolicy: 'IfNotPresent',
          args: ['manager'],
          env: env.map(([name, value]) => ({ name, value })),
          securityContext: { capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
          volumeMounts: [{ name: 'kubeconfig', mountPath: '/etc/kubernetes/admin.conf', readOnly: true }],
        },
      ],
      volumes: [{ name: 'kubeconfig', hostPath: { path: RKE2_KUBECONFIG, type: 'File' } }],
    },
  };
}

export function renderKubeVipManifest(config: HarvesterConfig, opts: { vip?: string } = {}): string | undefined {
  const pod = kubeVipPod(config, opts);
  return pod ? stringify(pod, { lineWidth: 0 }) : undefined;
}
