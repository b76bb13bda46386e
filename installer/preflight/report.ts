/** The shape of a preflight report: one row per check, plain data for tables, JSON and the installer. */

export type CheckResult = 'pass' | 'warn' | 'fail';
export type Profile = 'testing' | 'production';
export const PROFILES: readonly Profile[] = ['testing', 'production'];

export interface PreflightCheck {
  /** Stable id, e.g. `cpu.cores`, `device.size`, `nic.speed`. */
  id: string;
  /** What was checked, for people: `CPU cores`, `install disk size`. */
  title: string;
  /** The disk or NIC the check is about, when it is about one. */
  subject?: string;
  result: CheckResult;
  measured: string;
  /** Empty when the check has no numeric threshold. */
  threshold: string;
  /** Harvester's wording where it has one. */
  message: string;
  /** One line on what to do; empty when the check passed. */
  whatToDo: string;
  /**
   * True when Harvester lets `install.skipchecks` override a failure (hardware thresholds, disk
   * sizes). False for hard errors that no flag can make safe (missing or mounted device, legacy BIOS).
   */
  skippable: boolean;
}

export interface PreflightReport {
  profile: Profile;
  sysroot: string;
  /** The install disk checked (from the config, else the suggestion), as a machine path. */
  installDevice?: string;
  dataDisk?: string;
  /** Without a config: the disk preflight would install onto. */
  suggestedDevice?: string;
  /** What the config's disk selectors chose, with every disk and why (installer/preflight/disk-select.ts). */
  diskChoices?: import('./disk-select.js').DiskChoice[];
  checks: PreflightCheck[];
  summary: { pass: number; warn: number; fail: number };
}

export function summarise(checks: PreflightCheck[]): PreflightReport['summary'] {
  return {
    pass: checks.filter((c) => c.result === 'pass').length,
    warn: checks.filter((c) => c.result === 'warn').length,
    fail: checks.filter((c) => c.result === 'fail').length,
  };
}
