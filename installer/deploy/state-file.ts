import { parse, stringify } from 'yaml';
import type { ImageRecord, OsSource } from '../disk/contracts.js';
import { DIGEST_RE } from '../../node/image-digest.js';
import { STATE_YAML_FILE } from '../../node/state-yaml-copy.js';

/**
 * state.yaml in Elemental v1's shape (InstallState: date, then one key per partition holding its
 * label and one key per image), so Elemental/Harvester tooling that reads it keeps working. Our
 * additions per image (file, size, digest) are keys Elemental's non-strict YAML decoding ignores.
 */
export interface DeployState {
  date: string;
  source: OsSource;
  sourceDigest: string;
  /** The source's content digest (source-digest.ts) the images' tree was checked against. */
  contentDigest?: string;
  active: ImageRecord;
  passive: ImageRecord;
  recovery: ImageRecord;
}

export const STATE_FILE = STATE_YAML_FILE;

/** The URI form Elemental writes for an image source. */
export function sourceUri(source: OsSource): string {
  return source.kind === 'dir' ? `dir://${source.path}` : `file://${source.path}`;
}

export function parseSourceUri(uri: string): OsSource | undefined {
  const m = /^(dir|file):\/\/(\/.*)$/.exec(uri);
  if (!m) return undefined;
  return m[1] === 'dir' ? { kind: 'dir', path: m[2] } : { kind: 'squashfs', path: m[2] };
}

function imageEntry(state: DeployState, img: ImageRecord): Record<string, unknown> {
  return {
    source: sourceUri(state.source),
    'source-metadata': { digest: `sha256:${state.sourceDigest}`, ...(state.contentDigest ? { 'content-digest': state.contentDigest } : {}) },
    label: img.label,
    fs: img.fs,
    file: img.file,
    size: img.sizeBytes,
    digest: img.digest,
  };
}

export function renderStateYaml(state: DeployState): string {
  const doc = {
    date: state.date,
    state: {
      label: 'COS_STATE',
      active: imageEntry(state, state.active),
      passive: imageEntry(state, state.passive),
    },
    recovery: {
      label: 'COS_RECOVERY',
      recovery: imageEntry(state, state.recovery),
    },
  };
  return `# Written by hvinstall: what was deployed to COS_STATE and COS_RECOVERY; each digest is the image as read back from the disk.\n${stringify(doc, { lineWidth: 0 })}`;
}

/** Reads a state.yaml we wrote; undefined when it is missing pieces (an older or foreign file). */
export function parseStateYaml(text: string): DeployState | undefined {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(doc) || typeof doc.date !== 'string') return undefined;
  const state = isObject(doc.state) ? doc.state : undefined;
  const recovery = isObject(doc.recovery) ? doc.recovery : undefined;
  const active = readImage(state?.active, 'COS_ACTIVE');
  const passive = readImage(state?.passive, 'COS_PASSIVE');
  const rec = readImage(recovery?.recovery, 'COS_SYSTEM');
  if (!active || !passive || !rec) return undefined;
  return { date: doc.date, source: active.source, sourceDigest: active.digest, ...(active.contentDigest ? { contentDigest: active.contentDigest } : {}), active: active.img, passive: passive.img, recovery: rec.img };
}

function readImage(
  v: unknown,
  label: ImageRecord['label'],
): { img: ImageRecord; source: OsSource; digest: string; contentDigest?: string } | undefined {
  if (!isObject(v)) return undefined;
  const source = typeof v.source === 'string' ? parseSourceUri(v.source) : undefined;
  const meta = isObject(v['source-metadata']) ? v['source-metadata'] : undefined;
  const digestField = typeof meta?.digest === 'string' ? meta.digest : '';
  const digest = digestField.startsWith('sha256:') ? digestField.slice('sha256:'.length) : '';
  if (!source || !digest || v.label !== label || v.fs !== 'ext2') return undefined;
  if (typeof v.file !== 'string' || typeof v.size !== 'number' || typeof v.digest !== 'string') return undefined;
  if (!DIGEST_RE.test(v.digest)) return undefined;
  const contentDigest = typeof meta?.['content-digest'] === 'string' ? meta['content-digest'] : undefined;
  return { img: { file: v.file, label, fs: 'ext2', sizeBytes: v.size, digest: v.digest }, source, digest, ...(contentDigest ? { contentDigest } : {}) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
