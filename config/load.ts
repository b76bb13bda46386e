/**
 * The effects around the pure pipeline: read a path, an http(s) URL or standard input, and the
 * kernel command line (text or a file such as /proc/cmdline), then normalise, merge (command line
 * over file, harvester/harvester-installer pkg/console/install_panels.go) and validate. Input that cannot be read at all is an HvError (exit 2);
 * input that was read but is not a usable config (binary, too large, not YAML) becomes findings.
 */
import { closeSync, openSync, readFileSync, readSync, statSync, type Stats } from 'node:fs';
import { HvError, ExitCode } from '../lib/errors.js';
import { redactUrl } from '../lib/url-secrets.js';
import { parseYamlWithPositions } from './parse-yaml.js';
import { caFileFromCmdline, parseCmdline } from './cmdline.js';
import { isVolumeUrl } from './config-volume.js';
import { normaliseRaw, type NormalisedSource } from './normalise.js';
import { validateSources } from './validate.js';
import { sortFindings } from './findings.js';
import type { Finding, LoadOptions, LoadedConfig } from './types.js';

/** A Harvester config is a few KiB; anything past this is not one (and would only slow the parser). */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
export const CMDLINE_SOURCE = '<cmdline>';
export const STDIN_SOURCE = '<stdin>';

export interface RawSource {
  name: string;
  bytes: Buffer;
  contentType?: string;
}

function isUrl(s: string): boolean {
  return /^https?:\/\//i.test(s);
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    chunks.push(chunk as Buffer);
    if (size > MAX_CONFIG_BYTES) break;
  }
  return Buffer.concat(chunks);
}

/** Synchronous on purpose: one small file, and the cold start of `hvinstall validate` matters (bench). */
async function readPath(file: string): Promise<Buffer> {
  let st: Stats;
  try {
    st = statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new HvError(code === 'ENOENT' ? `config file not found: ${file}` : `cannot read ${file}: ${(err as Error).message}`, {
      hint: code === 'ENOENT' ? 'check the path, or pass - to read standard input' : undefined,
      exitCode: ExitCode.usage,
    });
  }
  if (st.isDirectory()) throw new HvError(`${file} is a directory, not a config file`, { exitCode: ExitCode.usage });
  try {
    if (st.size > MAX_CONFIG_BYTES) {
      // Read only enough to say so; decodeConfigText reports the size.
      const fd = openSync(file, 'r');
      try {
        const buf = Buffer.alloc(MAX_CONFIG_BYTES + 1);
        return buf.subarray(0, readSync(fd, buf, 0, buf.length, 0));
      } finally {
        closeSync(fd);
      }
    }
    return readFileSync(file);
  } catch (err) {
    throw new HvError(`cannot read ${file}: ${(err as Error).message}`, { exitCode: ExitCode.usage });
  }
}

async function readUrl(url: string, opts: LoadOptions): Promise<RawSource> {
  const { fetchBytes, FetchError } = await import('../lib/http-fetch.js');
  // The name the config is known by in findings and logs: its credentials redacted (they are sent, never shown).
  const shown = redactUrl(url);
  try {
    const r = await fetchBytes(url, {
      timeoutMs: opts.timeoutMs,
      attempts: opts.attempts,
      retryDelayMs: opts.retryDelayMs,
      caFile: opts.caFile,
      sha256: opts.sha256,
      maxBytes: MAX_CONFIG_BYTES + 1,
    });
    return { name: shown, bytes: r.body, contentType: r.contentType };
  } catch (err) {
    if (err instanceof FetchError) {
      if (err.kind === 'too-large') return { name: shown, bytes: Buffer.alloc(MAX_CONFIG_BYTES + 1) };
      const hint = err.kind === 'ca-file' && opts.caFileFrom === 'cmdline' ? `the kernel command line's hvinstall.ca_file=${opts.caFile} names it: ${err.hint ?? 'give a PEM file'}` : err.hint;
      throw new HvError(`cannot fetch config: ${err.message}`, { where: shown, hint, exitCode: ExitCode.usage, cause: err });
    }
    throw err;
  }
}

/** Reads a source by name: a path, an http(s) URL, or `-` for standard input. */
export async function readSource(source: string, opts: LoadOptions = {}): Promise<RawSource> {
  if (source === '-') return { name: STDIN_SOURCE, bytes: await readStdin() };
  if (isUrl(source)) return readUrl(source, opts);
  if (isVolumeUrl(source)) {
    throw new HvError(`config_url ${source} is a volume the installer reads at boot; here only its file can be read`, {
      hint: 'mount the volume and give its file with the same command line: hvinstall validate /mnt/config.yaml --cmdline …',
      exitCode: ExitCode.usage,
    });
  }
  return { name: opts.sourceName ?? source, bytes: await readPath(source) };
}

