/**
 * `hvinstall validate [FILE|URL|-] [--cmdline STR | --cmdline-file F] [--json] [--print] [--strict]`
 * Exit 0 valid (warnings allowed unless --strict), 1 invalid, 2 cannot read or usage error.
 * Kept lean: it imports only the config pipeline (the URL fetcher is imported when a URL is given),
 * and `make build` bundles it into one file (installer/commands/validate.ts loads that).
 */
import { parseArgs } from 'node:util';
import { HvError, ExitCode } from '../lib/errors.js';
import { loadConfig } from './load.js';
import { redactConfig } from './redact-config.js';
import { formatFinding } from './format.js';
import type { Finding } from './types.js';
import { HELP_OPTION, type OptionDefs } from '../lib/cli/definition.js';

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
} as const satisfies OptionDefs;


function jsonFinding(f: Finding): Record<string, unknown> {
  return { path: f.path, source: f.source ?? null, line: f.line ?? null, column: f.column ?? null, message: f.message, hint: f.hint ?? null };
}

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new HvError(`--${name} must be a positive whole number (got ${JSON.stringify(v)})`, { exitCode: ExitCode.usage });
  return Number(v);
}

export async function runValidate(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { ...OPTIONS, ...HELP_OPTION },
    });
  } catch (err) {
    process.stderr.write(`hvinstall validate: ${(err as Error).message}\n\n${USAGE}\n`);
    return ExitCode.usage;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  if (positionals.length > 1) {
    process.stderr.write(`hvinstall validate: one config at a time (got ${positionals.length})\n\n${USAGE}\n`);
    return ExitCode.usage;
  }
  if (values.cmdline !== undefined && values['cmdline-file'] !== undefined) {
    process.stderr.write('hvinstall validate: give --cmdline or --cmdline-file, not both\n');
    return ExitCode.usage;
  }
  const source = positionals[0];
  if (source === undefined && values.cmdline === undefined && values['cmdline-file'] === undefined) {
    process.stderr.write(`hvinstall validate: no config given\n\n${USAGE}\n`);
    return ExitCode.usage;
  }

  const dhcpRanges: Array<{ first: string; last: string }> = [];
  for (const r of values['dhcp-range'] ?? []) {
    const m = /^\s*(\d+\.\d+\.\d+\.\d+)\s*-\s*(\d+\.\d+\.\d+\.\d+)\s*$/.exec(r);
    if (!m) {
      process.stderr.write(`hvinstall validate: --dhcp-range ${JSON.stringify(r)}: write FIRST-LAST, e.g. 10.0.0.100-10.0.0.200\n`);
      return ExitCode.usage;
    }
    dhcpRanges.push({ first: m[1]!, last: m[2]! });
  }

  let result;
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
  // --strict: a warning fails too (Harvester would install, but the operator asked for a clean file).
  const valid = result.valid && !(values.strict && result.warnings.length > 0);
  const exit = valid ? ExitCode.ok : ExitCode.checkFailed;

  if (values.json) {
    const doc: Record<string, unknown> = {
      valid,
      source: result.source,
      errors: result.errors.map(jsonFinding),
      warnings: result.warnings.map(jsonFinding),
    };
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
