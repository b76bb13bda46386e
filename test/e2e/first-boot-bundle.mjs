#!/usr/bin/env node
// The image bundle the first-boot stage installs with the systemd test OS (hvinstall install
// --bundle DIR): Harvester's layout (metadata.yaml, harvester/images/*.tar.zst,
// harvester/images-lists/*.txt) with one zstd docker archive of two small images made by
// test/fixtures/preload/image-archive.mjs, its sha256 in metadata.yaml. Prints
// {"images": [...refs], "archive": "harvester/images/…", "sha256": "…"} for the harness.
// Usage: node first-boot-bundle.mjs DIR
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { writeDockerArchive } from '../fixtures/preload/image-archive.mjs';

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: node first-boot-bundle.mjs DIR\n');
  process.exit(2);
}
const images = [
  { ref: 'docker.io/hvinstall/e2e-first-boot:one', size: 64 * 1024, kind: 'text' },
  { ref: 'docker.io/hvinstall/e2e-first-boot:two', size: 96 * 1024, kind: 'mixed' },
];
const archive = 'harvester/images/e2e-first-boot.tar.zst';
const list = 'harvester/images-lists/e2e-first-boot.txt';
await mkdir(path.join(dir, 'harvester/images'), { recursive: true });
await mkdir(path.join(dir, 'harvester/images-lists'), { recursive: true });
const plain = path.join(dir, archive.replace(/\.zst$/, ''));
const out = createWriteStream(plain);
await writeDockerArchive(out, images);
out.end();
await once(out, 'finish');
execFileSync('zstd', ['-q', '-f', '--rm', '-3', plain, '-o', path.join(dir, archive)]);
const h = createHash('sha256');
for await (const c of createReadStream(path.join(dir, archive))) h.update(c);
const sha256 = h.digest('hex');
await writeFile(path.join(dir, list), images.map((i) => i.ref).join('\n') + '\n');
await writeFile(path.join(dir, 'metadata.yaml'), `images:\n  common:\n    - list: ${list}\n      archive: ${archive}\n      sha256: ${sha256}\n`);
process.stdout.write(JSON.stringify({ images: images.map((i) => i.ref), archive, sha256 }) + '\n');
