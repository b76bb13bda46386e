/**
 * Builds the self-contained hvagent payload (node/payload-layout.ts) as part of `make build`:
 *
 *   1. esbuild bundles agent/sea-entry.ts and everything it imports into one CommonJS file (Node 20's
 *      single-executable applications run one CommonJS script);
 *   2. `node --experimental-sea-config` turns it into a blob with V8's code cache of the bundle, so a
 *      booting node does not parse and compile 1.4 MB of JavaScript before the agent's first line. The
 *      cache is made with V8's random seed fixed: with a random one its bytes differ from run to run,
 *      and the payload must be reproducible (the seed is not part of the cache's check, so the cache
 *      is still accepted by a node started without it);
 *   3. a copy of that same node binary is stripped, gets the blob injected (postject), then its ELF
 *      interpreter and library path set to the release's own lib/ (patchelf; in this order: patchelf
 *      first leaves a binary postject corrupts);
 *   4. lib/ gets the loader and every library `ldd` names for node, from the build host;
 *   5. the unit files (hvagent.service, hvagent-console.service), hvagent's man page and bash
 *      completion (from dist/share, written by `make build` before this step), every mtime set to one
 *      epoch, and the manifest with every file's sha256.
 *
 * Deterministic: the same sources, node and host libraries give the same bytes and the same digest.
 * A build whose inputs (the bundle, node, the libraries, the units, the share files) did not change is skipped.
 * The payload is smoke-tested before it is published: its own loader runs `bin/hvagent --help`.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import {
  ELF_MACHINES,
  INTERPRETER,
  INTERPRETER_NAME,
  LIBRARY_PATH,
  MANIFEST_FILE,
  MANIFEST_FORMAT,
  PAYLOAD_BINARY,
  PAYLOAD_LIB_DIR,
  SHARE_FILES,
  UNIT_NAMES,
  payloadDigest,
  type PayloadFile,
  type PayloadManifest,
} from '../../node/payload-layout.js';
import { elfMachine } from '../../node/elf.js';

/** Node's SEA sentinel (nodejs/node doc/api/single-executable-applications.md). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** Bumped when the build recipe changes, so an old payload is rebuilt. */
const RECIPE = 'hvagent-payload-recipe-4';
/** V8's random seed while the code cache is made: any fixed value makes the cache's bytes reproducible. */
const CODE_CACHE_SEED = 1;
/** What node prints when V8 refuses a single-executable application's code cache. */
const CODE_CACHE_REJECTED = 'Code cache data rejected';
/** Every file's mtime (2023-11-14): fixed so copies can be compared and resumed by size and mtime. */
export const PAYLOAD_EPOCH = 1_700_000_000;

export interface BuildPayloadOptions {
  repoDir: string;
  /** Default <repo>/build/hvagent-payload. */
  outDir?: string;
  /** The node binary to embed (default: the one running this build). */
  node?: string;
}

export interface BuildPayloadResult {
  dir: string;
  manifest: PayloadManifest;
  /** True when the existing payload was already built from the same inputs. */
  reused: boolean;
}

export const defaultPayloadDir = (repoDir: string): string => path.join(repoDir, 'build/hvagent-payload');

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** The shared libraries (and loader) `ldd` names for a binary: absolute paths. Pure over ldd's output. */
export function parseLdd(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const lib = /=>\s*(\/\S+)/.exec(line)?.[1] ?? /^\s*(\/\S+)\s+\(/.exec(line)?.[1];
    if (lib && !out.includes(lib)) out.push(lib);
  }
  return out;
}

async function bundleAgent(repoDir: string, outFile: string): Promise<void> {
  const esbuild = await import('esbuild').catch(() => {
    throw new HvError('esbuild is not installed: the hvagent payload is built with it', { hint: 'run npm ci (make build does)', exitCode: ExitCode.usage });
  });
  await esbuild.build({
    entryPoints: [path.join(repoDir, 'agent/sea-entry.ts')],
    outfile: outFile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    // import.meta is only read by the ESM entry checks, which are false in the bundle by design.
    logOverride: { 'empty-import-meta': 'silent' },
    logLevel: 'error',
  });
}

async function fileRecord(root: string, rel: string): Promise<PayloadFile> {
  const full = path.join(root, rel);
  const [buf, st] = await Promise.all([readFile(full), stat(full)]);
  return { path: rel, mode: st.mode & 0o7777, size: st.size, sha256: sha256(buf) };
}

/** What a payload is built from, read once: the build key says whether an existing payload is theirs. */
interface PayloadInputs {
  version: string;
  bundle: string;
  units: Array<{ name: string; text: Buffer }>;
  shares: Array<{ rel: string; text: Buffer }>;
  nodeBytes: Buffer;
  nodeVersion: string;
  arch: 'x86_64';
  libBytes: Array<{ name: string; bytes: Buffer; mode: number }>;
  buildKey: string;
}

