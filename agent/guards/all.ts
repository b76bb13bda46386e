/** Every guard of this build, imported statically (so a bundled hvagent carries them all). */
import type { Guard, GuardName } from '../guard.js';
import networkOnline from './network-online.js';
import registries from './registries.js';
import imagePreload from './image-preload.js';
import rke2 from './rke2.js';
import vip from './vip.js';
import longhornDisk from './longhorn-disk.js';
import promotion from './promotion.js';

export const GUARDS: Record<GuardName, Guard> = {
  'network-online': networkOnline,
  registries,
  'image-preload': imagePreload,
  rke2,
  vip,
  'longhorn-disk': longhornDisk,
  promotion,
};
