// One esbuild setup for the Node bundles the build writes (the live system's hvinstall, and
// hvinstall validate's own): one ESM file for Node 20, minified, with a require() for the CommonJS
// packages in it (yaml, ajv, undici). Without esbuild it says so and returns false: the callers'
// programs then run unbundled, only slower to start.
import { rm } from 'node:fs/promises';

export async function bundleForNode({ entry, outfile, what, ...extra }) {
  await rm(outfile, { force: true });
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    console.warn(`generate: esbuild is not installed; ${what} runs unbundled (slower start)`);
    return false;
  }
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    banner: { js: "import { createRequire as __hvCreateRequire } from 'node:module'; const require = __hvCreateRequire(import.meta.url);" },
    logLevel: 'warning',
    ...extra,
  });
  return true;
}
