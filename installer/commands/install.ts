/**
 * `hvinstall install --config F [--device D] [--source S] [--bundle DIR|none] [--yes]
 *  [--progress tty|plain|json] [--preserve-on-error]`: installs onto a disk through the journaled step pipeline.
 */
import path from 'node:path';
import { readFile, mkdir } from 'node:fs/promises';
import { Logger } from '../../lib/logger.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { findOnPath } from '../../lib/find-on-path.js';
import { formatPlanText } from '../disk/format-plan.js';
import { EventBus, PROGRESS_MODES, progressModeOf, sinkFor } from '../steps/progress.js';
import { describeFailedInstall, failedInstallText } from '../steps/failed-install.js';
import { resolveBundleSource } from '../steps/bundle-source.js';
import { resolveAgentArg } from '../steps/agent-source.js';
import { runInstall } from '../steps/pipeline.js';
import { installInputs, prepareInstall } from '../steps/prepare.js';
import { TEST_KILL_ENV } from '../steps/test-faults.js';
import { parseSystemSize } from './plan.js';
import { parseCommandArgs } from './args.js';
import type { OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall install (--config FILE | --cmdline-file /proc/cmdline) [--device DISK] [--source DIR|SQUASHFS]
                         [--fallback-source DIR|SQUASHFS] [--bundle DIR|none] [--agent DIR|none] [--yes] [--progress tty|plain|json] [--preserve-on-error]
                         [--system-size MIB] [--state-dir DIR] [--no-reboot] [--iso-to-disk]

Installs onto DISK, destroying everything on it (and on install.data_disk and the disks to wipe).
  --config FILE         the config.yaml (path, http(s) URL or -)
  --cmdline-file F      automatic mode as Harvester's (F is usually /proc/cmdline): with
                        harvester.install.automatic=true, the config comes from harvester.install.config_url
                        merged under the harvester.* parameters, the OS from install.iso_url (downloaded,
                        checked and opened before any disk is touched) unless --source is given, and progress
                        goes to hvinstall.events_url (hvpxe) as well as the webhooks, and the image bundle
                        from the ISO's bundle/
  --device DISK         the install disk when the config does not name it (must match install.device when it does)
  --source S            the OS: a directory tree or a squashfs file (default: the live root /run/rootfsbase)
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
} as const satisfies OptionDefs;

export default async function install(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!args) return ExitCode.ok;
  const { values } = args;
  if (!values.config && !values['cmdline-file']) throw new HvError('--config or --cmdline-file is required', { hint: USAGE, exitCode: ExitCode.usage });
  const mode = progressModeOf(values.progress, process.stdout.isTTY === true);
  // A wrong --bundle is refused before anything is downloaded or any disk is touched.
  const givenBundle = values.bundle === undefined ? undefined : await resolveBundleSource(values.bundle);
  const givenAgent = await resolveAgentArg(values.agent);
  if (process.getuid?.() !== 0) throw new HvError('hvinstall install must run as root (it partitions and formats disks)', { exitCode: ExitCode.usage });

  const automaticMode = !!values['cmdline-file'] && !values.config;
  if (values['fallback-source'] !== undefined && !automaticMode) {
    throw new HvError('--fallback-source is for automatic mode (--cmdline-file without --config); use --source', { hint: USAGE, exitCode: ExitCode.usage });
  }
  if (values['iso-to-disk'] && !automaticMode) throw new HvError('--iso-to-disk is for automatic mode (--cmdline-file), where install.iso_url is downloaded', { hint: USAGE, exitCode: ExitCode.usage });
  const auto = automaticMode ? await prepareAutomatic(values['cmdline-file']!, values.source, values.device, values['fallback-source'], values['iso-to-disk'] === true) : undefined;
  const bundle = givenBundle ?? auto?.streamedBundle ?? (await resolveBundleSource(undefined, { isoBundle: auto?.isoBundle }));
  const prepared = await prepareInstall({
    configPath: values.config ?? auto!.configSource,
    loaded: auto?.loaded,
    device: values.device,
    source: values.source ?? auto?.source,
    isoRelease: auto?.isoRelease,
    requireSource: true,
    systemSizeMiB: parseSystemSize(values['system-size']),
    agent: givenAgent,
  });
  const { plan, config } = prepared;
  const say = (s: string): void => void (mode === 'json' ? process.stderr : process.stdout).write(s);
  for (const w of prepared.warnings) process.stderr.write(`warning: ${w}\n`);

  // Consent to destroy comes from this run's arguments: --yes, or automatic mode from the kernel
  // command line. A config file's install.automatic is content, not consent (it may come from anywhere).
  const automatic = automaticMode;
  if (!values.yes && !automatic) {
    process.stderr.write(
      `hvinstall: refusing to install without --yes. This would destroy everything on:\n${plan.destroys.map((d) => `  - ${d}`).join('\n')}\n\n` +
        `The plan (hvinstall plan shows it too):\n${formatPlanText(plan)}\nRun again with --yes to go ahead.\n`,
    );
    return ExitCode.usage;
  }

  // github:/gitlab:/URL SSH keys are fetched once, now, before any disk is touched, and installed as
  // keys (installer/remote/ssh-keys.ts says what happens when a source cannot be reached).
  const { resolveSshKeys } = await import('../remote/ssh-keys.js');
  const sshKeys = await resolveSshKeys(config, { caFile: auto?.caFile });
  for (const w of sshKeys.warnings) process.stderr.write(`warning: ${w}\n`);
  if (sshKeys.errors.length > 0) {
    throw new HvError(`refusing to install: ${sshKeys.errors.join('; ')}`, {
      where: 'os.ssh_authorized_keys',
      hint: 'fix the key source, add a key written out, or set os.password',
      exitCode: ExitCode.checkFailed,
    });
  }
  const installConfig = sshKeys.config;

  const bus = new EventBus([sinkFor(mode, mode === 'tty' ? process.stderr : process.stdout)], prepared.redactor);
  if (auto?.eventsSink) bus.addSink(auto.eventsSink);
  const stateDir = values['state-dir'] ?? '/var/lib/hvinstall';
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => controller.abort(new HvError(`interrupted by ${sig}`, { exitCode: ExitCode.installFailed }));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const outcome = await runInstall({
    ...installInputs(prepared),
    config: installConfig,
    bundle,
    stateDir,
    bus,
    preserveOnError: values['preserve-on-error'] === true,
    signal: controller.signal,
    killPoint: process.env[TEST_KILL_ENV] || undefined,
  });
  bus.close();
  await auto?.close();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);

  if (!outcome.ok) {
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

  say(`installed ${plan.device}${outcome.resumed ? ' (resumed)' : ''}; journal ${outcome.journalFile}, log on COS_OEM at /oem/install/install.log\n`);
  if (automatic && !values['no-reboot']) {
    const action = config.install?.powerOff ? 'poweroff' : 'reboot';
    say(`automatic install: ${action} in 5 seconds\n`);
    await new Promise((r) => setTimeout(r, 5000));
    await run(action, ['-f']);
  }
  return ExitCode.ok;
}

