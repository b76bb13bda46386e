/**
 * Where the self-contained hvagent lives on an installed node, and the manifest of its payload.
 *
 * The payload is a release directory: `bin/hvagent` (a Node single-executable application: Node's
 * own binary with the bundled agent injected), `lib/` (the loader and shared libraries that binary
 * needs, taken from the build host), `hvagent.service`, and `hvagent-payload.json` (this manifest:
 * every file's mode, size and sha256). Nothing on the node but the kernel is used to start it:
 * the binary's ELF interpreter and library path point into the release itself through
 * `current`, so it runs on any x86-64 Elemental image (SL Micro, Debian, …) whatever its glibc,
 * and even in a chroot holding nothing but COS_PERSISTENT at /usr/local. Beside hvagent.service the
 * release carries hvagent-console.service (the node's status screen on tty1): both are enabled.
 *
 * On the node (COS_PERSISTENT is mounted at /usr/local):
 *   /usr/local/lib/hvagent/releases/<id>/…      one complete release per id (the digest's head)
 *   /usr/local/lib/hvagent/current -> releases/<id>   switched by one rename: the only moment a
 *                                                     new agent replaces the old
 *   /usr/local/bin/hvagent -> ../lib/hvagent/current/bin/hvagent
 *   /etc/systemd/system/<unit> -> /usr/local/lib/hvagent/current/<unit>
 *   /etc/systemd/system/multi-user.target.wants/<unit> -> /etc/systemd/system/<unit>
 *   /usr/local/share/man/man1/hvagent.1 -> ../../../lib/hvagent/current/share/man/man1/hvagent.1
 *   /usr/local/share/bash-completion/completions/hvagent -> ../../../lib/hvagent/current/share/…
 * for each of UNIT_NAMES and SHARE_FILES. The /etc links live in the persistent /etc/systemd bind directory, which Elemental refreshes
 * from the image at every boot without deleting what only the bind directory holds; they never change
 * between releases, so the unit, the binary and its libraries switch together with `current`.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../lib/errors.js';

export const MANIFEST_FILE = 'hvagent-payload.json';
export const UNIT_NAME = 'hvagent.service';
export const CONSOLE_UNIT_NAME = 'hvagent-console.service';
/** The units a payload carries (agent/<name>) and the install links and enables. */
export const UNIT_NAMES = [UNIT_NAME, CONSOLE_UNIT_NAME] as const;
export type UnitName = (typeof UNIT_NAMES)[number];
export const MANIFEST_FORMAT = 1;
/**
 * The man page and bash completion the payload carries (make build generates them into dist/share
 * from the same definitions as --help), linked on the node under /usr/local/share, which man-db's
 * and bash-completion's default search paths include.
 */
export const SHARE_FILES = ['share/man/man1/hvagent.1', 'share/bash-completion/completions/hvagent'] as const;
export type ShareFile = (typeof SHARE_FILES)[number];

/** Node paths. */
export const AGENT_HOME = '/usr/local/lib/hvagent';
export const CURRENT_LINK = `${AGENT_HOME}/current`;
export const LAUNCHER = '/usr/local/bin/hvagent';
export const LAUNCHER_TARGET = '../lib/hvagent/current/bin/hvagent';
export const PAYLOAD_BINARY = 'bin/hvagent';
export const PAYLOAD_LIB_DIR = 'lib';
export const INTERPRETER_NAME = 'ld-linux-x86-64.so.2';
/** The ELF interpreter and library path baked into bin/hvagent: through `current`, never the image's. */
export const INTERPRETER = `${CURRENT_LINK}/${PAYLOAD_LIB_DIR}/${INTERPRETER_NAME}`;
export const LIBRARY_PATH = `${CURRENT_LINK}/${PAYLOAD_LIB_DIR}`;
/** Where a unit is linked on the node (the persistent /etc/systemd), what the link points to, and its enable link. */
export const unitNodePath = (unit: UnitName): string => `/etc/systemd/system/${unit}`;
export const unitLinkTarget = (unit: UnitName): string => `${CURRENT_LINK}/${unit}`;
export const wantsNodePath = (unit: UnitName): string => `/etc/systemd/system/multi-user.target.wants/${unit}`;

/** Where a share file is linked on the node, and the link's target: relative, as the launcher's. */
export const shareNodePath = (f: ShareFile): string => `/usr/local/${f}`;
export const shareLinkTarget = (f: ShareFile): string => path.posix.relative(path.posix.dirname(shareNodePath(f)), `${CURRENT_LINK}/${f}`);