async function readInputs(repoDir: string, node: string, work: string): Promise<PayloadInputs> {
  const version = (JSON.parse(await readFile(path.join(repoDir, 'package.json'), 'utf8')) as { version: string }).version;
  const bundle = path.join(work, 'hvagent.cjs');
  await bundleAgent(repoDir, bundle);
  const units = await Promise.all(UNIT_NAMES.map(async (name) => ({ name, text: await readFile(path.join(repoDir, 'agent', name)) })));
  const shares = await Promise.all(
    SHARE_FILES.map(async (rel) => ({
      rel,
      text: await readFile(path.join(repoDir, 'dist', rel)).catch(() => {
        throw new HvError(`dist/${rel} is missing: the payload carries hvagent's man page and completion`, { hint: 'run make build (scripts/write-share.mjs writes dist/share)', exitCode: ExitCode.usage });
      }),
    })),
  );
  const nodeBytes = await readFile(node);
  const arch = ELF_MACHINES[elfMachine(nodeBytes.subarray(0, 64)) ?? -1];
  if (arch !== 'x86_64') throw new HvError(`${node} is not an x86-64 ELF binary`, { hint: 'the payload embeds the node that runs the build', exitCode: ExitCode.usage });
  const libs = parseLdd((await run('ldd', [node])).stdout);
  if (!libs.some((l) => path.basename(l) === INTERPRETER_NAME)) throw new HvError(`ldd ${node} names no ${INTERPRETER_NAME}`, { exitCode: ExitCode.usage });
  const libBytes = await Promise.all(libs.map(async (l) => ({ name: path.basename(l), bytes: await readFile(l), mode: (await stat(l)).mode & 0o7777 })));
  const nodeVersion = (await run(node, ['--version'])).stdout.trim();
  const buildKey = sha256(
    [RECIPE, version, nodeVersion, sha256(await readFile(bundle)), sha256(nodeBytes), ...units.map((u) => `${u.name}:${sha256(u.text)}`), ...shares.map((f) => `${f.rel}:${sha256(f.text)}`), ...libBytes.map((l) => `${l.name}:${sha256(l.bytes)}`)].join('\n'),
  );
  return { version, bundle, units, shares, nodeBytes, nodeVersion, arch, libBytes, buildKey };
}

/** The node binary with the agent's SEA blob injected, stripped, its loader and libraries the payload's own. */
async function writeSeaBinary(node: string, work: string, inputs: PayloadInputs, binary: string): Promise<void> {
  const seaConfig = path.join(work, 'sea-config.json');
  const blob = path.join(work, 'sea.blob');
  // Relative names: the blob records the main script's path, which must not be the random work dir.
  await writeFile(seaConfig, JSON.stringify({ main: path.basename(inputs.bundle), output: path.basename(blob), disableExperimentalSEAWarning: true, useCodeCache: true, useSnapshot: false }));
  await run(node, [`--random-seed=${CODE_CACHE_SEED}`, '--experimental-sea-config', path.basename(seaConfig)], { cwd: work, timeoutMs: 120_000 });
  await writeFile(binary, inputs.nodeBytes, { mode: 0o755 });
  await run('strip', ['--strip-all', binary], { timeoutMs: 120_000 });
  // @ts-expect-error postject ships no type declarations
  const { inject } = (await import('postject')) as { inject: (file: string, name: string, data: Buffer, o: { sentinelFuse: string }) => Promise<void> };
  const blobBytes = await readFile(blob);
  await quietly(() => inject(binary, 'NODE_SEA_BLOB', blobBytes, { sentinelFuse: SEA_FUSE }));
  await run('patchelf', ['--set-interpreter', INTERPRETER, '--set-rpath', LIBRARY_PATH, binary], { timeoutMs: 120_000 });
  await chmod(binary, 0o755);
}

/** The libraries, units and shared files next to the binary. */
async function writeStagedFiles(stage: string, inputs: PayloadInputs): Promise<void> {
  for (const l of inputs.libBytes) await writeFile(path.join(stage, PAYLOAD_LIB_DIR, l.name), l.bytes, { mode: l.mode & 0o755 });
  for (const u of inputs.units) await writeFile(path.join(stage, u.name), u.text, { mode: 0o644 });
  for (const f of inputs.shares) {
    await mkdir(path.join(stage, path.dirname(f.rel)), { recursive: true });
    await writeFile(path.join(stage, f.rel), f.text, { mode: 0o644 });
  }
}

