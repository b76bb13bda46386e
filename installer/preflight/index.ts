/**
 * Preflight public surface: gather this machine's facts, find the disk a config names,
 * check the machine against Harvester's requirements, and decide whether an install may go on.
 */
export type * from './types.js';
export { gatherMachineFacts, type GatherOptions } from './gather.js';
export { resolveDevice, resolveLocated, resolveConfigAliases, locateDevice, type LocatedDevice } from './resolve.js';
export { runPreflightChecks, type PreflightOptions } from './checks.js';
export type { ImageBootFacts } from './checks/hardware.js';
export { decideInstallGate, gateLines, LEGACY_BIOS_CHECK, type GateInput, type GateMode, type InstallGate } from './gate.js';
export { judgeInstall, nodeFactsFor, gateDecision, gateEvent, gateRefusal, type GateDecision, type GateTarget, type GateVerdict } from './judge.js';
export { suggestInstallDevice, isInstallCandidate } from './suggest.js';
export { selectDisks, chooseDisk, formatDiskChoice, stableNameOf, unavailableBecause, type DiskChoice, type DiskSelection, type CandidateVerdict } from './disk-select.js';
export { formatPreflightReport } from './format.js';
export { probeNtpServers, probeNtpServer, type NtpProbe } from './ntp.js';
export { PROFILES, type CheckResult, type PreflightCheck, type PreflightReport, type Profile } from './report.js';
export { THRESHOLDS, MEMINFO_ALLOWANCE } from './thresholds.js';
