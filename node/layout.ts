/**
 * The cOS layout of the installed node (harvester/harvester-installer pkg/config/templates/cos-rootfs.yaml): which filesystems are mounted where, what
 * stays writable in RAM, and which paths persist on COS_PERSISTENT as bind mounts from
 * /usr/local/.state/<path-with-dashes>.bind. Also where the install engine must write a node path.
 */
import path from 'node:path';
import type { HarvesterConfig } from '../config/types.js';

export const LONGHORN_DEFAULT_DISK = '/var/lib/harvester/defaultdisk';
export const LONGHORN_LABEL = 'HARV_LH_DEFAULT';

export const BASE_PERSISTENT_STATE_PATHS = [
  '/etc/NetworkManager', '/etc/systemd', '/etc/rancher', '/etc/ssh', '/etc/iscsi', '/etc/nvme', '/etc/cni',
  '/etc/pki/trust/anchors', '/home', '/opt', '/root', '/usr/libexec', '/var/log', '/var/lib/rancher',
  '/var/lib/kubelet', '/var/lib/wicked', '/var/lib/NetworkManager', '/var/lib/cni', '/var/lib/third-party',
  '/var/crash', '/var/lib/longhorn',
];
export const RW_PATHS = ['/var', '/etc', '/srv', '/boot', '/lib/firmware'];
export const OVERLAY = 'tmpfs:25%';

/** Harvester's rule: a data partition exists unless the node is a witness, or MBR without a data disk. */
export function defaultHasDataPartition(config: HarvesterConfig): boolean {
  const role = String(config.install?.role ?? '').toLowerCase();
  if (role === 'witness') return false;
  if (config.install?.forceMbr && !config.install?.dataDisk) return false;
  return true;
}

export function persistentStatePaths(config: HarvesterConfig, hasDataPartition: boolean): string[] {
  const out: string[] = [];
  for (const p of [...BASE_PERSISTENT_STATE_PATHS, ...(config.os?.persistentStatePaths ?? []), ...(hasDataPartition ? [] : [LONGHORN_DEFAULT_DISK])]) {
    const clean = p.replace(/\/+$/, '') || '/';
    if (!out.includes(clean)) out.push(clean);
  }
  return out;
}

export function volumes(hasDataPartition: boolean): string[] {
  return ['LABEL=COS_OEM:/oem', 'LABEL=COS_PERSISTENT:/usr/local', ...(hasDataPartition ? [`LABEL=${LONGHORN_LABEL}:${LONGHORN_DEFAULT_DISK}`] : [])];
}

/** `/var/lib/rancher` → `/usr/local/.state/var-lib-rancher.bind` (cOS's bind-state naming). */
export function bindStateDir(persistentPath: string): string {
  return `/usr/local/.state/${persistentPath.replace(/^\/+/, '').replace(/\//g, '-')}.bind`;
}

export type Placement =
  | { partition: 'COS_OEM'; relPath: string }
  | { partition: 'COS_PERSISTENT'; relPath: string }
  | { partition: 'none'; reason: string };

/**
 * Where the install engine writes a rendered node path: /oem/* on COS_OEM; a path under a persistent
 * state path in that path's bind directory on COS_PERSISTENT (relPath relative to the partition's
 * root); anything else lives only in RAM on the node and must come from yip instead.
 */
export function placeNodePath(nodePath: string, statePaths: string[]): Placement {
  if (nodePath === '/oem' || nodePath.startsWith('/oem/')) return { partition: 'COS_OEM', relPath: nodePath.slice('/oem/'.length) };
  if (nodePath.startsWith('/usr/local/')) return { partition: 'COS_PERSISTENT', relPath: nodePath.slice('/usr/local/'.length) };
  const owner = [...statePaths].sort((a, b) => b.length - a.length).find((p) => nodePath === p || nodePath.startsWith(`${p}/`));
  if (!owner) return { partition: 'none', reason: `${nodePath} is not under /oem or a persistent state path` };
  const bind = bindStateDir(owner).slice('/usr/local/'.length);
  return { partition: 'COS_PERSISTENT', relPath: `${bind}${nodePath.slice(owner.length)}` };
}

/** Where a node path lives on COS_PERSISTENT: the bind directory of the longest persistent path above it. */
export function persistentLocation(nodePath: string, persistentPaths: string[]): string | undefined {
  const owner = persistentPaths
    .filter((p) => nodePath === p || nodePath.startsWith(`${p}/`))
    .sort((a, b) => b.length - a.length)[0];
  if (!owner) return undefined;
  return path.posix.join('.state', bindDirName(owner), nodePath.slice(owner.length));
}

/** cos-layout's bind directory name: /var/lib/rancher → var-lib-rancher.bind. */
export function bindDirName(p: string): string {
  return `${p.replace(/^\/+/, '').replace(/\//g, '-')}.bind`;
}
