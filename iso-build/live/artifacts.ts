/**
 * The build's published artifacts, named as Harvester publishes them (lib/harvester-artifacts.ts):
 * the ISO, and for PXE the kernel, the initrd (the self-contained one: the live root inside) and
 * the rootfs squashfs (the OS image, the same file as the ISO's /rootfs.squashfs), with one
 * checksum list in sha512 (Harvester's) and one in sha256 (what hvpxe's profiles.yaml wants).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, link, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { harvesterArtifactNames, isArtifactVersion } from '../../lib/harvester-artifacts.js';

export interface PublishedArtifact {
  name: string;
  bytes: number;
  sha256: string;
  sha512: string;
}

export interface ArtifactSources {
  kernel: string;
  pxeInitrd: string;
  osSquashfs: string;
  iso: string;
}

/** `sha256sum`/`sha512sum` lines for the artifacts, in name order. Pure. */
export function checksumList(artifacts: PublishedArtifact[], algo: 'sha256' | 'sha512'): string {
  return [...artifacts].sort((a, b) => (a.name < b.name ? -1 : 1)).map((a) => `${a[algo]}  ${a.name}\n`).join('');
}

async function digests(file: string): Promise<{ sha256: string; sha512: string }> {
  const h256 = createHash('sha256');
  const h512 = createHash('sha512');
  for await (const chunk of createReadStream(file)) {
    h256.update(chunk as Buffer);
    h512.update(chunk as Buffer);
  }
  return { sha256: h256.digest('hex'), sha512: h512.digest('hex') };
}

/** Hard-links (or copies, across filesystems) each source to its published name in outDir and writes the checksum lists. */
export async function publishArtifacts(outDir: string, version: string, src: ArtifactSources): Promise<{ artifacts: PublishedArtifact[]; sha256File: string; sha512File: string }> {
  const names = harvesterArtifactNames(version);
  const pairs: Array<[string, string]> = [
    [src.kernel, names.kernel],
    [src.pxeInitrd, names.initrd],
    [src.osSquashfs, names.rootfs],
    [src.iso, names.iso],
  ];
  const artifacts: PublishedArtifact[] = [];
  for (const [from, name] of pairs) {
    const dest = path.join(outDir, name);
    if (path.resolve(from) !== path.resolve(dest)) {
      await rm(dest, { force: true });
      await link(from, dest).catch(() => copyFile(from, dest));
    }
    artifacts.push({ name, bytes: (await stat(dest)).size, ...(await digests(dest)) });
  }
  const sha512File = path.join(outDir, names.sha512);
  const sha256File = path.join(outDir, names.sha256);
  await writeFileAtomic(sha512File, checksumList(artifacts, 'sha512'));
  await writeFileAtomic(sha256File, checksumList(artifacts, 'sha256'));
  return { artifacts, sha256File, sha512File };
}

/** The version for names and menus: --version, else the release file's `harvester:`, else the package's. Pure. */
export function chooseVersion(given: string | undefined, release: unknown, packageVersion: string): { version: string; from: string } {
  const fromRelease = typeof (release as { harvester?: unknown } | undefined)?.harvester === 'string' ? (release as { harvester: string }).harvester : undefined;
  const [version, from] = given ? [given, '--version'] : fromRelease ? [fromRelease, 'harvester-release.yaml'] : [`v${packageVersion}`, 'package.json'];
  if (!isArtifactVersion(version)) {
    throw new HvError(`version ${JSON.stringify(version)} (from ${from}) cannot be part of a file name`, { hint: 'use letters, digits, ".", "_", "+" and "-" (e.g. v1.8.0)', exitCode: ExitCode.usage });
  }
  return { version, from };
}
