/** Every guard of hvagent, by name; the runner takes its set from here. */
import type { Guard, GuardName } from '../guard.js';
import certificates from './certificates.js';
import imagePreload from './image-preload.js';
import longhornDisk from './longhorn-disk.js';
import networkOnline from './network-online.js';
import nodeIdentity from './node-identity.js';
import promotion from './promotion.js';
import registries from './registries.js';
import rke2 from './rke2.js';
import timeSync from './time-sync.js';
import vip from './vip.js';

export const GUARDS: Readonly<Record<GuardName, Guard>> = {
  'network-online': networkOnline,
  'node-identity': nodeIdentity,
  'time-sync': timeSync,
  certificates,
  registries,
  'image-preload': imagePreload,
  rke2,
  vip,
  'longhorn-disk': longhornDisk,
  promotion,
};
