/**
 * One install per arm, whichever boot server a machine reaches. Several hvpxe servers share one
 * store (docs/fleet.md); the decision to hand out an install script is written to the machine's
 * record with a compare-and-swap (store-etcd.ts), so two servers answering the same machine at the
 * same moment see each other's claim: the one whose write lands first serves the installer, the
 * other re-reads the record, finds the claim and serves the disk. A server may renew its own claim
 * (the machine rebooted and came back to it, as with one server); another server's claim is
 * respected for CLAIM.windowMs, the time a network boot takes to fail and come back.
 *
 * And one rule the fleet adds to the single server's (history-document.ts holds the installs that
 * were running when hvpxe stopped): a machine whose config came from a server that is no longer up
 * cannot report its outcome (its event URL names that server), so whether it finished is unknown
 * and it is held on its disk, never reinstalled. Pure.
 */
import type { InstallClaim, MachineActivity } from './history-document.js';

export const CLAIM = {
  /** Another server's claim stands this long: one failed network boot and the firmware's next try. */
  windowMs: 60_000,
} as const;

export type ClaimDecision = { ok: true; claim: InstallClaim } | { ok: false; why: string };

/** Whether `server` may hand out an install script now, given the machine's last claim. Pure. */
export function claimInstall(last: InstallClaim | undefined, server: string, now: number): ClaimDecision {
  const claim = { server, at: new Date(now).toISOString() };
  if (!last || last.server === server) return { ok: true, claim };
  const age = now - Date.parse(last.at);
  if (!(age < CLAIM.windowMs) || age < 0) return { ok: true, claim };
  return {
    ok: false,
    why: `hvpxe ${last.server} handed this machine its installer ${Math.floor(age / 1000)} s ago (one install per arm): this boot goes to the disk; a machine that is not installing comes back to the network within ${CLAIM.windowMs / 1000} s and gets it`,
  };
}

/**
 * The hold for a machine whose install runs through a server that is gone: `live` are the servers
 * up now (their presence in the store), `server` this one. Undefined when the machine is not
 * installing, installs through a live server, or through no named one (a single server). Pure.
 */
export function orphanedInstall(a: Pick<MachineActivity, 'installing' | 'installed' | 'hold'> | undefined, live: ReadonlySet<string>, server: string): string | undefined {
  const via = a?.installing?.via;
  if (!via || a.installed || a.hold || via === server || live.has(via)) return undefined;
  return `hvpxe ${via}, which served its config at ${a.installing!.since}, is not running: the install's outcome could not be reported, so whether it finished is unknown`;
}

/**
 * The hold for a machine whose report of a finished install reached a server that could not store
 * it (the store was unavailable; the installer posts each event once, so the report is gone):
 * whether it finished is unknown, so it boots its disk until re-armed. `reportedAt`: when the
 * report came. Undefined once it no longer applies: the machine is installed or held, was re-armed
 * since, or is not installing. Pure.
 */
export function lostSuccessHold(a: Pick<MachineActivity, 'installing' | 'installed' | 'hold' | 'rearmedAt'> | undefined, reportedAt: string): string | undefined {
  if (!a?.installing || a.installed || a.hold) return undefined;
  if (a.rearmedAt && Date.parse(a.rearmedAt) >= Date.parse(reportedAt)) return undefined;
  return `its install reported success at ${reportedAt} while the machine store could not be written, and that report is lost: whether it finished is unknown`;
}
