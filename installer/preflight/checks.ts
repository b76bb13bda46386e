/** runPreflightChecks: the machine's facts against Harvester's requirements. Pure: no I/O. */
import type { HarvesterConfig } from '../../config/types.js';
import type { MachineFacts } from './types.js';
import { summarise, type PreflightCheck, type PreflightReport, type Profile } from './report.js';
import { checkCpuCores, checkCpuVirtFlags, checkDevKvm, checkFirmware, checkMemory, checkSecureBoot, checkVirtualisedHost, type ImageBootFacts } from './checks/hardware.js';
import { checkDisks, type DiskCheckOutput } from './checks/disks.js';
import { checkNics } from './checks/nics.js';
import { checkNtpServers } from './checks/ntp.js';
import type { NtpProbe } from './ntp.js';

export interface PreflightOptions {
  config?: HarvesterConfig;
  profile: Profile;
  /** Config disk names resolved through symlinks by the caller (see resolveConfigAliases). */
  aliases?: Record<string, string>;
  /** What the config's NTP servers answered (probeNtpServers), when they were asked. */
  ntp?: NtpProbe[];
  /** The OS image to install, when known: Secure Boot is a warning when its boot chain would be refused. */
  image?: ImageBootFacts;
  /**
   * False when the install target is not one of these facts' disks (a disk built here for the
   * machine the facts describe): only the machine itself is checked.
   */
  disks?: boolean;
}

export function runPreflightChecks(facts: MachineFacts, opts: PreflightOptions): PreflightReport {
  const { profile, config } = opts;
  const checks: PreflightCheck[] = [
    checkCpuCores(facts, profile),
    checkMemory(facts, profile),
    checkCpuVirtFlags(facts),
    checkDevKvm(facts),
    checkVirtualisedHost(facts),
    checkFirmware(facts),
  ];
  const sb = checkSecureBoot(facts, opts.image);
  if (sb) checks.push(sb);
  const disks = opts.disks === false ? ({ checks: [] } as DiskCheckOutput) : checkDisks({ facts, config, profile, aliases: opts.aliases });
  checks.push(...disks.checks, ...checkNics(facts, config, profile), ...checkNtpServers(opts.ntp ?? []));
  return {
    profile,
    sysroot: facts.sysroot,
    installDevice: disks.installDevice,
    dataDisk: disks.dataDisk,
    suggestedDevice: disks.suggestedDevice,
    diskChoices: disks.diskChoices?.length ? disks.diskChoices : undefined,
    checks,
    summary: summarise(checks),
  };
}
