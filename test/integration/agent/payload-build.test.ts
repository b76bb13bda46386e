/**
 * The hvagent payload build (agent/payload/build.ts) with the real tools (esbuild, node's SEA blob,
 * strip, postject, patchelf): two builds of the same tree into two directories give the same bytes,
 * though the binary carries V8's code cache (made with a random seed of V8's own unless the build
 * fixes it), and the built binary, run through the payload's own loader, takes that cache: node
 * prints "Code cache data rejected" when it does not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildAgentPayload } from '../../../agent/payload/build.js';
import { INTERPRETER_NAME, PAYLOAD_BINARY, PAYLOAD_LIB_DIR, type PayloadManifest } from '../../../node/payload-layout.js';

const REPO = path.resolve(import.meta.dirname, '../../..');
/** nodejs/node src/node_sea.h: the blob's magic, then its flags; kUseCodeCache is 1 << 2. */
const SEA_MAGIC = 0x0143da20;
const SEA_USE_CODE_CACHE = 1 << 2;

/**
 * The flags of the SEA blob postject put in an ELF note named NODE_SEA_BLOB: namesz, descsz and type
 * (4 bytes each), the name padded to 4, then the blob. The name alone also occurs in node's code.
 */
function seaBlobFlags(binary: Buffer): number | undefined {
  const name = Buffer.from('NODE_SEA_BLOB\0');
  for (let i = binary.indexOf(name); i >= 12; i = binary.indexOf(name, i + 1)) {
    if (binary.readUInt32LE(i - 12) !== name.length) continue;
    const blob = i + Math.ceil(name.length / 4) * 4;
    if (binary.readUInt32LE(blob) === SEA_MAGIC) return binary.readUInt32LE(blob + 4);
  }
  return undefined;
}
const exec = promisify(execFile);

let work: string;
let first: PayloadManifest;
let second: PayloadManifest;
beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'hv-payload-build-'));
  first = (await buildAgentPayload({ repoDir: REPO, outDir: path.join(work, 'a') })).manifest;
  second = (await buildAgentPayload({ repoDir: REPO, outDir: path.join(work, 'b') })).manifest;
}, 180_000);
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the hvagent payload build', () => {
  it('gives the same files, byte for byte, when built twice from the same tree', async () => {
    expect(second.digest).toBe(first.digest);
    expect(second.files).toEqual(first.files);
    const [a, b] = await Promise.all([readFile(path.join(work, 'a', PAYLOAD_BINARY)), readFile(path.join(work, 'b', PAYLOAD_BINARY))]);
    expect(a.equals(b)).toBe(true);
  });

  it('its binary carries a code cache in its SEA blob', async () => {
    const flags = seaBlobFlags(await readFile(path.join(work, 'a', PAYLOAD_BINARY)));
    expect(flags, 'no NODE_SEA_BLOB note with the SEA magic').toBeDefined();
    expect((flags ?? 0) & SEA_USE_CODE_CACHE).toBe(SEA_USE_CODE_CACHE);
  });

  it('its binary takes its own code cache: node warns of no rejection, and it runs', async () => {
    const dir = path.join(work, 'a');
    const { stdout, stderr } = await exec(path.join(dir, PAYLOAD_LIB_DIR, INTERPRETER_NAME), ['--library-path', path.join(dir, PAYLOAD_LIB_DIR), path.join(dir, PAYLOAD_BINARY), '--help'], {
      timeout: 60_000,
    });
    expect(stdout).toContain('usage: hvagent');
    expect(stderr).not.toMatch(/code cache/i);
  });
});
