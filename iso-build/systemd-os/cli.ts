/**
 * `node dist/iso-build/systemd-os/cli.js [--cache DIR]`: builds (or finds in the cache) the systemd
 * test OS image and prints what it is as JSON: the squashfs to install, its key, kernel, sizes, and
 * how long each part took to build in this run (absent when cached). Progress goes to stderr.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeError, ExitCode } from '../../lib/errors.js';
import { buildSystemdOs } from './image.js';
import { buildVariants } from './variants.js';

const USAGE = 'usage: node dist/iso-build/systemd-os/cli.js [--cache DIR] [--variants DIR]   (cache default: $HV_E2E_CACHE, else .e2e-cache)\n  --variants DIR  also derive the upgrade variants v2..v5 (variants.ts) as directory trees in DIR';

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { cache: { type: 'string' }, variants: { type: 'string' }, help: { type: 'boolean' } } });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  const repo = path.resolve(import.meta.dirname, '../../..');
  const cache = values.cache ?? process.env.HV_E2E_CACHE ?? path.join(repo, '.e2e-cache');
  const image = await buildSystemdOs(cache, (s) => process.stderr.write(`systemd-os: ${s}\n`));
  const variants = values.variants ? await buildVariants(image.squashfs, path.resolve(values.variants)) : undefined;
  process.stdout.write(JSON.stringify({ ...image, ...(variants ? { variants } : {}) }, null, 2) + '\n');
  return ExitCode.ok;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`iso-build/systemd-os: ${describeError(err)}\n`);
    process.exitCode = (err as { exitCode?: number }).exitCode ?? ExitCode.usage;
  },
);
