/**
 * Every guard of hvagent, by name, loaded on demand: `hvagent once --guard X` loads X alone (its
 * start-up is part of what an operator waits for, and of the preload bench), the daemon all of them.
 */
import { GUARD_ORDER, type Guard, type GuardName } from '../guard.js';

const LOADERS: Readonly<Record<GuardName, () => Promise<{ default: Guard }>>> = {
  'network-online': () => import('./network-online.js'),
  'node-identity': () => import('./node-identity.js'),
  'time-sync': () => import('./time-sync.js'),
  certificates: () => import('./certificates.js'),
  registries: () => import('./registries.js'),
  'image-preload': () => import('./image-preload.js'),
  rke2: () => import('./rke2.js'),
  vip: () => import('./vip.js'),
  'longhorn-disk': () => import('./longhorn-disk.js'),
  promotion: () => import('./promotion.js'),
};

/** The named guards (default: every guard), each module loaded once. */
export async function loadGuards(names: readonly GuardName[] = GUARD_ORDER): Promise<Partial<Record<GuardName, Guard>>> {
  const loaded = await Promise.all(names.map(async (n) => [n, (await LOADERS[n]()).default] as const));
  return Object.fromEntries(loaded);
}
