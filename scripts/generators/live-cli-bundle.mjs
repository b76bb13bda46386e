// Bundles the whole hvinstall CLI (installer/cli.ts with every command, our modules, yaml, ajv and
// undici) into one ESM file, dist/installer/hvinstall.bundle.js, which the live installer system
// runs (iso-build/live/build-live.ts). Loading ~300 modules from a squashfs dominated hvinstall's
// start inside the live system (under QEMU's TCG by about 10 s per start); one file loads in about
// half the time even on a fast host. Skipped (with a notice) without esbuild: the live system then
// runs dist/installer/cli.js, as every other install does.
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { bundleForNode } from '../node-bundle.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const LIVE_CLI_BUNDLE = 'dist/installer/hvinstall.bundle.js';

export default async function generate() {
  await bundleForNode({ entry: path.join(root, 'installer/cli.ts'), outfile: path.join(root, LIVE_CLI_BUNDLE), what: 'the live system\'s hvinstall' });
}
