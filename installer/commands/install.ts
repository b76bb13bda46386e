/**
 * `hvinstall install --config F [--device D] [--source S] [--bundle DIR|none] [--yes]
 *  [--progress tty|plain|json] [--preserve-on-error]`: installs onto a disk through the journaled step pipeline.
 */
import type { NodeReportGrant } from '../../config/hvpxe-protocol.js';
import { readFile } from 'node:fs/promises';
import { Logger } from '../../lib/logger.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run as runCommand } from '../../lib/exec.js';
import { formatPlanText } from '../disk/format-plan.js';
import { EventBus, PROGRESS_MODES, progressModeOf, sinkFor } from '../steps/progress.js';
import { describeFailedInstall, failedInstallText } from '../steps/failed-install.js';
import { resolveBundleSource } from '../steps/bundle-source.js';
import { resolveAgentArg } from '../steps/agent-source.js';
import { runInstall } from '../steps/pipeline.js';
import { installInputs, prepareInstall, type Prepared } from '../steps/prepare.js';
import type { AgentSource } from '../steps/agent-source.js';
import type { BundleSource } from '../steps/bundle-source.js';
import type { HarvesterConfig } from '../../config/types.js';
import { TEST_KILL_ENV } from '../steps/test-faults.js';
import { parseSystemSize } from './plan.js';
import { parseCommandArgs } from './args.js';
import { emitGate, installTargetOf, judgeTarget, readFactsFile } from './install-gate.js';
import { nodeFactsFor } from '../preflight/index.js';
import type { OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall install (--config FILE | --cmdline-file /proc/cmdline) [--device DISK] [--source DIR|SQUASHFS]
                         [--fallback-source DIR|SQUASHFS] [--bundle DIR|none] [--agent DIR|none] [--yes] [--progress tty|plain|json] [--preserve-on-error]
                         [--system-size MIB] [--state-dir DIR] [--no-reboot] [--iso-to-disk] [--facts FILE] [--legacy-bios]

Installs onto DISK, destroying everything on it (and on install.data_disk and the disks to wipe).
  --config FILE         the config.yaml (path, http(s) URL or -)
  --cmdline-file F      automatic mode as Harvester's (F is usually /proc/cmdline): with
                        harvester.install.automatic=true, the config comes from harvester.install.config_url
                        (an http(s) URL, or volume:LABEL; without it, a volume labelled HARVESTER_CONFIG,
                        cidata or config-2 when one is attached: docs/install.md "The config volume")
                        merged under the harvester.* parameters, the OS from install.iso_url (downloaded,
                        checked and opened before any disk is touched) unless --source is given, and progress
                        goes to hvinstall.events_url (hvpxe) as well as the webhooks, and the image bundle
                        from the ISO's bundle/
  --device DISK         the install disk when the config does not name it (must match install.device when it does);
                        a loop device here means a disk built for another machine (see --facts)
  --facts FILE          with --device onto a loop device: the facts of the machine the disk is for
                        ('hvinstall preflight --json' there); it is checked against Harvester's requirements
                        and the node's files are rendered for it. Without it the install says no machine was checked
  --legacy-bios         install onto a legacy-BIOS machine (Harvester v1.7 did; v1.8 refuses it, and nothing in
                        a config can ask for it); in automatic mode hvinstall.legacy_bios=true on the kernel command line
  --source S            the OS: a directory tree or a squashfs file (default: the live root /run/rootfsbase);
                        in automatic mode also the http(s) URL of a root filesystem image (PXE's root=live:),
                        downloaded and checked against its published .sha256 before use
  --fallback-source S   automatic mode: the OS when install.iso_url is local or absent (an http(s) iso_url
                        still wins); the live installer passes the image it carries
  --bundle DIR|none     the container image bundle (metadata.yaml, image archives) to copy to COS_PERSISTENT,
                        where the node's image preload finds it as /var/lib/rancher/hvagent/bundle
                        (default: the automatic-mode ISO's bundle/, else the live ISO's
                        /run/initramfs/live/bundle when it exists, else none); none: install without one
  --agent DIR|none      the self-contained hvagent payload to put on COS_PERSISTENT (/usr/local/lib/hvagent)
                        and enable as hvagent.service (default: the payload the installer carries,
                        build/hvagent-payload; refused when the image has no place for it, see docs/install.md);
                        none: install without the agent
  --yes                 confirm the destruction (not needed in automatic mode, --cmdline-file: there the
                        kernel command line's harvester.install.automatic=true is the consent; a config
                        file's install.automatic never is)
  --progress MODE       tty: one updating line; plain: a line every few seconds; json: JSON lines on stdout
                        (default: tty on a terminal, plain otherwise)
  --preserve-on-error   on failure, leave the disk as it is instead of invalidating it
  --system-size MIB     active.img size (default: 3072, or the source plus headroom when larger)
  --state-dir DIR       where the journal and install log are kept (default /var/lib/hvinstall)
  --no-reboot           do not reboot/power off after a successful automatic install
  --iso-to-disk         automatic mode: stream install.iso_url to COS_PERSISTENT instead of holding it in RAM
                        (the default when it would not fit in the free RAM and the server serves byte ranges)
Every install of the machine it runs on (automatic mode; --config without --device) first passes
Harvester's hardware gate: legacy BIOS stops it (unless --legacy-bios), the other failed checks unless install.skipchecks.
Re-running after a crash, kill or power cut resumes the same install from its journal.
Exit codes: 0 installed, 1 refused (disk busy, config invalid, layout does not fit), 2 usage, 3 the install failed.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  config: { type: 'string' },
  'cmdline-file': { type: 'string' },
  device: { type: 'string' },
  source: { type: 'string' },
  'fallback-source': { type: 'string' },
  bundle: { type: 'string' },
  agent: { type: 'string' },
  yes: { type: 'boolean', short: 'y' },
  progress: { type: 'string', choices: PROGRESS_MODES },
  'preserve-on-error': { type: 'boolean' },
  'system-size': { type: 'string' },
  'state-dir': { type: 'string' },
  'no-reboot': { type: 'boolean' },
  'iso-to-disk': { type: 'boolean' },
  facts: { type: 'string' },
  'legacy-bios': { type: 'boolean' },
} as const satisfies OptionDefs;

type Values = NonNullable<ReturnType<typeof parseCommandArgs<typeof OPTIONS>>>['values'];

export default async function install(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!args) return ExitCode.ok;
  const run = await checkArgs(args.values);
  const auto = run.automatic ? await prepareAutomatic(run.values) : undefined;
  const bundle = run.givenBundle ?? auto?.streamedBundle ?? (await resolveBundleSource(undefined, { isoBundle: auto?.isoBundle }));
  const { values } = run;
  const target = auto ? undefined : await installTargetOf(values.device, await readFactsFile(values.facts), values['legacy-bios'] === true);
  const prepared = await prepareInstall({
    configPath: values.config ?? auto!.configSource,
    loaded: auto?.loaded,
    device: values.device,
    source: auto?.source ?? values.source,
    isoRelease: auto?.isoRelease,
    requireSource: true,
    systemSizeMiB: parseSystemSize(values['system-size']),
    agent: run.givenAgent,
    nodeFacts: target?.kind === 'other-machine' ? nodeFactsFor(target) : undefined,
  });
  for (const w of prepared.warnings) process.stderr.write(`warning: ${w}\n`);
  // An install of this machine from --config is gated here; automatic mode was gated before its media.
  const verdict = auto?.gate ?? (await judgeTarget(target!, prepared.config, prepared.facts, 'unattended'));
  if (!run.automatic && !values.yes) return refuseWithoutYes(prepared);
  const config = await withResolvedKeys(prepared.config, auto?.caFile);
  const bus = new EventBus([sinkFor(run.mode, run.mode === 'tty' ? process.stderr : process.stdout)], prepared.redactor);
  emitGate(bus, verdict);
  if (auto?.eventsSink) bus.addSink(auto.eventsSink);
  const outcome = await runPipeline(prepared, config, bundle, bus, values, auto?.nodeReport);
  bus.close();
  await auto?.close();
  if (!outcome.ok) return reportFailure(outcome, prepared);
  const say = (s: string): void => void (run.mode === 'json' ? process.stderr : process.stdout).write(s);
  say(`installed ${prepared.plan.device}${outcome.resumed ? ' (resumed)' : ''}; journal ${outcome.journalFile}, log on COS_OEM at /oem/install/install.log\n`);
  if (run.automatic && !values['no-reboot']) {
    const action = config.install?.powerOff ? 'poweroff' : 'reboot';
    say(`automatic install: ${action} in 5 seconds\n`);
    await new Promise((r) => setTimeout(r, 5000));
    await runCommand(action, ['-f']);
  }
  return ExitCode.ok;
}

interface InstallRun {
  values: Values;
  mode: ReturnType<typeof progressModeOf>;
  /** --cmdline-file without --config: Harvester's automatic mode (the kernel command line is the consent). */
  automatic: boolean;
  givenBundle?: BundleSource;
  givenAgent: AgentSource;
}

/** Everything about the arguments that can be refused before anything is downloaded or any disk touched. */
async function checkArgs(values: Values): Promise<InstallRun> {
  const usage = (message: string): HvError => new HvError(message, { hint: USAGE, exitCode: ExitCode.usage });
  if (!values.config && !values['cmdline-file']) throw usage('--config or --cmdline-file is required');
  const mode = progressModeOf(values.progress, process.stdout.isTTY === true);
  // A wrong --bundle is refused before anything is downloaded or any disk is touched.
  const givenBundle = values.bundle === undefined ? undefined : await resolveBundleSource(values.bundle);
  const givenAgent = await resolveAgentArg(values.agent);
  if (process.getuid?.() !== 0) throw new HvError('hvinstall install must run as root (it partitions and formats disks)', { exitCode: ExitCode.usage });
  const automatic = !!values['cmdline-file'] && !values.config;
  if (values['fallback-source'] !== undefined && !automatic) throw usage('--fallback-source is for automatic mode (--cmdline-file without --config); use --source');
  if (values['iso-to-disk'] && !automatic) throw usage('--iso-to-disk is for automatic mode (--cmdline-file), where install.iso_url is downloaded');
  if (/^https?:\/\//i.test(values.source ?? '') && !automatic) throw usage('--source URL is for automatic mode (--cmdline-file), where it is downloaded and verified; give a local path');
  if (values.facts !== undefined && (automatic || !values.device)) {
    throw usage('--facts is for a disk built here for another machine (--device onto a loop device); an install of this machine is checked against this machine');
  }
  return { values, mode, automatic, givenBundle, givenAgent };
}

/** Without --yes (and outside automatic mode) the plan is shown and nothing is done. */
function refuseWithoutYes(prepared: Prepared): number {
  const { plan } = prepared;
  process.stderr.write(
    `hvinstall: refusing to install without --yes. This would destroy everything on:\n${plan.destroys.map((d) => `  - ${d}`).join('\n')}\n\n` +
      `The plan (hvinstall plan shows it too):\n${formatPlanText(plan)}\nRun again with --yes to go ahead.\n`,
  );
  return ExitCode.usage;
}

/**
 * github:/gitlab:/URL SSH keys are fetched once, now, before any disk is touched, and installed as
 * keys (installer/remote/ssh-keys.ts says what happens when a source cannot be reached).
 */
async function withResolvedKeys(config: HarvesterConfig, caFile: string | undefined): Promise<HarvesterConfig> {
  const { resolveSshKeys } = await import('../remote/ssh-keys.js');
  const sshKeys = await resolveSshKeys(config, { caFile });
  for (const w of sshKeys.warnings) process.stderr.write(`warning: ${w}\n`);
  if (sshKeys.errors.length > 0) {
    throw new HvError(`refusing to install: ${sshKeys.errors.join('; ')}`, {
      where: 'os.ssh_authorized_keys',
      hint: 'fix the key source, add a key written out, or set os.password',
      exitCode: ExitCode.checkFailed,
    });
  }
  return sshKeys.config;
}

async function runPipeline(prepared: Prepared, config: HarvesterConfig, bundle: BundleSource, bus: EventBus, values: Values, nodeReport?: NodeReportGrant): ReturnType<typeof runInstall> {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => controller.abort(new HvError(`interrupted by ${sig}`, { exitCode: ExitCode.installFailed }));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await runInstall({
      ...installInputs(prepared),
      config,
      bundle,
      stateDir: values['state-dir'] ?? '/var/lib/hvinstall',
      bus,
      preserveOnError: values['preserve-on-error'] === true,
      ...(nodeReport ? { nodeReport } : {}),
      signal: controller.signal,
      killPoint: process.env[TEST_KILL_ENV] || undefined,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function reportFailure(outcome: Awaited<ReturnType<typeof runInstall>>, prepared: Prepared): number {
  const report = describeFailedInstall(outcome, prepared.redactor);
  process.stderr.write(failedInstallText(report, 'hvinstall'));
  if (!report.refused) {
    process.stderr.write(
      outcome.journal?.status === 'invalidated'
        ? `  the disk was invalidated so it cannot boot half-installed; fix the cause and run the same command again to resume\n`
        : `  fix the cause and run the same command again to resume\n`,
    );
  }
  const code = (outcome.error as { exitCode?: number } | undefined)?.exitCode;
  return outcome.failedStep === 'guard' && code === ExitCode.checkFailed ? ExitCode.checkFailed : ExitCode.installFailed;
}

interface AutomaticSetup {
  configSource: string;
  /** hvinstall.ca_file from the command line, for every https fetch of the install. */
  caFile?: string;
  loaded: { config: HarvesterConfig; warnings: string[] };
  gate: import('../preflight/index.js').GateVerdict;
  source?: string;
  isoBundle?: string;
  isoRelease?: string;
  streamedBundle?: BundleSource;
  eventsSink?: import('../steps/progress.js').Sink;
  /** hvpxe's node-report grant, for the installed node's post-install reports. */
  nodeReport?: NodeReportGrant;
  close(): Promise<void>;
}

/**
 * Automatic mode (Harvester's harvester.install.automatic=true): the config from the command line
 * and its config_url, Harvester's hardware gate on this machine, then the OS medium, verified
 * (installer/remote/automatic-media.ts). Everything that can fail over the network fails here,
 * before the pipeline touches a disk.
 */
async function prepareAutomatic(values: Values): Promise<AutomaticSetup> {
  const cmdlineFile = values['cmdline-file']!;
  const { prepareAutomaticInstall, gateAutomaticInstall, isAutomaticCmdline } = await import('../remote/automatic.js');
  const { openAutomaticMedia } = await import('../remote/automatic-media.js');
  const { mediaTrustFromCmdline } = await import('../../config/cmdline.js');
  const text = await readFile(cmdlineFile, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new HvError(`cannot read ${cmdlineFile}: ${err.code ?? err.message}`, { exitCode: ExitCode.usage });
  });
  if (!isAutomaticCmdline(text)) {
    throw new HvError(`${cmdlineFile} does not ask for an automatic install (no harvester.install.automatic=true)`, {
      hint: 'boot with harvester.install.automatic=true harvester.install.config_url=<url>, or use --config FILE --yes',
      exitCode: ExitCode.usage,
    });
  }
  const log = new Logger();
  const auto = await prepareAutomaticInstall(text, { log });
  const gate = await gateAutomaticInstall(auto, { log });
  const { requestReportToken } = await import('../remote/node-report.js');
  const nodeReport = await requestReportToken(auto.events.url, log);
  const fmt = (f: { path: string; message: string; source?: string }) => `${f.source ?? auto.source}: ${f.path ? `${f.path}: ` : ''}${f.message}`;
  const named = auto.config.install?.device || auto.config.install?.deviceSelector;
  const config = values.device && !named ? { ...auto.config, install: { ...auto.config.install, device: values.device } } : auto.config;
  const media = await openAutomaticMedia(auto, { given: values.source, fallback: values['fallback-source'], isoToDisk: values['iso-to-disk'] === true, trust: mediaTrustFromCmdline(text), log });
  log.info('automatic install: the OS medium', { source: media.source, verified: media.verified });
  return {
    configSource: auto.source,
    caFile: auto.caFile,
    loaded: { config, warnings: auto.loaded.warnings.map(fmt) },
    gate,
    source: media.source,
    isoBundle: media.isoBundle,
    isoRelease: media.isoRelease,
    streamedBundle: media.streamedBundle,
    eventsSink: auto.events.url ? auto.events.sink : undefined,
    ...(nodeReport ? { nodeReport } : {}),
    close: async () => {
      await media.close().catch(() => undefined);
      await auto.events.sink.close().catch(() => undefined);
    },
  };
}