/** Bytes -> text, or a finding saying why the bytes are not a config file. */
export function decodeConfigText(src: RawSource): { text?: string; error?: Finding } {
  const at = { severity: 'error' as const, path: '', source: src.name };
  if (src.bytes.length > MAX_CONFIG_BYTES) {
    return { error: { ...at, message: `the config is larger than ${MAX_CONFIG_BYTES / 1024 / 1024} MiB; a Harvester config is a few KiB`, hint: 'is this the right file?' } };
  }
  const nul = src.bytes.indexOf(0);
  if (nul >= 0) return { error: { ...at, message: `binary data, not a YAML config (NUL byte at offset ${nul})`, hint: 'is this the right file? (an ISO or image cannot be a config)' } };
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(src.bytes);
  } catch {
    return { error: { ...at, message: 'not UTF-8 text, not a YAML config', hint: 'save the file as UTF-8' } };
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const head = text.trimStart().slice(0, 200).toLowerCase();
  if (/^<!doctype html|^<html|^<\?xml/.test(head) || (src.contentType ?? '').toLowerCase().startsWith('text/html')) {
    return { error: { ...at, message: `the server returned an HTML page${src.contentType ? ` (${src.contentType})` : ''}, not a YAML config`, hint: 'check the URL: it probably points at an index or error page' } };
  }
  return { text };
}

/** Parses and normalises one YAML text; returns findings instead of a source when it is not YAML. */
export function normaliseYamlText(text: string, name: string): { source?: NormalisedSource; errors: Finding[]; warnings: Finding[] } {
  const parsed = parseYamlWithPositions(text, name);
  if (parsed.errors.length > 0) return { errors: parsed.errors, warnings: parsed.warnings };
  const source = normaliseRaw(parsed.value, { name, positions: parsed.positions });
  return { source, errors: [], warnings: parsed.warnings };
}

async function readCmdline(opts: LoadOptions): Promise<{ text: string; name: string } | undefined> {
  if (opts.cmdline !== undefined) return { text: opts.cmdline, name: CMDLINE_SOURCE };
  if (opts.cmdlineFile !== undefined) {
    try {
      return { text: readFileSync(opts.cmdlineFile, 'utf8'), name: opts.cmdlineFile };
    } catch (err) {
      throw new HvError(`cannot read the kernel command line from ${opts.cmdlineFile}: ${(err as Error).message}`, { exitCode: ExitCode.usage });
    }
  }
  return undefined;
}

export async function loadConfig(source: string | undefined, opts: LoadOptions = {}): Promise<LoadedConfig> {
  const errors: Finding[] = [];
  const warnings: Finding[] = [];
  const sources: NormalisedSource[] = [];

  const cmd = await readCmdline(opts);
  // An explicit --ca-file wins; else the command line's hvinstall.ca_file (automatic installs).
  const cmdlineCa = cmd && opts.caFile === undefined ? caFileFromCmdline(cmd.text) : undefined;
  if (cmdlineCa !== undefined) opts = { ...opts, caFile: cmdlineCa, caFileFrom: 'cmdline' };
  let cmdlineConfigUrl: string | undefined;
  if (cmd) {
    const parsed = parseCmdline(cmd.text, cmd.name);
    errors.push(...parsed.errors);
    warnings.push(...parsed.warnings);
    const normalised = normaliseRaw(parsed.raw, { name: cmd.name, cmdline: true, positions: parsed.positions });
    sources.push(normalised);
    cmdlineConfigUrl = normalised.config.install?.configUrl;
  }
  // With only a command line, follow its config_url as the installer does.
  const fileSource = source ?? cmdlineConfigUrl;
  if (fileSource === undefined && !cmd) {
    throw new HvError('no config given', { hint: 'pass a file, an http(s) URL or - for standard input', exitCode: ExitCode.usage });
  }
  let name = cmd?.name ?? CMDLINE_SOURCE;
  if (fileSource !== undefined) {
    const raw = await readSource(fileSource, opts);
    name = raw.name;
    const decoded = decodeConfigText(raw);
    if (decoded.error) errors.push(decoded.error);
    else {
      const n = normaliseYamlText(decoded.text!, raw.name);
      errors.push(...n.errors);
      warnings.push(...n.warnings);
      if (n.source) sources.push(n.source);
    }
  }
  if (errors.length > 0 && sources.length < (cmd ? 1 : 0) + (fileSource !== undefined ? 1 : 0)) {
    // The file could not be read as a config: report that (and the command line's own findings)
    // rather than every rule the missing file "fails".
    const all = (sev: 'errors' | 'warnings') => sortFindings([...(sev === 'errors' ? errors : warnings), ...sources.flatMap((s) => s[sev])]);
    return { source: name, valid: false, errors: all('errors'), warnings: all('warnings'), config: {} };
  }
  const result = validateSources(sources, { alreadyInstalled: opts.alreadyInstalled, dhcpRanges: opts.dhcpRanges }, { errors, warnings });
  return { source: name, ...result };
}