/** The architecture a payload is built for: uname -m and the ELF e_machine of its binaries. */
export interface PayloadArch {
  name: 'x86_64' | 'aarch64';
  elfMachine: number;
}
export const ELF_MACHINES: Record<number, PayloadArch['name']> = { 62: 'x86_64', 183: 'aarch64' };

export interface PayloadFile {
  /** Relative to the release directory, '/'-separated. */
  path: string;
  /** Permission bits. */
  mode: number;
  size: number;
  sha256: string;
}

export interface PayloadManifest {
  format: typeof MANIFEST_FORMAT;
  name: 'hvagent';
  /** package.json's version. */
  version: string;
  /** The Node.js inside bin/hvagent. */
  node: string;
  arch: PayloadArch;
  interpreter: string;
  files: PayloadFile[];
  /** sha256 over the files (payloadDigest); its first 16 hex digits name the release directory. */
  digest: string;
  /** What the build was made from (skips a rebuild when unchanged); not part of the digest. */
  buildKey?: string;
}

/** sha256 over every file's path, mode and content digest, in path order. Pure. */
export function payloadDigest(files: PayloadFile[]): string {
  const h = createHash('sha256');
  for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    h.update(`${f.path}\0${f.mode.toString(8)}\0${f.size}\0${f.sha256}\n`);
  }
  return h.digest('hex');
}

export function releaseId(manifest: Pick<PayloadManifest, 'digest'>): string {
  return manifest.digest.slice(0, 16);
}

/** Why a parsed manifest is unusable, or undefined. Pure. */
export function manifestProblem(m: unknown): string | undefined {
  const doc = m as Partial<PayloadManifest> | undefined;
  if (!doc || typeof doc !== 'object') return 'not a JSON object';
  if (doc.format !== MANIFEST_FORMAT) return `format ${JSON.stringify(doc.format)}, expected ${MANIFEST_FORMAT}`;
  if (doc.name !== 'hvagent') return `name ${JSON.stringify(doc.name)}, expected "hvagent"`;
  if (!doc.arch || !ELF_MACHINES[doc.arch.elfMachine]) return 'no known architecture (arch.elfMachine)';
  if (!Array.isArray(doc.files) || doc.files.length === 0) return 'no files';
  for (const f of doc.files) {
    if (typeof f?.path !== 'string' || !f.path || f.path.startsWith('/') || f.path.split('/').some((s) => s === '..' || s === '' || s === '.')) {
      return `a file path that is not relative and clean: ${JSON.stringify(f?.path)}`;
    }
    if (typeof f.size !== 'number' || typeof f.mode !== 'number' || !/^[0-9a-f]{64}$/.test(String(f.sha256))) return `${f.path}: size, mode or sha256 missing`;
  }
  for (const need of [PAYLOAD_BINARY, ...UNIT_NAMES, ...SHARE_FILES, `${PAYLOAD_LIB_DIR}/${INTERPRETER_NAME}`]) {
    if (!doc.files.some((f) => f.path === need)) return `it has no ${need}`;
  }
  if (doc.digest !== payloadDigest(doc.files)) return 'its digest does not match its file list';
  return undefined;
}

/** Reads and checks DIR/hvagent-payload.json. */
export async function readPayloadManifest(dir: string): Promise<PayloadManifest> {
  const file = path.join(dir, MANIFEST_FILE);
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new HvError(code === 'ENOENT' ? `${dir} is not an hvagent payload: it has no ${MANIFEST_FILE}` : `cannot read ${file}: ${(err as Error).message}`, {
      where: file,
      hint: 'pass the directory `make build` writes (build/hvagent-payload), or --agent none',
      exitCode: ExitCode.usage,
    });
  }
  const problem = manifestProblem(parsed);
  if (problem) throw new HvError(`${file} is not a usable hvagent payload manifest: ${problem}`, { where: file, hint: 'rebuild it with make build', exitCode: ExitCode.usage });
  return parsed as PayloadManifest;
}

/** The payload bytes and files (for sizes in the plan, progress and the report). */
export function payloadSize(m: PayloadManifest): { files: number; bytes: number } {
  return { files: m.files.length, bytes: m.files.reduce((n, f) => n + f.size, 0) };
}
