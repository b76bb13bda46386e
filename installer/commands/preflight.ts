/**
 * `hvinstall preflight [--config F] [--profile P] [--sysroot DIR] [--json]`: what this machine is and
 * whether it can run a node. Exit 0 no failures, 1 a check failed, 2 usage or environment error.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { Host } from '../../lib/host.js';
import type { HarvesterConfig } from '../../config/types.js';
import {
  decideInstallGate,
  formatPreflightReport,
  gatherMachineFacts,
  probeNtpServers,
  PROFILES,
  resolveConfigAliases,
  runPreflightChecks,
  type ImageBootFacts,
  type Profile,
} from '../preflight/index.js';
import { parseCommandArgs } from './args.js';
import type { OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall preflight [--config FILE|URL|-] [--source DIR|SQUASHFS] [--profile testing|production] [--sysroot DIR] [--json]

Gathers this machine's hardware facts and checks them against Harvester's requirements.
  --config F     check the install device, data disk and management NICs the config names,
                 and ask its NTP servers for the time (UDP, 5 s each; not with --sysroot)
  --source S     the OS image to install (default: the live medium's rootfs.squashfs when booted from
                 one): with Secure Boot on, says whether the installed disk's boot chain will be refused
  --profile P    thresholds: testing (8 CPUs, 32GiB, 1Gbps; the default) or production (16, 64GiB, 10Gbps)
  --sysroot DIR  read /proc, /sys, /dev and /run under DIR (captured trees; labels from DIR/run/udev/data)
  --json         print the machine facts (the MachineFacts that 'hvinstall plan --facts' reads)
                 with the report (checks, summary, suggestedDevice, gate) alongside, as JSON
Exit codes: 0 no failures, 1 a check failed, 2 usage or environment error.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  config: { type: 'string' },
  source: { type: 'string' },
  profile: { type: 'string', default: 'testing', choices: ['testing', 'production'] },
  sysroot: { type: 'string', default: '/' },
  json: { type: 'boolean', default: false },
} as const satisfies OptionDefs;

function usageError(message: string): HvError {
  return new HvError(message, { hint: "run 'hvinstall preflight --help'", exitCode: ExitCode.usage });
}

async function readConfig(source: string): Promise<HarvesterConfig> {
  const { loadConfig } = await import('../../config/index.js');
  const loaded = await loadConfig(source);
  if (!loaded.valid) {
    // Hardware checks still make sense on an invalid config; the config's own errors are `validate`'s job.
    process.stderr.write(
      `hvinstall preflight: ${loaded.source} has ${loaded.errors.length} validation error(s); run 'hvinstall validate ${source}' (checking the hardware anyway)\n`,
    );
  }
  return loaded.config;
}

/** The live medium's OS image (the live installer mounts its boot medium there). */
const LIVE_ROOTFS = '/run/initramfs/live/rootfs.squashfs';

async function imageFacts(source: string | undefined, sysroot: string): Promise<ImageBootFacts | undefined> {
  const chosen = source ?? (sysroot === '/' && (await stat(LIVE_ROOTFS).catch(() => undefined)) ? LIVE_ROOTFS : undefined);
  if (!chosen) return undefined;
  if (!(await stat(chosen).catch(() => undefined))) {
    throw new HvError(`--source ${chosen} does not exist`, { where: '--source', hint: 'pass the OS image to install: a directory tree or a squashfs', exitCode: ExitCode.usage });
  }
  const { imageShim } = await import('../bootloader/image-shim.js');
  return { source: chosen, shim: await imageShim(chosen) };
}

export default async function preflight(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE, false, "run 'hvinstall preflight --help'");
  if (!args) return ExitCode.ok;
  const { values } = args;
  const profile = values.profile as Profile;
  if (!PROFILES.includes(profile)) throw usageError(`unknown profile '${values.profile}': use testing or production`);
  const sysroot = path.resolve(values.sysroot!);
  const st = await stat(sysroot).catch(() => undefined);
  if (!st?.isDirectory()) {
    throw new HvError(`sysroot is not a directory: ${sysroot}`, { where: '--sysroot', hint: 'pass a captured tree with proc/, sys/ and dev/, or omit --sysroot', exitCode: ExitCode.usage });
  }

  if (sysroot === '/' && process.getuid?.() !== 0) {
    process.stderr.write('hvinstall preflight: not running as root: disk labels (blkid) and installed memory (DMI) are not readable; run as root for a complete report\n');
  }
  const host = new Host(sysroot);
  const config = values.config !== undefined ? await readConfig(values.config) : undefined;
  const facts = await gatherMachineFacts(host);
  const aliases = await resolveConfigAliases(facts, config, host);
  // The NTP servers are asked from this machine, so not for a captured sysroot.
  const servers = sysroot === '/' ? (config?.os?.ntpServers ?? []) : [];
  const ntp = servers.length ? await probeNtpServers(servers) : undefined;
  const image = await imageFacts(values.source, sysroot);
  const report = runPreflightChecks(facts, { config, profile, aliases, ntp, image });
  const gate = config
    ? decideInstallGate(report, { mode: config.install?.automatic === true ? 'automatic' : 'interactive', skipchecks: config.install?.skipchecks === true })
    : undefined;

  if (values.json) {
    // One object that is both: a MachineFacts (so `preflight --json > facts.json` feeds
    // `hvinstall plan --facts`) and the report; the two share no key but sysroot (same value).
    const gateJson = gate && { proceed: gate.proceed, needsAcknowledgement: gate.needsAcknowledgement, message: gate.message, override: gate.override };
    process.stdout.write(JSON.stringify({ ...facts, ...report, gate: gateJson, ...(ntp ? { ntp } : {}) }, null, 2) + '\n');
  } else {
    let text = formatPreflightReport(report);
    if (gate) text += `Install (${config?.install?.automatic ? 'automatic' : 'interactive'}): ${gate.message}\n${gate.override ? `  to go on: ${gate.override}\n` : ''}`;
    process.stdout.write(text);
  }
  return report.summary.fail > 0 ? ExitCode.checkFailed : ExitCode.ok;
}
