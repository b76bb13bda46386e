/**
 * What RKE2's config.yaml.d must hold for a role, checked before a start so a missing token or
 * server address is reported as such instead of as an RKE2 that never becomes ready.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { supervisorUrl, type Rke2Role } from './role.js';

/** The drop-in Harvester's rke2-agent ExecStartPre writes (harv-update-rke2-server-url). */
export const VIP_DROPIN = '90-harvester-vip.yaml';

/** Merges every drop-in in lexical order (RKE2's own rule: later files win, `key+` appends). */
export async function readMergedDropIns(dir: string): Promise<{ merged: Record<string, unknown>; files: string[]; errors: string[] }> {
  const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => /\.ya?ml$/.test(f)).sort();
  const merged: Record<string, unknown> = {};
  const errors: string[] = [];
  for (const f of files) {
    try {
      const doc = parse(await readFile(path.join(dir, f), 'utf8')) as Record<string, unknown> | null;
      if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
        for (const [k, v] of Object.entries(doc)) {
          if (k.endsWith('+')) {
            const base = k.slice(0, -1);
            merged[base] = [...toList(merged[base]), ...toList(v)];
          } else merged[k] = v;
        }
      } else if (doc !== null) errors.push(`${f}: not a YAML mapping`);
    } catch (err) {
      errors.push(`${f}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  return { merged, files, errors };
}

function toList(v: unknown): unknown[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export interface DropInCheck {
  /** Problems that make a start pointless. */
  missing: string[];
  /** Files to write first (path relative to the config dir → content), e.g. the VIP drop-in. */
  toWrite: Record<string, string>;
}

/** Pure: what the merged config lacks for `role`, and what the agent may write itself. */
export function checkDropIns(role: Rke2Role, merged: Record<string, unknown>, config: HarvesterConfig, joining: boolean): DropInCheck {
  const missing: string[] = [];
  const toWrite: Record<string, string> = {};
  if (joining) {
    if (!merged.server) {
      const url = config.serverUrl ? supervisorUrl(config.serverUrl) : undefined;
      if (url) toWrite[VIP_DROPIN] = `server: ${url}\n`;
      else missing.push('no `server:` in any drop-in and no server_url in the config to derive it from');
    }
    if (!merged.token && !merged['token-file']) missing.push('no `token:` in any drop-in (the installer writes it, mode 0600)');
  }
  if (role === 'server' && !joining && merged.server) {
    missing.push(`a create node must not have \`server: ${String(merged.server)}\` (it would try to join instead of cluster-init)`);
  }
  return { missing, toWrite };
}
