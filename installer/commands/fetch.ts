/**
 * `hvinstall fetch config|iso …`: the automatic install's remote fetches, by hand — to check a
 * config_url or pre-stage an ISO with the same retries, proxy, CA and checksum handling.
 */
import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { HvError, ExitCode } from '../../lib/errors.js';
import { Logger } from '../../lib/logger.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { configSecrets, loadConfig, serialiseHarvesterConfig } from '../../config/index.js';
import { HARVESTER_CONFIG_FETCH } from '../remote/automatic.js';
import { downloadFile, type DownloadProgress } from '../remote/iso.js';
import { findLocalIso, openIsoMedia } from '../remote/media.js';
import { fetchPublishedSha256 } from '../remote/install-media.js';
import { parseCommandArgs } from './args.js';
import { HELP_OPTION, type CommandDef, type OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall fetch config [URL] [options]
       hvinstall fetch iso URL|local --output FILE [options]

fetch config   fetch install.config_url (URL, or the one on the kernel command line), merge the
               command line over it and validate it; --output writes the merged config (0600)
  --cmdline STR | --cmdline-file F   kernel command line (harvester.* keys, config_url)
  --attempts N (default 30)  --retry-delay MS (default 10000)  --timeout MS (default 15000)
  --ca-file F  --sha256 HEX  --output FILE

fetch iso      download an ISO with resume, progress and sha256 verification
  --output FILE   where to put it (a partial FILE.part is resumed)
  --sha256 HEX    expected checksum (default: <URL>.sha256 if the server publishes one)
  --attempts N (default 5)  --retry-delay MS (default 2000)  --stall-timeout MS (default 60000)  --ca-file F
  --extract DIR   then extract rootfs.squashfs and bundle/ into DIR (loop mount or xorriso)
  'local' means the boot medium (/run/initramfs/live or the COS_LIVE label).

Exit codes: 0 ok, 1 invalid config or checksum mismatch, 2 usage error or cannot fetch, 3 download failed.`;

/** What each parser accepts: --help, completion and the man page read the same objects. */
const CONFIG_OPTIONS = {
  cmdline: { type: 'string' },
  'cmdline-file': { type: 'string' },
  attempts: { type: 'string' },
  'retry-delay': { type: 'string' },
  timeout: { type: 'string' },
  'ca-file': { type: 'string' },
  sha256: { type: 'string' },
  output: { type: 'string' },
} as const satisfies OptionDefs;
const ISO_OPTIONS = {
  output: { type: 'string' },
  sha256: { type: 'string' },
  attempts: { type: 'string' },
  'retry-delay': { type: 'string' },
  'stall-timeout': { type: 'string' },
  'ca-file': { type: 'string' },
  extract: { type: 'string' },
} as const satisfies OptionDefs;

export const SUBCOMMANDS: CommandDef[] = [
  { name: 'config', summary: 'fetch install.config_url, merge the command line over it and validate it', usage: USAGE, options: { ...CONFIG_OPTIONS, ...HELP_OPTION } },
  { name: 'iso', summary: 'download an ISO with resume, progress and sha256 verification', usage: USAGE, options: { ...ISO_OPTIONS, ...HELP_OPTION } },
];

function usageError(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvinstall fetch --help'", exitCode: ExitCode.usage });
}

function num(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw usageError(`--${name} must be a positive whole number (got ${JSON.stringify(v)})`);
  return Number(v);
}

function progressPrinter(label: string): (p: DownloadProgress) => void {
  const tty = process.stderr.isTTY;
  return (p) => {
    const mib = (n: number): string => (n / 1048576).toFixed(1);
    const pct = p.total ? ` (${Math.floor((p.bytes * 100) / p.total)}%)` : '';
    const line = `${label}: ${mib(p.bytes)}${p.total ? `/${mib(p.total)}` : ''} MiB${pct}${p.rate ? `, ${mib(p.rate)} MiB/s` : ''}`;
    process.stderr.write(tty ? `\r${line}\u001b[K` : `${line}\n`);
  };
}

async function fetchConfig(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, CONFIG_OPTIONS, USAGE, true, "run 'hvinstall fetch --help'");
  if (!args) return ExitCode.ok;
  const { values, positionals } = args;
  if (positionals.length > 1) throw usageError('fetch config takes at most one URL');
  if (positionals.length === 0 && values.cmdline === undefined && values['cmdline-file'] === undefined) {
    throw usageError('give a URL, or --cmdline/--cmdline-file with harvester.install.config_url');
  }
  const log = new Logger();
  const loaded = await loadConfig(positionals[0], {
    cmdline: values.cmdline,
    cmdlineFile: values['cmdline-file'],
    attempts: num('attempts', values.attempts) ?? HARVESTER_CONFIG_FETCH.attempts,
    retryDelayMs: num('retry-delay', values['retry-delay']) ?? HARVESTER_CONFIG_FETCH.retryDelayMs,
    timeoutMs: num('timeout', values.timeout) ?? HARVESTER_CONFIG_FETCH.timeoutMs,
    caFile: values['ca-file'],
    sha256: values.sha256,
  });
  log.redactor.add(...configSecrets(loaded.config));
  for (const f of [...loaded.errors, ...loaded.warnings]) {
    process.stderr.write(log.redactor.redactString(`${f.source ? `${f.source}${f.line ? `:${f.line}` : ''}: ` : ''}${f.severity}: ${f.path ? `${f.path}: ` : ''}${f.message}`) + '\n');
  }
  if (!loaded.valid) return ExitCode.checkFailed;
  if (values.output) {
    await writeFileAtomic(values.output, await serialiseHarvesterConfig(loaded.config), { mode: 0o600 });
    process.stdout.write(`fetched ${loaded.source}: valid; merged config written to ${values.output}\n`);
  } else {
    process.stdout.write(`fetched ${loaded.source}: valid (mode ${loaded.config.install?.mode ?? '?'}, device ${loaded.config.install?.device ?? '?'})\n`);
  }
  return ExitCode.ok;
}

async function fetchIso(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, ISO_OPTIONS, USAGE, true, "run 'hvinstall fetch --help'");
  if (!args) return ExitCode.ok;
  const { values, positionals } = args;
  if (positionals.length !== 1) throw usageError('fetch iso takes one URL (or local)');
  const log = new Logger();
  let iso: string;
  if (positionals[0] === 'local') {
    iso = await findLocalIso();
    process.stdout.write(`boot medium: ${iso}\n`);
  } else {
    if (!values.output) throw usageError('fetch iso URL needs --output FILE');
    if (!/^https?:\/\//i.test(positionals[0])) throw usageError(`not an http(s) URL: ${positionals[0]}`);
    const sha256 = values.sha256 ?? (await fetchPublishedSha256(positionals[0], { caFile: values['ca-file'] }).catch(() => undefined));
    if (!sha256) process.stderr.write('hvinstall: warning: no sha256 given or published; the ISO will not be verified\n');
    const r = await downloadFile(positionals[0], values.output, {
      sha256,
      attempts: num('attempts', values.attempts),
      retryDelayMs: num('retry-delay', values['retry-delay']),
      stallTimeoutMs: num('stall-timeout', values['stall-timeout']),
      caFile: values['ca-file'],
      onProgress: progressPrinter(path.basename(values.output)),
      log,
    });
    if (process.stderr.isTTY) process.stderr.write('\n');
    iso = r.path;
    process.stdout.write(`${r.path}: ${r.bytes} bytes, sha256 ${r.sha256}${sha256 ? ' (verified)' : ' (not verified)'}${r.resumed ? ', resumed' : ''}\n`);
  }
  if (values.extract) {
    await mkdir(values.extract, { recursive: true });
    const m = await openIsoMedia(iso, values.extract, { preferMount: false, log });
    process.stdout.write(`extracted ${m.found.join(', ')} into ${m.root}\n`);
  }
  return ExitCode.ok;
}

export default async function fetch(argv: string[]): Promise<number> {
  const [what, ...rest] = argv;
  if (!what) {
    process.stderr.write(USAGE + '\n');
    return ExitCode.usage;
  }
  if (what === '--help' || what === '-h') {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  if (what === 'config') return fetchConfig(rest);
  if (what === 'iso') return fetchIso(rest);
  throw usageError(`unknown fetch target '${what}' (config or iso)`);
}
