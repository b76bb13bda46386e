/**
 * Maps a request path to a file under --root, refusing anything that could leave it: `..` and `.`
 * segments, dot-files, encoded slashes/backslashes/dots, NUL and control characters, and symlinks
 * that resolve outside the root. The check is on the decoded segments and again on the real path of
 * the file actually opened.
 */
import { open, realpath, type FileHandle } from 'node:fs/promises';
import { constants, type Stats } from 'node:fs';
import path from 'node:path';

export type PathCheck = { ok: true; segments: string[] } | { ok: false; reason: string };

const MAX_PATH = 1024;

/** Checks the still-encoded path below a route prefix (e.g. what follows `/artifacts/`). Pure. */
export function checkRequestPath(encoded: string): PathCheck {
  if (encoded.length === 0) return { ok: false, reason: 'empty path' };
  if (encoded.length > MAX_PATH) return { ok: false, reason: 'path too long' };
  if (/%(2f|5c|00|2e)/i.test(encoded)) return { ok: false, reason: 'encoded slash, backslash, dot or NUL' };
  if (encoded.includes('\\') || encoded.includes('\0')) return { ok: false, reason: 'backslash or NUL' };
  const segments: string[] = [];
  for (const raw of encoded.split('/')) {
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      return { ok: false, reason: 'malformed percent-encoding' };
    }
    if (seg === '' || seg === '.' || seg === '..') return { ok: false, reason: `segment '${seg}' not allowed` };
    if (seg.startsWith('.')) return { ok: false, reason: 'hidden files are not served' };
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f/\\]/.test(seg)) return { ok: false, reason: 'control character or separator in a segment' };
    segments.push(seg);
  }
  return { ok: true, segments };
}

export interface OpenedFile {
  fh: FileHandle;
  stat: Stats;
  real: string;
}

/**
 * Opens a regular file under `rootReal` (already a real path). Returns undefined when it does not
 * exist, is not a regular file, or resolves outside the root.
 */
export async function openInsideRoot(rootReal: string, segments: string[]): Promise<OpenedFile | undefined> {
  const joined = path.join(rootReal, ...segments);
  let real: string;
  try {
    real = await realpath(joined);
  } catch {
    return undefined;
  }
  if (!real.startsWith(rootReal.endsWith(path.sep) ? rootReal : rootReal + path.sep)) return undefined;
  let fh: FileHandle;
  try {
    fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const stat = await fh.stat();
  if (!stat.isFile()) {
    await fh.close();
    return undefined;
  }
  return { fh, stat, real };
}

/** A path's real location: its realpath, or (when it does not exist yet) its nearest existing parent's, plus the rest. */
async function realLocation(p: string): Promise<string> {
  const abs = path.resolve(p);
  try {
    return await realpath(abs);
  } catch {
    const parent = path.dirname(abs);
    return parent === abs ? abs : path.join(await realLocation(parent), path.basename(abs));
  }
}

/**
 * Which of `paths` lie under the served root (followed through symlinks, so a link from inside
 * counts): each would be served to anyone who asks. Returns a message per path.
 */
export async function servedPrivatePaths(rootReal: string, paths: Array<{ what: string; path: string }>): Promise<string[]> {
  const out: string[] = [];
  for (const { what, path: p } of paths) {
    const real = await realLocation(p);
    const rel = path.relative(rootReal, real);
    if (rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))) out.push(`${what} ${p} is inside --root ${rootReal}, which hvpxe serves to anyone who asks: move it out`);
  }
  return out;
}
