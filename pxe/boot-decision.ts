/**
 * What a machine that network-boots gets: the installer, or its own disk. A machine that reported a
 * finished install boots locally until an operator re-arms it (`hvpxe rearm`) or its profile says
 * `after_install: reinstall`: a fleet whose firmware prefers the network would otherwise reinstall
 * (wipe) a finished node at every reboot (harvester/harvester#1869, #3459, #4627,
 * harvester/seeder#26). A machine that comes back for a local boot again and again within minutes
 * is looping: its firmware found nothing to boot on the disk (an NVRAM without an entry for it, or a
 * boot order with the network first), and the script and /machines say so. Pure.
 */
import { heldByLostHistory, type LostHistory, type MachineActivity } from './history-document.js';

/** This many local boots within the window is a loop. */
export const LOOP_COUNT = 3;
export const LOOP_WINDOW_MS = 10 * 60_000;
/** Local-boot times kept per machine. */
export const LOCAL_BOOTS_KEPT = 10;

export type AfterInstall = 'local' | 'reinstall';

export type BootDecision =
  | { kind: 'install'; why: string }
  | { kind: 'local'; installedAt: string; via: string; loop?: string }
  | { kind: 'hold'; why: string; loop?: string };

/** A finished install, from one event body (hvinstall's progress event or Harvester's webhook payload). */
export function reportsSuccess(data: unknown): boolean {
  if (!data || typeof data !== 'object' || Array.isArray(data)) return false;
  const e = data as Record<string, unknown>;
  return (e.type === 'install' && e.phase === 'succeeded') || e.event === 'SUCCEEDED';
}

/** A failed install, from one event body: the installer said so, and will not report success. */
export function reportsFailure(data: unknown): boolean {
  if (!data || typeof data !== 'object' || Array.isArray(data)) return false;
  const e = data as Record<string, unknown>;
  return (e.type === 'install' && e.phase === 'failed') || e.event === 'FAILED';
}

/** Whether the local boots up to `now` (plus `more` about to be served) make a loop, and what it means. */
export function loopOf(boots: readonly string[] | undefined, now: number, more = 0): string | undefined {
  const count = (boots ?? []).filter((t) => now - Date.parse(t) <= LOOP_WINDOW_MS).length + more;
  if (count < LOOP_COUNT) return undefined;
  return `asked for a local boot ${count} times in ${Math.round(LOOP_WINDOW_MS / 60_000)} min: the firmware comes back to the network instead of booting the disk (no NVRAM boot entry for it, or the network first in the boot order). Put the disk first in the boot order (or add an entry for EFI/BOOT/BOOTX64.EFI on it)`;
}

/**
 * The next network boot of a machine. `now` is when it asks; a local answer counts as one more
 * local boot. `lost`: the history was set aside at start-up (every machine not re-armed since is held).
 */
export function decideBoot(
  a: Pick<MachineActivity, 'installed' | 'localBoots' | 'hold' | 'rearmedAt'> | undefined,
  afterInstall: AfterInstall,
  now: number,
  lost?: LostHistory,
): BootDecision {
  if (afterInstall === 'reinstall') {
    return { kind: 'install', why: a?.installed ? `installed ${a.installed.at}, and the profile says after_install: reinstall` : 'the profile says after_install: reinstall' };
  }
  const loop = loopOf(a?.localBoots, now, 1);
  const looping = loop ? { loop } : {};
  if (a?.installed) return { kind: 'local', installedAt: a.installed.at, via: a.installed.via, ...looping };
  if (a?.hold) return { kind: 'hold', why: a.hold.why, ...looping };
  if (heldByLostHistory(a, lost)) return { kind: 'hold', why: `hvpxe's machine history was lost at ${lost!.at} (${lost!.why}; kept as ${lost!.keptAs}): whether this machine finished installing is unknown`, ...looping };
  return { kind: 'install', why: 'no finished install reported' };
}

/** The local-boot times to keep after serving one now. Pure. */
export function withLocalBoot(boots: readonly string[] | undefined, nowIso: string): string[] {
  return [...(boots ?? []), nowIso].slice(-LOCAL_BOOTS_KEPT);
}
