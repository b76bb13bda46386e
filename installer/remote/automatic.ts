/**
 * Automatic (PXE) install from the kernel command line (harvester/docs install/pxe-boot-install.md): `harvester.install.automatic=true`
 * plus `harvester.install.config_url=…` and any `harvester.*` keys. The remote config is fetched
 * with Harvester's patience (30 attempts 10 s apart, 15 s per attempt; configurable), merged under
 * the command line, and validated with the one validator; without PXE or a web server the file comes
 * from a config volume instead (config_url=volume:LABEL, or none: config-volume.ts). The result carries the webhooks to call
 * (STARTED/SUCCEEDED/FAILED) and where the install media come from.
 */
import { HvError, ExitCode } from '../../lib/errors.js';
import { Logger } from '../../lib/logger.js';
import { cmdlineConfig, configSecrets, loadConfig, type LoadedConfig } from '../../config/index.js';
import { CONFIG_VOLUME_LABEL } from '../../config/config-volume.js';
import { volumeSearchOf } from './config-volume-plan.js';
import { caFileFromCmdline, legacyBiosFromCmdline } from '../../config/cmdline.js';
import type { HarvesterConfig } from '../../config/types.js';
import { Host } from '../../lib/host.js';
import { gatherMachineFacts, gateEvent, gateRefusal, judgeInstall, resolveConfigAliases, type GateVerdict, type MachineFacts } from '../preflight/index.js';
import { sendWebhooks, type WebhookVars } from './webhooks.js';
import { HvpxeEventsSink, postProgressEvent } from './events-sink.js';
import { attestBootCredential, attestUrlFromCmdline, type TpmAttestOptions } from './tpm-attest.js';

export { postProgressEvent };

export interface ConfigFetchOptions {
  /** Total attempts; Harvester: 30. */
  attempts?: number;
  /** Delay between attempts; Harvester: 10 s. */
  retryDelayMs?: number;
  /** Per attempt; Harvester: 15 s. */
  timeoutMs?: number;
  caFile?: string;
  /** Pin the config's sha256. */
  sha256?: string;
}

export const HARVESTER_CONFIG_FETCH: Required<Pick<ConfigFetchOptions, 'attempts' | 'retryDelayMs' | 'timeoutMs'>> = {
  attempts: 30,
  retryDelayMs: 10_000,
  timeoutMs: 15_000,
};

export type MediaSource = { kind: 'url'; url: string } | { kind: 'local' } | { kind: 'none' };

export interface AutomaticInstall {
  config: HarvesterConfig;
  /** The CA bundle for https fetches: the options', else the command line's hvinstall.ca_file. */
  caFile?: string;
  /** What was read: the config_url (a boot credential in it redacted), or `<cmdline>` when the command line carried everything. */
  source: string;
  loaded: LoadedConfig;
  /** The command line the install was started with (its hvinstall.* parameters say what this run consents to). */
  cmdline: string;
  media: MediaSource;
  webhooks: {
    send(event: 'STARTED' | 'SUCCEEDED' | 'FAILED', vars?: WebhookVars): Promise<void>;
  };
  /** Our progress events, posted to `hvinstall.events_url` (hvpxe /events/<machine>) when the command line has one. */
  events: {
    url?: string;
    post(event: Record<string, unknown>): Promise<void>;
    /** A progress-bus sink (EventBus.addSink) forwarding install events in the background. */
    sink: HvpxeEventsSink;
  };
}

