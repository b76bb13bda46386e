/**
 * `hvinstall validate [FILE|URL|-] [--cmdline STR | --cmdline-file F] [--json] [--print] [--strict]`
 * Exit 0 valid (warnings allowed unless --strict), 1 invalid, 2 cannot read or usage error.
 * Kept lean: it imports only the config pipeline (the URL fetcher is imported when a URL is given),
 * and `make build` bundles it into one file (installer/commands/validate.ts loads that).
 */
import { parseArgs } from 'node:util';
import { HvError, ExitCode } from '../lib/errors.js';
import { loadConfig } from './load.js';
import type { LoadedConfig } from './types.js';
import { redactConfig } from './redact-config.js';
import { formatFinding } from './format.js';
import type { Finding, HarvesterConfig } from './types.js';
import { HELP_OPTION, type OptionDefs } from '../lib/cli/definition.js';
import { describeParseError } from '../lib/cli/parse-error.js';

export const USAGE = `usage: hvinstall validate [FILE|URL|-] [options]

Loads a Harvester config.yaml (scheme_version 1) from a file, an http(s) URL or standard input (-),
merges the kernel command line over it, and reports every problem at once.

options:
  --cmdline STR        kernel command line; its harvester.* parameters override the file
  --cmdline-file F     read the kernel command line from a file (e.g. /proc/cmdline)
  --json               print {valid, errors, warnings} as JSON
  --print              print the normalised, merged config (secrets redacted)
  --strict             warnings fail too (exit 1): what Harvester ignores or installs anyway
  --already-installed  validate for the already-installed path (no iso_url or device needed)
  --dhcp-range A-B     a DHCP pool of the management network (repeatable): the VIP must lie outside
  --ca-file F          extra CA bundle (PEM) for https URLs (default: the command line's hvinstall.ca_file)
  --sha256 HEX         expected sha256 of the fetched config
  --timeout MS         per-attempt timeout for URLs (default 15000)
  --attempts N         attempts for URLs (default 3)
  --source S           the OS image to install (directory tree or squashfs): the node's files are
                       rendered for it as install and render would, so a config that passes fails
                       nowhere later (its rancherd, release metadata, Harvester's addon templates)
  --release FILE       with --source: the ISO root's harvester-release.yaml, read with the image's own
  -h, --help           show this help

With only --cmdline/--cmdline-file, harvester.install.config_url is fetched as the file.
Exit codes: 0 valid (warnings allowed, unless --strict), 1 invalid, 2 cannot read the input or usage error.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  cmdline: { type: 'string' },
  'cmdline-file': { type: 'string' },
  json: { type: 'boolean' },
  print: { type: 'boolean' },
  strict: { type: 'boolean' },
  'already-installed': { type: 'boolean' },
  'dhcp-range': { type: 'string', multiple: true },
  'ca-file': { type: 'string' },
  sha256: { type: 'string' },
  timeout: { type: 'string' },
  attempts: { type: 'string' },
  source: { type: 'string' },
  release: { type: 'string' },
} as const satisfies OptionDefs;

/**
 * What the installer adds to validate (config/ cannot import it): with --source, the findings of
 * rendering the node's files for that OS image, the check install and render make before any disk
 * is touched.
 */
export interface ValidateHooks {
  checkSource(config: HarvesterConfig, source: string, release: string | undefined): Promise<Finding[]>;
}

type Values = ReturnType<typeof parseArgs<{ args: string[]; allowPositionals: true; options: typeof OPTIONS & typeof HELP_OPTION }>>['values'];


function jsonFinding(f: Finding): Record<string, unknown> {
  return { path: f.path, source: f.source ?? null, line: f.line ?? null, column: f.column ?? null, message: f.message, hint: f.hint ?? null };
}

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new HvError(`--${name} must be a positive whole number (got ${JSON.stringify(v)})`, { exitCode: ExitCode.usage });
  return Number(v);
}

export async function runValidate(argv: string[], hooks?: ValidateHooks): Promise<number> {
  const args = parseValidateArgs(argv);
  if (typeof args === 'number') return args;
  const { values, source } = args;
  const dhcpRanges = parseDhcpRanges(values['dhcp-range'] ?? []);
  if (typeof dhcpRanges === 'number') return dhcpRanges;
  let result: LoadedConfig;
  try {
    result = await loadConfig(source, {
      cmdline: values.cmdline,
      cmdlineFile: values['cmdline-file'],
      alreadyInstalled: values['already-installed'],
      dhcpRanges,
      caFile: values['ca-file'],
      sha256: values.sha256,
      timeoutMs: positiveInt('timeout', values.timeout),
      attempts: positiveInt('attempts', values.attempts),
    });
  } catch (err) {
    // A --json caller gets JSON for "cannot read" too; everyone else gets the CLI's error lines.
    if (!values.json || !(err instanceof HvError)) throw err;
    const finding: Finding = { severity: 'error', path: '', source: err.where ?? source ?? '', message: err.message, hint: err.hint };
    process.stdout.write(JSON.stringify({ valid: false, source: finding.source, errors: [jsonFinding(finding)], warnings: [] }, null, 2) + '\n');
    return err.exitCode;
  }
  if (values.source !== undefined && result.valid) {
    if (!hooks) throw new HvError('--source needs the installer: run it as hvinstall validate', { exitCode: ExitCode.usage });
    const found = await hooks.checkSource(result.config, values.source, values.release);
    result = { ...result, errors: [...result.errors, ...found], valid: found.length === 0 };
  }
  return report(result, values);
}

/** The arguments, or the exit code when they are refused (the reason printed) or --help was asked. */
function parseValidateArgs(argv: string[]): { values: Values; source?: string } | number {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { ...OPTIONS, ...HELP_OPTION } });
  } catch (err) {
    process.stderr.write(`hvinstall validate: ${describeParseError(err, { ...OPTIONS, ...HELP_OPTION }) ?? (err as Error).message}\n\n${USAGE}\n`);
    return ExitCode.usage;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  const refuse = (message: string, withUsage = true): number => {
    process.stderr.write(`hvinstall validate: ${message}\n${withUsage ? `\n${USAGE}\n` : ''}`);
    return ExitCode.usage;
  };
  if (positionals.length > 1) return refuse(`one config at a time (got ${positionals.length})`);
  if (values.cmdline !== undefined && values['cmdline-file'] !== undefined) return refuse('give --cmdline or --cmdline-file, not both', false);
  if (values.release !== undefined && values.source === undefined) return refuse('--release needs --source: it is read with the OS image', false);
  const source = positionals[0];
  if (source === undefined && values.cmdline === undefined && values['cmdline-file'] === undefined) return refuse('no config given');
  return { values, source };
}

function parseDhcpRanges(given: string[]): Array<{ first: string; last: string }> | number {
  const ranges: Array<{ first: string; last: string }> = [];
  for (const r of given) {
    const m = /^\s*(\d+\.\d+\.\d+\.\d+)\s*-\s*(\d+\.\d+\.\d+\.\d+)\s*$/.exec(r);
    if (!m) {
      process.stderr.write(`hvinstall validate: --dhcp-range ${JSON.stringify(r)}: write FIRST-LAST, e.g. 10.0.0.100-10.0.0.200\n`);
      return ExitCode.usage;
    }
    ranges.push({ first: m[1]!, last: m[2]! });
  }
  return ranges;
}

/** Prints the findings (or JSON) and the summary; the exit code. */
async function report(result: LoadedConfig, values: Values): Promise<number> {
  // --strict: a warning fails too (Harvester would install, but the operator asked for a clean file).
  const valid = result.valid && !(values.strict && result.warnings.length > 0);
  const exit = valid ? ExitCode.ok : ExitCode.checkFailed;
  if (values.json) {
    const doc: Record<string, unknown> = { valid, source: result.source, errors: result.errors.map(jsonFinding), warnings: result.warnings.map(jsonFinding) };
    if (values.print) doc.config = redactConfig(result.config);
    process.stdout.write(JSON.stringify(doc, null, 2) + '\n');
    return exit;
  }
  const lines = [...result.errors, ...result.warnings].map(formatFinding);
  if (lines.length) process.stderr.write(lines.join('\n') + '\n');
  const count = (n: number, w: string) => `${n} ${w}${n === 1 ? '' : 's'}`;
  const strictNote = valid !== result.valid ? '; --strict: warnings fail' : '';
  const summary = `${result.source}: ${valid ? 'valid' : 'invalid'} (${count(result.errors.length, 'error')}, ${count(result.warnings.length, 'warning')}${strictNote})`;
  if (values.print) {
    const { stringify } = await import('yaml');
    process.stdout.write(stringify(redactConfig(result.config), { lineWidth: 0 }));
    process.stderr.write(summary + '\n');
  } else {
    (valid ? process.stdout : process.stderr).write(summary + '\n');
  }
  return exit;
}
