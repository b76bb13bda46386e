// Build-time code generation. Each generator registers here; they write into the source tree
// (files named *.generated.js) so tsc and vitest both see them.
import { readdir } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

const dir = path.dirname(fileURLToPath(import.meta.url));
for (const f of (await readdir(path.join(dir, 'generators'))).filter((n) => n.endsWith('.mjs')).sort()) {
  const mod = await import(pathToFileURL(path.join(dir, 'generators', f)).href);
  await mod.default();
}
