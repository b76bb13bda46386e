/**
 * Validating what an operator writes: config text in a file named config.yaml (and, for kernel
 * parameters, the command line text), through loadConfig as `hvinstall validate` runs it. Findings
 * come back as `config.yaml:LINE:COL` (or `<cmdline>:1:COL`) with the key, the message and the hint.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type LoadOptions } from '../../../config/index.js';
import type { Finding, HarvesterConfig } from '../../../config/types.js';

export interface Placed {
  at: string;
  key: string;
  message: string;
  hint?: string;
}

export interface Checked {
  valid: boolean;
  errors: Placed[];
  warnings: Placed[];
  config: HarvesterConfig;
}

function place(f: Finding): Placed {
  const src = f.source ? path.basename(f.source) : '';
  const at = f.line !== undefined ? `${src}:${f.line}:${f.column}` : src;
  const p: Placed = { at, key: f.path, message: f.message };
  if (f.hint !== undefined) p.hint = f.hint;
  return p;
}

/** Loads `text` as config.yaml (undefined: the command line alone) with `cmdline` merged over it. */
export async function check(text: string | undefined, opts: LoadOptions = {}): Promise<Checked> {
  const dir = mkdtempSync(path.join(tmpdir(), 'hvcfg-op-'));
  try {
    let file: string | undefined;
    if (text !== undefined) {
      file = path.join(dir, 'config.yaml');
      writeFileSync(file, text);
    }
    const r = await loadConfig(file, opts);
    return { valid: r.valid, errors: r.errors.map(place), warnings: r.warnings.map(place), config: r.config };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A valid create-mode config to start from; lines are numbered as written (line 1: scheme_version). */
export const CREATE = `scheme_version: 1
token: token-rancher-123
os:
  hostname: node1
  password: rancher
  ntp_servers: [10.10.0.2]
install:
  mode: create
  device: /dev/sda
  vip: 10.10.0.20
  vip_mode: static
  management_interface:
    interfaces:
      - name: ens5
    method: dhcp
`;

/** A valid join-mode config; server_url is line 2. */
export const JOIN = `scheme_version: 1
server_url: https://10.10.0.20
token: token-rancher-123
os:
  hostname: node2
  password: rancher
  ntp_servers: [10.10.0.2]
install:
  mode: join
  device: /dev/sda
  management_interface:
    interfaces:
      - name: ens5
    method: dhcp
`;