/** The binary's own loader and libraries, not the host's: what the node will run. */
async function smokeTest(stage: string, binary: string): Promise<void> {
  const smoke = await run(path.join(stage, PAYLOAD_LIB_DIR, INTERPRETER_NAME), ['--library-path', path.join(stage, PAYLOAD_LIB_DIR), binary, '--help'], {
    allowFailure: true,
    timeoutMs: 60_000,
  });
  if (smoke.exitCode !== 0 || !smoke.stdout.includes('usage: hvagent')) {
    throw new HvError(`the built hvagent does not run: exit ${smoke.exitCode}: ${smoke.stderr.trim().slice(0, 500)}`, { where: binary, exitCode: ExitCode.usage });
  }
  // Node only warns when V8 refuses the embedded cache: the agent would still run, compiling at every start.
  if (smoke.stderr.includes(CODE_CACHE_REJECTED)) {
    throw new HvError(`the built hvagent's V8 code cache is rejected by its own node: ${smoke.stderr.trim().slice(0, 500)}`, {
      where: binary,
      hint: 'the node that made the blob must be the one in the payload, run without V8 flags that change the cache check',
      exitCode: ExitCode.usage,
    });
  }
}

/** The manifest of every staged file, written; every file and directory stamped with PAYLOAD_EPOCH. */
async function writeManifest(stage: string, inputs: PayloadInputs): Promise<PayloadManifest> {
  const rels = [PAYLOAD_BINARY, ...UNIT_NAMES, ...SHARE_FILES, ...inputs.libBytes.map((l) => `${PAYLOAD_LIB_DIR}/${l.name}`)].sort();
  const files: PayloadFile[] = [];
  for (const rel of rels) files.push(await fileRecord(stage, rel));
  const manifest: PayloadManifest = {
    format: MANIFEST_FORMAT,
    name: 'hvagent',
    version: inputs.version,
    node: inputs.nodeVersion,
    arch: { name: inputs.arch, elfMachine: 62 },
    interpreter: INTERPRETER,
    files,
    digest: payloadDigest(files),
    buildKey: inputs.buildKey,
  };
  await writeFile(path.join(stage, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o644 });
  const when = new Date(PAYLOAD_EPOCH * 1000);
  for (const rel of [...rels, MANIFEST_FILE]) await utimes(path.join(stage, rel), when, when);
  const shareDirs = [...new Set(SHARE_FILES.flatMap((f) => f.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'))))];
  for (const d of ['bin', PAYLOAD_LIB_DIR, ...shareDirs.sort().reverse(), '.']) await utimes(path.join(stage, d), when, when);
  return manifest;
}

export async function buildAgentPayload(opts: BuildPayloadOptions): Promise<BuildPayloadResult> {
  const repoDir = path.resolve(opts.repoDir);
  const outDir = path.resolve(opts.outDir ?? defaultPayloadDir(repoDir));
  const node = opts.node ?? process.execPath;
  await mkdir(path.dirname(outDir), { recursive: true });
  const work = await mkdtemp(path.join(path.dirname(outDir), '.hvagent-payload-build-'));
  try {
    const inputs = await readInputs(repoDir, node, work);
    const existing = await readFile(path.join(outDir, MANIFEST_FILE), 'utf8').then((t) => JSON.parse(t) as PayloadManifest, () => undefined);
    if (existing?.buildKey === inputs.buildKey && (await intact(outDir, existing))) return { dir: outDir, manifest: existing, reused: true };

    const stage = path.join(work, 'payload');
    await mkdir(path.join(stage, 'bin'), { recursive: true });
    await mkdir(path.join(stage, PAYLOAD_LIB_DIR), { recursive: true });
    const binary = path.join(stage, PAYLOAD_BINARY);
    await writeSeaBinary(node, work, inputs, binary);
    await writeStagedFiles(stage, inputs);
    await smokeTest(stage, binary);
    const manifest = await writeManifest(stage, inputs);

    await rm(outDir, { recursive: true, force: true });
    await rename(stage, outDir);
    return { dir: outDir, manifest, reused: false };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Every file of the manifest is there with its size and mode (a cheap check before reusing a build). */
async function intact(dir: string, m: PayloadManifest): Promise<boolean> {
  for (const f of m.files) {
    const st = await stat(path.join(dir, f.path)).catch(() => undefined);
    if (!st || st.size !== f.size || (st.mode & 0o7777) !== f.mode) return false;
  }
  return true;
}

/** postject (LIEF) prints harmless section-name warnings on stdout; keep the build's output clean. */
async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const log = console.log;
  const warn = console.warn;
  console.log = () => undefined;
  console.warn = () => undefined;
  try {
    return await fn();
  } finally {
    console.log = log;
    console.warn = warn;
  }
}