/**
 * Whether the ISO at `url` goes to RAM (undefined: the caller downloads it as before) or is streamed
 * to COS_PERSISTENT; in the latter case what the plan needs is fetched now, by byte range, into RAM.
 */
async function streamIfTooBig(url: string, workDir: string, forced: boolean, caFile: string | undefined, log: Logger): Promise<{ parts: import('../remote/iso-stream.js').IsoParts; sha256?: string; why: string } | undefined> {
  const { probeIso, fetchIsoParts } = await import('../remote/iso-stream.js');
  const { decideIsoPlacement, parseMemAvailable, partsProblem } = await import('../remote/iso-placement.js');
  const { fetchPublishedSha256 } = await import('../remote/install-media.js');
  const probe = await probeIso(url, { log, caFile });
  const mem = parseMemAvailable(await readFile('/proc/meminfo', 'utf8').catch(() => ''));
  const placement = decideIsoPlacement({ isoBytes: probe.bytes, memAvailableBytes: mem, acceptsRanges: probe.acceptsRanges, forced });
  log.info('where the install ISO goes', { url, where: placement.where, why: placement.why, isoBytes: probe.bytes, memAvailableBytes: mem });
  if (placement.where === 'ram') return undefined;
  // The streamed path reads the ISO's directory with xorriso: say so now, before any byte is fetched.
  if (!(await findOnPath('xorriso'))) {
    throw new HvError(`the install ISO must be streamed to disk (${placement.why}), which needs xorriso, and this live system has none`, {
      where: 'install.iso_url',
      hint: 'give the machine enough RAM for the ISO, boot a live image built with xorriso (make iso installs it), or pass --source with the OS image on local storage',
      exitCode: ExitCode.checkFailed,
    });
  }
  const sha256 = await fetchPublishedSha256(url, { caFile }).catch((err: Error) => {
    log.warn('could not fetch the published sha256 of the ISO', { url: `${url}.sha256`, error: err.message });
    return undefined;
  });
  if (!sha256) log.warn('no sha256 for the ISO: it will not be verified', { url, hint: 'publish <iso_url>.sha256' });
  await mkdir(workDir, { recursive: true });
  const parts = await fetchIsoParts(url, workDir, probe, {
    log,
    caFile,
    beforeParts: (size) => {
      const problem = partsProblem(size, forced ? undefined : mem);
      if (problem) throw new HvError(`the install ISO cannot be used on this machine: ${problem}`, { where: 'install.iso_url', hint: 'give the machine more RAM, or pass --source with the OS image on local storage', exitCode: ExitCode.checkFailed });
    },
  });
  log.info('install ISO parts fetched before touching the disk', { url, squashfs: parts.squashfs, squashfsSha256: parts.squashfsSha256, release: parts.release ?? null, files: parts.files.size });
  return { parts, sha256, why: placement.why };
}