/** `hvinstall.events_url=…` from the command line (hvpxe adds it), if it is an http(s) URL. Pure. */
export function eventsUrlFromCmdline(cmdlineText: string): string | undefined {
  const m = /(?:^|\s)hvinstall\.events_url=("?)(\S+?)\1(?=\s|$)/.exec(cmdlineText);
  return m && /^https?:\/\//i.test(m[2]) ? m[2] : undefined;
}

/** Where the install media come from (install.iso_url; `local` is the boot medium). Pure. */
export function mediaSource(config: HarvesterConfig): MediaSource {
  const url = config.install?.isoUrl?.trim();
  if (!url) return { kind: 'none' };
  if (url === 'local') return { kind: 'local' };
  return { kind: 'url', url };
}

/**
 * Where an automatic install takes the OS from. An explicit --source wins; then the ISO at an
 * http(s) iso_url; for `iso_url: local` (or none) the fallback the live installer passes (the image
 * it carries, when it has no ISO medium to find), else the boot medium for `local`. 'default'
 * leaves it to the install's own default (the live root). Pure.
 */
export type AutomaticOsSource = { from: 'given' | 'fallback'; path: string } | { from: 'iso' } | { from: 'default' };

export function automaticOsSource(media: MediaSource, given?: string, fallback?: string): AutomaticOsSource {
  if (given) return { from: 'given', path: given };
  if (media.kind === 'url') return { from: 'iso' };
  if (fallback) return { from: 'fallback', path: fallback };
  return media.kind === 'local' ? { from: 'iso' } : { from: 'default' };
}

/** True when the command line asks for an automatic install. Pure. */
export function isAutomaticCmdline(cmdlineText: string): boolean {
  return /(^|\s)harvester\.install\.automatic(=("?)(true|t|yes|y)\3)?(\s|$)/i.test(cmdlineText);
}

export interface AutomaticOptions {
  fetch?: ConfigFetchOptions;
  log?: Logger;
  tpm?: TpmAttestOptions;
  /** The config volume search (tests: their own loop devices, a short deadline). */
  volume?: { among?: readonly string[]; timeoutMs?: number; intervalMs?: number };
}

/**
 * The automatic install's config: a machine enrolled by its TPM proves it first, then config_url
 * merged under the command line, validated, its secrets registered with the log. The caller gates
 * the machine next (gateAutomaticInstall), before any medium is downloaded or any disk touched.
 */
export async function prepareAutomaticInstall(cmdlineText: string, opts: AutomaticOptions = {}): Promise<AutomaticInstall> {
  const log = opts.log ?? new Logger();
  if (!isAutomaticCmdline(cmdlineText)) {
    throw new HvError('not an automatic install: harvester.install.automatic=true is not on the kernel command line', {
      where: '<cmdline>',
      hint: 'boot with harvester.install.automatic=true harvester.install.config_url=<url>',
      exitCode: ExitCode.usage,
    });
  }
  const f = { ...HARVESTER_CONFIG_FETCH, ...opts.fetch };
  const caFile = f.caFile ?? caFileFromCmdline(cmdlineText);
  // A machine enrolled by its TPM proves it before hvpxe releases its config (tpm-attest.ts).
  const attestUrl = attestUrlFromCmdline(cmdlineText);
  if (attestUrl) await attestBootCredential(attestUrl, log, { caFile, ...opts.tpm });
  const loaded = await loadAutomaticConfig(cmdlineText, f, log, opts.volume);
  const config = loaded.config;
  const eventsUrl = eventsUrlFromCmdline(cmdlineText);
  // Printed and recorded as the config's name: without the boot credential its URL may carry.
  const source = log.redactor.redactString(loaded.source);
  log.info('automatic install config loaded', { source, mode: config.install?.mode, device: config.install?.device });
  const post = (event: Record<string, unknown>): Promise<void> => postProgressEvent(eventsUrl, event, log);
  return {
    config,
    caFile,
    source,
    loaded,
    cmdline: cmdlineText,
    media: mediaSource(config),
    webhooks: { send: (event, vars) => sendWebhooks(event, config, { vars, log }) },
    events: { url: eventsUrl, post, sink: new HvpxeEventsSink(eventsUrl, log) },
  };
}

type FetchSettings = ConfigFetchOptions & typeof HARVESTER_CONFIG_FETCH;

/**
 * The file under the command line: config_url fetched, or the config volume read (volume:LABEL, or
 * discovery without a config_url: none found leaves the command line alone, as Harvester has it).
 */
async function readAutomaticConfig(cmdlineText: string, f: FetchSettings, log: Logger, volumeOpts: AutomaticOptions['volume'] = {}): Promise<LoadedConfig> {
  const load = (file?: string, sourceName?: string): Promise<LoadedConfig> =>
    loadConfig(file, { cmdline: cmdlineText, attempts: f.attempts, retryDelayMs: f.retryDelayMs, timeoutMs: f.timeoutMs, caFile: f.caFile, sha256: f.sha256, sourceName });
  const { config } = await cmdlineConfig(cmdlineText);
  const search = volumeSearchOf(config.install?.configUrl, cmdlineText);
  if (search.mode === 'none') return load();
  if (search.mode === 'invalid') throw new HvError(search.message, { where: '<cmdline>: harvester.install.config_url', hint: `e.g. harvester.install.config_url=volume:${CONFIG_VOLUME_LABEL}`, exitCode: ExitCode.usage });
  const { findConfigVolume, requireConfigVolume, withConfigVolume } = await import('./config-volume.js');
  const searchOpts = { timeoutMs: volumeOpts.timeoutMs ?? search.timeoutMs, intervalMs: volumeOpts.intervalMs, among: volumeOpts.among, log };
  log.info(search.mode === 'explicit' ? 'waiting for the config volume' : 'looking for a config volume (no config_url)', { labels: search.labels, timeoutS: Math.round(searchOpts.timeoutMs / 1000) });
  const volume = search.mode === 'explicit' ? await requireConfigVolume(search.labels, searchOpts) : await findConfigVolume(search.labels, searchOpts);
  if (!volume) {
    log.info('no config volume found: the command line alone is the config', { labels: search.labels });
    return load();
  }
  return withConfigVolume(volume, (file) => load(file.path, file.name), { log });
}

/** config_url (or the config volume) merged under the command line and validated; secrets registered with the log's redactor. */
async function loadAutomaticConfig(cmdlineText: string, f: FetchSettings, log: Logger, volumeOpts?: AutomaticOptions['volume']): Promise<LoadedConfig> {
  let loaded: LoadedConfig;
  try {
    loaded = await readAutomaticConfig(cmdlineText, f, log, volumeOpts);
  } catch (err) {
    if (err instanceof HvError) {
      // The config URL may carry hvpxe's boot credential: redacted (lib/redact.ts) before it is printed.
      throw new HvError(`automatic install: ${log.redactor.redactString(err.message)}`, { where: err.where && log.redactor.redactString(err.where), hint: err.hint, exitCode: ExitCode.installFailed, cause: err });
    }
    throw err;
  }
  log.redactor.add(...configSecrets(loaded.config));
  for (const w of loaded.warnings) log.warn('config warning', { path: w.path, message: w.message, source: w.source });
  if (!loaded.valid) {
    const lines = loaded.errors.map((e) => `  - ${e.source ? `${e.source}${e.line ? `:${e.line}` : ''}: ` : ''}${e.path ? `${e.path}: ` : ''}${e.message}`);
    throw new HvError(`automatic install: invalid configuration (${loaded.source}):\n${lines.map((l) => log.redactor.redactString(l)).join('\n')}`, {
      where: loaded.source,
      hint: "check it on any machine with 'hvinstall validate <url or file>'",
      exitCode: ExitCode.checkFailed,
    });
  }
  return loaded;
}

/**
 * Harvester's gate for an automatic install of this machine (install_panels.go: any failed check
 * aborts unless install.skipchecks; legacy BIOS always, unless this run's command line consents
 * with hvinstall.legacy_bios). The verdict goes to the log and hvpxe either way; a refusal throws
 * (exit 1) before any medium is downloaded or any disk touched.
 */
export async function gateAutomaticInstall(auto: AutomaticInstall, opts: { log: Logger; facts?: MachineFacts }): Promise<GateVerdict> {
  const { config } = auto;
  const host = new Host('/');
  const facts = opts.facts ?? (await gatherMachineFacts(host));
  const aliases = await resolveConfigAliases(facts, config, host);
  const verdict = judgeInstall({ kind: 'this-machine', mode: 'automatic', facts, aliases, allowLegacyBios: legacyBiosFromCmdline(auto.cmdline) }, config);
  const event = gateEvent(verdict);
  opts.log.log(verdict.gate.proceed ? (verdict.gate.overridden.length ? 'warn' : 'info') : 'error', 'hardware gate', { decision: event.decision, checked: verdict.checked, lines: verdict.lines });
  await auto.events.post(event);
  if (!verdict.gate.proceed) {
    await auto.events.post({ type: 'install', phase: 'failed', device: config.install?.device ?? '', message: `refused by the hardware gate: ${verdict.gate.message}` });
    throw gateRefusal(verdict);
  }
  return verdict;
}
