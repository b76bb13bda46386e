/**
 * A login shell on the node that finds RKE2's tools: kubectl, crictl and ctr live in
 * /var/lib/rancher/rke2/bin and rke2 itself in /opt/rke2/bin, neither on PATH, and kubectl has no
 * KUBECONFIG (harvester/harvester#2556, #4803). /etc/profile.d is not a persistent path on an
 * Elemental node (/etc is an overlay in RAM), so the file is carried in /oem/90_custom.yaml, which
 * lives on COS_OEM, and yip's initramfs stage writes it at every boot.
 */

import { RKE2_KUBECONFIG } from '../../node/kube-vip.js';

export const OPERATOR_PROFILE_PATH = '/etc/profile.d/90-hvinstall-rke2.sh';
export const RKE2_BIN_DIRS = ['/var/lib/rancher/rke2/bin', '/opt/rke2/bin'];
export const RKE2_CONTAINERD_SOCKET = '/run/k3s/containerd/containerd.sock';

/** POSIX sh (login shells source it with sh, bash or busybox ash); settings already made are kept. */
export function operatorProfile(): string {
  const appendDirs = RKE2_BIN_DIRS.map((d) => `case ":$PATH:" in *":${d}:"*) ;; *) PATH="$PATH:${d}" ;; esac`);
  return [
    '# Written by hvinstall at every boot (from /oem/90_custom.yaml): RKE2\'s tools for operators.',
    ...appendDirs,
    'export PATH',
    // kubectl, crictl and ctr of RKE2 (ctr talks to containerd, crictl to its CRI endpoint).
    `: "\${KUBECONFIG:=${RKE2_KUBECONFIG}}"`,
    `: "\${CONTAINER_RUNTIME_ENDPOINT:=unix://${RKE2_CONTAINERD_SOCKET}}"`,
    `: "\${CONTAINERD_ADDRESS:=${RKE2_CONTAINERD_SOCKET}}"`,
    // Kubernetes' images and containers are in containerd's k8s.io namespace, not ctr's default.
    ': "${CONTAINERD_NAMESPACE:=k8s.io}"',
    'export KUBECONFIG CONTAINER_RUNTIME_ENDPOINT CONTAINERD_ADDRESS CONTAINERD_NAMESPACE',
    '',
  ].join('\n');
}