interface AutomaticSetup {
  configSource: string;
  /** hvinstall.ca_file from the command line, for every https fetch of the install. */
  caFile?: string;
  loaded: { config: import('../../config/types.js').HarvesterConfig; warnings: string[] };
  source?: string;
  /** The opened ISO's bundle/ (it may not exist: resolveBundleSource checks). */
  isoBundle?: string;
  /** The opened ISO's harvester-release.yaml (it may not exist). */
  isoRelease?: string;
  /** The ISO did not fit in RAM: its bundle is streamed to COS_PERSISTENT by the persistent step. */
  streamedBundle?: import('../steps/bundle-source.js').BundleSource;
  eventsSink?: import('../steps/progress.js').Sink;
  close(): Promise<void>;
}

/**
 * Automatic mode (Harvester's harvester.install.automatic=true): the config from the command line
 * and its config_url, the OS from the ISO at install.iso_url. Everything that can fail over the
 * network fails here, before the pipeline touches a disk.
 */
async function prepareAutomatic(cmdlineFile: string, source: string | undefined, device: string | undefined, fallbackSource: string | undefined, isoToDisk: boolean): Promise<AutomaticSetup> {
  const { prepareAutomaticInstall, isAutomaticCmdline, automaticOsSource } = await import('../remote/automatic.js');
  let text: string;
  try {
    text = await readFile(cmdlineFile, 'utf8');
  } catch (err) {
    throw new HvError(`cannot read ${cmdlineFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { exitCode: ExitCode.usage });
  }
  if (!isAutomaticCmdline(text)) {
    throw new HvError(`${cmdlineFile} does not ask for an automatic install (no harvester.install.automatic=true)`, {
      hint: 'boot with harvester.install.automatic=true harvester.install.config_url=<url>, or use --config FILE --yes',
      exitCode: ExitCode.usage,
    });
  }
  const log = new Logger();
  const auto = await prepareAutomaticInstall(text, { log });
  const fmt = (f: { path: string; message: string; source?: string }) => `${f.source ?? auto.source}: ${f.path ? `${f.path}: ` : ''}${f.message}`;
  const config = device && !auto.config.install?.device ? { ...auto.config, install: { ...auto.config.install, device } } : auto.config;
  const closers: Array<() => Promise<void>> = [() => auto.events.sink.close()];
  const from = automaticOsSource(auto.media, source, fallbackSource);
  let osSource = 'path' in from ? from.path : undefined;
  let isoBundle: string | undefined;
  let isoRelease: string | undefined;
  log.info('automatic install: where the OS comes from', { from: from.from, path: osSource, isoUrl: auto.media.kind });
  let streamedBundle: AutomaticSetup['streamedBundle'];
  const streamed = from.from === 'iso' && auto.media.kind === 'url' ? await streamIfTooBig(auto.media.url, '/run/hvinstall/media', isoToDisk, auto.caFile, log) : undefined;
  if (streamed) {
    osSource = streamed.parts.squashfs;
    isoRelease = streamed.parts.release;
    // An ISO without /bundle leaves the bundle to --bundle or the live medium, as the RAM download does.
    if (streamed.parts.bundle.length > 0) streamedBundle = { kind: 'iso-stream', parts: streamed.parts, sha256: streamed.sha256, origin: `${streamed.parts.url} (streamed to COS_PERSISTENT: ${streamed.why})` };
  } else if (from.from === 'iso') {
    const { fetchInstallIso } = await import('../remote/install-media.js');
    const { openIsoMedia } = await import('../remote/media.js');
    const workDir = '/run/hvinstall/media';
    await mkdir(workDir, { recursive: true });
    const iso = await fetchInstallIso(auto.media, workDir, { log, caFile: auto.caFile });
    const media = await openIsoMedia(iso.path, workDir, { log });
    closers.unshift(() => media.close());
    if (!media.found.includes('/rootfs.squashfs')) {
      await media.close();
      throw new HvError(`the ISO ${iso.source} has no /rootfs.squashfs`, { where: 'install.iso_url', hint: 'point iso_url at a Harvester (or hvinstall) ISO', exitCode: ExitCode.checkFailed });
    }
    osSource = path.join(media.root, 'rootfs.squashfs');
    isoBundle = path.join(media.root, 'bundle');
    isoRelease = path.join(media.root, 'harvester-release.yaml');
  }
  return {
    configSource: auto.source,
    caFile: auto.caFile,
    loaded: { config, warnings: auto.loaded.warnings.map(fmt) },
    source: osSource,
    isoBundle,
    isoRelease,
    streamedBundle,
    eventsSink: auto.events.url ? auto.events.sink : undefined,
    close: async () => {
      for (const c of closers) await c().catch(() => undefined);
    },
  };
}
