// Bundles the whole hvinstall CLI (installer/cli.ts with every command, our modules, yaml, ajv and
// undici) into one ESM file, dist/installer/hvinstall.bundle.js, which the live installer system
// runs (iso-build/live/build-live.ts). Loading ~300 modules from a squashfs dominated hvinstall's
// start inside the live system (under QEMU's TCG by about 10 s per start); one file loads in about
// half the time even on a fast host. Skipped (with a notice) without esbuild: the live system then
// runs dist/installer/cli.js, as every other install does.
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const LIVE_CLI_BUNDLE = 'dist/installer/hvinstall.bundle.js';

export default async function generate() {
  const outfile = path.join(root, LIVE_CLI_BUNDLE);
  await rm(outfile, { force: true });
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    console.warn('generate: esbuild is not installed; the live system runs hvinstall unbundled (slower start)');
    return;
  }
  await esbuild.build({
    entryPoints: [path.join(root, 'installer/cli.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    // yaml, ajv and undici are CommonJS: give the bundle a require() for the builtins they need.
    banner: { js: "import { createRequire as __hvCreateRequire } from 'node:module'; const require = __hvCreateRequire(import.meta.url);" },
    logLevel: 'warning',
  });
}
