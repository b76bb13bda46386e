/**
 * Preflight public surface (issue #3): gather this machine's facts, find the disk a config names,
 * and check the machine against Harvester's requirements.
 */
export type * from './types.js';
export { gatherMachineFacts, type GatherOptions } from './gather.js';
export { resolveDevice, resolveLocated, locateDevice, type LocatedDevice } from './resolve.js';
