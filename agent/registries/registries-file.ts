/**
 * Keeps /etc/rancher/rke2/registries.yaml equal to what the declared source (the node's
 * containerd-registry setting) renders to (harvester#3116, #4156, #4530). Comparison is by content
 * (parsed YAML), so an equivalent file written by someone else is left alone and changes to
 * `configs` alone count as changes.
 */
import { isDeepStrictEqual } from 'node:util';
import { readFile, stat, chmod } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { renderRegistriesFile } from '../../node/index.js';

export { REGISTRIES_PATH } from '../../node/index.js';

export interface DesiredRegistries {
  content: string;
  mode: number;
  /** Credentials in the document, for redaction. */
  secret: boolean;
}

export interface CurrentFile {
  /** undefined when the file does not exist. */
  content?: string;
  mode?: number;
}

export type Drift = 'none' | 'deleted' | 'truncated' | 'edited' | 'mode';

/** What is wrong with the file on disk compared with the desired one. Pure. */
export function classifyDrift(current: CurrentFile, desired: DesiredRegistries): Drift {
  if (current.content === undefined) return 'deleted';
  if (current.content.trim() === '') return 'truncated';
  let parsed: unknown;
  try {
    parsed = parseYaml(current.content);
  } catch {
    return 'edited';
  }
  if (!isDeepStrictEqual(normalise(parsed), normalise(parseYaml(desired.content)))) return 'edited';
  if (current.mode !== undefined && (current.mode & 0o777) !== desired.mode) return 'mode';
  return 'none';
}

/** Missing sections and empty ones mean the same to RKE2. */
function normalise(doc: unknown): unknown {
  const d = (doc && typeof doc === 'object' ? doc : {}) as Record<string, unknown>;
  return { mirrors: d.mirrors ?? {}, configs: d.configs ?? {} };
}

export function desiredRegistries(setting: string): DesiredRegistries {
  const r = renderRegistriesFile(setting);
  return { content: r.content, mode: r.mode, secret: r.secret };
}

export async function readCurrent(file: string): Promise<CurrentFile> {
  try {
    const [content, st] = await Promise.all([readFile(file, 'utf8'), stat(file)]);
    return { content, mode: st.mode & 0o777 };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
}

/** Puts the desired file in place (atomically), or only fixes its mode. */
export async function applyRegistries(file: string, desired: DesiredRegistries, drift: Drift): Promise<void> {
  if (drift === 'none') return;
  if (drift === 'mode') await chmod(file, desired.mode);
  else await writeFileAtomic(file, desired.content, { mode: desired.mode });
}
