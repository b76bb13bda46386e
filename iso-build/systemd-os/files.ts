/** Where the test OS's own files (iso-build/systemd-os/files: init, yip reader, boot config, units) are, from the sources or from dist/. */
import { existsSync } from 'node:fs';
import path from 'node:path';

const CANDIDATES = [path.join(import.meta.dirname, 'files'), path.resolve(import.meta.dirname, '../../../iso-build/systemd-os/files')];

export const FILES_DIR = CANDIDATES.find((d) => existsSync(path.join(d, 'init'))) ?? CANDIDATES[0]!;

export function systemdOsFile(name: string): string {
  return path.join(FILES_DIR, name);
}

/** The rke2 stand-in (the project's one; test/fixtures/rke2-standin), which the image carries for its rke2-server.service. */
export const RKE2_STANDIN = [path.resolve(import.meta.dirname, '../../test/fixtures/rke2-standin/rke2-standin.mjs'), path.resolve(import.meta.dirname, '../../../test/fixtures/rke2-standin/rke2-standin.mjs')].find((f) => existsSync(f)) ?? path.resolve(import.meta.dirname, '../../../test/fixtures/rke2-standin/rke2-standin.mjs');
