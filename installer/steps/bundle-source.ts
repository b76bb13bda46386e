/** Where the install's image bundle comes from (`--bundle`, the ISO of automatic mode, the live ISO). */
import { stat } from 'node:fs/promises';
import { HvError, ExitCode } from '../../lib/errors.js';
import type { IsoParts } from '../remote/iso-stream.js';

/** dracut's dmsquash-live mounts the booted ISO at /run/initramfs/live. */
export const LIVE_BUNDLE_DIR = '/run/initramfs/live/bundle';

export type BundleSource =
  | { kind: 'dir'; path: string; origin: string }
  | { kind: 'none'; why: string }
  /** The install ISO did not fit in RAM: its bundle is written straight from the ISO's stream (its sha256 checked then). */
  | { kind: 'iso-stream'; parts: IsoParts; sha256?: string; origin: string };

export type PathKind = 'dir' | 'other' | 'missing';

export async function pathKind(p: string): Promise<PathKind> {
  const s = await stat(p).catch(() => undefined);
  return !s ? 'missing' : s.isDirectory() ? 'dir' : 'other';
}

/**
 * The bundle: `--bundle DIR` (must be a directory: a usage error otherwise), `--bundle none`, else
 * the opened install ISO's bundle/ (automatic mode), else the live ISO's, else none.
 */
export async function resolveBundleSource(
  arg: string | undefined,
  opts: { isoBundle?: string; liveDir?: string; kind?: (p: string) => Promise<PathKind> } = {},
): Promise<BundleSource> {
  const kind = opts.kind ?? pathKind;
  if (arg === 'none') return { kind: 'none', why: '--bundle none' };
  if (arg !== undefined) {
    const k = await kind(arg);
    if (k !== 'dir') {
      throw new HvError(`--bundle ${arg} ${k === 'missing' ? 'does not exist' : 'is not a directory'}`, {
        hint: 'pass the image bundle directory (the ISO\'s bundle/, with metadata.yaml and the image archives), or --bundle none',
        exitCode: ExitCode.usage,
      });
    }
    return { kind: 'dir', path: arg, origin: '--bundle' };
  }
  if (opts.isoBundle && (await kind(opts.isoBundle)) === 'dir') return { kind: 'dir', path: opts.isoBundle, origin: 'the install ISO' };
  const live = opts.liveDir ?? LIVE_BUNDLE_DIR;
  if ((await kind(live)) === 'dir') return { kind: 'dir', path: live, origin: 'the live ISO' };
  return {
    kind: 'none',
    why: opts.isoBundle !== undefined ? `the install ISO has no bundle/ and ${live} does not exist` : `no --bundle given and ${live} does not exist`,
  };
}
