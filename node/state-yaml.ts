/**
 * The A/B moves on COS_STATE's state.yaml (Elemental v1's InstallState: `state.active`,
 * `state.passive`, each with label, file, fs, source and our size and digest), done on the
 * document itself so the keys another tool wrote (Harvester's installer, Elemental) survive:
 * an upgrade (new image active, the old active passive) and hvagent's commit of a fallback
 * (the previous image active again, the failed one recorded as `failed`, no passive). Pure.
 */
import { parse, stringify } from 'yaml';
import { ACTIVE_IMAGE_FILE, FAILED_IMAGE_FILE, PASSIVE_IMAGE_FILE } from './boot-assessment.js';

export interface NewImageEntry {
  source: string;
  sourceDigest: string;
  sizeBytes: number;
  digest: string;
}

type Doc = Record<string, unknown> & { state?: Record<string, unknown> };

function load(text: string, what: string): Doc {
  const doc = parse(text) as unknown;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Error(`${what}: state.yaml is not a mapping`);
  const d = doc as Doc;
  if (typeof d.state !== 'object' || d.state === null) d.state = { label: 'COS_STATE' };
  return d;
}

const render = (doc: Doc): string => `# Written by hvinstall: what was deployed to COS_STATE.\n${stringify(doc, { lineWidth: 0 })}`;
const entry = (v: unknown): Record<string, unknown> | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

/** state.yaml after an upgrade: the new image active; the old active (relabelled, re-digested) passive. */
export function upgradedStateYaml(text: string, image: NewImageEntry, passiveDigest: string | undefined, date: string): string {
  const doc = load(text, 'upgrade');
  const state = doc.state!;
  const old = entry(state.active);
  if (old) state.passive = { ...old, label: 'COS_PASSIVE', file: PASSIVE_IMAGE_FILE, ...(passiveDigest ? { digest: passiveDigest } : {}) };
  else delete state.passive;
  delete state.failed;
  state.active = {
    source: image.source,
    'source-metadata': { digest: `sha256:${image.sourceDigest}` },
    label: 'COS_ACTIVE',
    fs: 'ext2',
    file: ACTIVE_IMAGE_FILE,
    size: image.sizeBytes,
    digest: image.digest,
  };
  doc.date = date;
  return render(doc);
}

/** state.yaml after a fallback is committed: the previous image active again, the failed one aside. */
export function committedFallbackStateYaml(text: string, activeDigest: string | undefined, date: string): string {
  const doc = load(text, 'fallback');
  const state = doc.state!;
  const failed = entry(state.active);
  const previous = entry(state.passive);
  if (!previous) return render(doc);
  state.active = { ...previous, label: 'COS_ACTIVE', file: ACTIVE_IMAGE_FILE, ...(activeDigest ? { digest: activeDigest } : {}) };
  delete state.passive;
  if (failed) state.failed = { ...failed, file: FAILED_IMAGE_FILE };
  doc.date = date;
  return render(doc);
}

/** The digest state.yaml records for active.img ('' when none). Pure. */
export function activeDigestOf(text: string): string {
  const doc = parse(text) as Doc | null;
  const active = entry(entry(doc?.state)?.active);
  return typeof active?.digest === 'string' ? active.digest : '';
}

/** The source state.yaml records for active.img ('' when none): names an image no upgrade record does. Pure. */
export function activeSourceOf(text: string): string {
  const doc = parse(text) as Doc | null;
  const active = entry(entry(doc?.state)?.active);
  return typeof active?.source === 'string' ? active.source : '';
}
