/**
 * Who holds the VIP: kube-vip's leader-election Lease. kube-vip names it `plndr-cp-lock` for the
 * control plane and `plndr-svcs-lock` for services, in kube-system.
 */
import type { KubeClient } from '../kube/client.js';

export const VIP_LEASES = ['plndr-cp-lock', 'plndr-svcs-lock'];

export async function vipHolder(client: KubeClient): Promise<string | undefined> {
  for (const name of VIP_LEASES) {
    try {
      const lease = await client.getLease('kube-system', name);
      const holder = (lease.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
      if (holder) return holder;
    } catch {
      /* try the next lease name */
    }
  }
  return undefined;
}

/** Pure: finds the kube-vip static pod among manifest file contents. */
export function findKubeVipManifest(files: Record<string, string>): string | undefined {
  return Object.keys(files)
    .sort()
    .find((f) => /image:\s*["']?[^\s"']*kube-vip/.test(files[f]!) || /\bname:\s*kube-vip\b/.test(files[f]!));
}
