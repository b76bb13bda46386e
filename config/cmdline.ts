/**
 * Kernel command line -> a raw config map (harvester/harvester-installer pkg/config/read.go ReadConfig, pkg/util/cmdline.go): `harvester.` parameters split
 * on `.` into nested keys, a bare key means "true", `key="quoted value"` keeps its spaces, and a
 * repeated key becomes a list. The result goes through the same normaliser as a file, so every
 * spelling works here too; positions are the column of each parameter.
 */
import { emptyPositions, escapePointer, type PositionIndex } from './parse-yaml.js';
import { ownValue, setOwn } from '../lib/own-keys.js';
import type { Finding } from './types.js';

export interface CmdlineToken {
  text: string;
  line: number;
  column: number;
}

export interface ParsedCmdline {
  raw: Record<string, unknown>;
  positions: PositionIndex;
  warnings: Finding[];
  errors: Finding[];
}

const PREFIX = 'harvester.';
/** `harvester.installer.*` steers the live system (e.g. disable=true), not the config. */
const NOT_CONFIG = ['harvester.installer.'];

/** Splits on whitespace outside double quotes and removes the quotes, like the kernel does. */
export function tokenizeCmdline(text: string): CmdlineToken[] {
  const tokens: CmdlineToken[] = [];
  let cur = '';
  let start: { line: number; column: number } | undefined;
  let inQuote = false;
  let line = 1;
  let column = 0;
  for (const ch of text) {
    column++;
    if (ch === '\n') {
      if (!inQuote) {
        if (start) tokens.push({ text: cur, ...start });
        cur = '';
        start = undefined;
      } else cur += ' ';
      line++;
      column = 0;
      continue;
    }
    if (ch === '"') {
      inQuote = !inQuote;
      start ??= { line, column };
      continue;
    }
    if (!inQuote && (ch === ' ' || ch === '\t' || ch === '\r')) {
      if (start) tokens.push({ text: cur, ...start });
      cur = '';
      start = undefined;
      continue;
    }
    start ??= { line, column };
    cur += ch;
  }
  if (start) tokens.push({ text: cur, ...start });
  return tokens;
}

/**
 * `hvinstall.ca_file=PATH`: a PEM bundle in the live system (on the boot medium, or an extra initrd
 * that iPXE or GRUB loads beside the installer's) trusted, besides the system's CAs, for the https
 * `config_url`, `iso_url` and key sources of an automatic install behind a private CA. Harvester has
 * no way to pass one; `validate --cmdline-file` and `fetch config` honour it too. Pure.
 */
export function caFileFromCmdline(text: string): string | undefined {
  return hvinstallParam(text, 'ca_file') || undefined;
}

/** The last `hvinstall.NAME=VALUE` on the command line (a bare `hvinstall.NAME` is `true`), quotes removed. Pure. */
export function hvinstallParam(text: string, name: string): string | undefined {
  let found: string | undefined;
  const key = `hvinstall.${name}`;
  for (const tok of tokenizeCmdline(text)) {
    if (tok.text === key) found = 'true';
    else if (tok.text.startsWith(`${key}=`)) found = tok.text.slice(key.length + 1).replace(/^"(.*)"$/, '$1');
  }
  return found;
}

/** `hvinstall.legacy_bios` (or `=true`): this run consents to installing a legacy-BIOS machine, which Harvester v1.8 refuses. Pure. */
export function legacyBiosFromCmdline(text: string): boolean {
  return /^(true|t|yes|y|1)$/i.test(hvinstallParam(text, 'legacy_bios') ?? '');
}

/**
 * How this run checks the media it downloads (docs/install.md): `hvinstall.iso_sha256=HEX` pins the
 * install ISO's digest, `hvinstall.unverified_media=true` consents to a medium nobody published a
 * digest for. Pure.
 */
export function mediaTrustFromCmdline(text: string): { isoSha256?: string; allowUnverified: boolean } {
  const pinned = hvinstallParam(text, 'iso_sha256');
  return { ...(pinned ? { isoSha256: pinned } : {}), allowUnverified: /^(true|t|yes|y|1)$/i.test(hvinstallParam(text, 'unverified_media') ?? '') };
}

export function parseCmdline(text: string, source = '<cmdline>'): ParsedCmdline {
  const raw: Record<string, unknown> = {};
  const positions = emptyPositions();
  const warnings: Finding[] = [];
  const errors: Finding[] = [];
  for (const tok of tokenizeCmdline(text)) {
    if (!tok.text.startsWith(PREFIX) || NOT_CONFIG.some((p) => tok.text.startsWith(p))) continue;
    const eq = tok.text.indexOf('=');
    const key = (eq < 0 ? tok.text : tok.text.slice(0, eq)).slice(PREFIX.length);
    const value = eq < 0 ? 'true' : tok.text.slice(eq + 1);
    const parts = key.split('.');
    const at = { line: tok.line, column: tok.column };
    if (parts.some((p) => p === '')) {
      warnings.push({ severity: 'warning', path: '', source, ...at, message: `kernel parameter ${JSON.stringify(tok.text)} has an empty key part and is ignored` });
      continue;
    }
    // Keys come from the network (PXE): read and write own properties only, so `__proto__`,
    // `constructor` and friends are plain keys (reported as unknown) and never reach a prototype.
    let node: Record<string, unknown> = raw;
    let ptr = '';
    let clash = false;
    for (const [i, part] of parts.entries()) {
      ptr += `/${escapePointer(part)}`;
      if (!positions.key.has(ptr)) positions.key.set(ptr, at);
      if (i === parts.length - 1) break;
      const next = ownValue(node, part);
      if (next === undefined) {
        setOwn(node, part, {});
        positions.value.set(ptr, at);
      } else if (typeof next !== 'object' || Array.isArray(next)) {
        clash = true;
        break;
      }
      node = ownValue(node, part) as Record<string, unknown>;
    }
    const leaf = parts[parts.length - 1];
    const existing = ownValue(node, leaf);
    if (clash || (existing !== undefined && typeof existing === 'object' && !Array.isArray(existing))) {
      errors.push({ severity: 'error', path: key, source, ...at, message: `kernel parameter harvester.${key} sets both a value and nested keys under the same name` });
      continue;
    }
    if (existing === undefined) {
      setOwn(node, leaf, value);
      positions.value.set(ptr, at);
    } else if (Array.isArray(existing)) {
      positions.value.set(`${ptr}/${existing.length}`, at);
      existing.push(value);
    } else {
      setOwn(node, leaf, [existing, value]);
      positions.value.set(`${ptr}/0`, positions.value.get(ptr) ?? at);
      positions.value.set(`${ptr}/1`, at);
    }
  }
  return { raw, positions, warnings, errors };
}
