/**
 * `node dist/iso-build/live/cli.js --out DIR [--cache DIR] [--kernel-package PKG]`: builds the live
 * installer (vmlinuz, initrd.zst, os.squashfs) into DIR and prints what it built as JSON.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeError, ExitCode, HvError } from '../../lib/errors.js';
import { buildLiveInstaller } from './build-live.js';

const USAGE = 'usage: node dist/iso-build/live/cli.js --out DIR [--cache DIR] [--kernel-package PKG] [--repo DIR]';

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { out: { type: 'string' }, cache: { type: 'string' }, 'kernel-package': { type: 'string' }, repo: { type: 'string' }, help: { type: 'boolean' } },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  if (!values.out) throw new HvError('--out is required', { hint: USAGE, exitCode: ExitCode.usage });
  const repo = values.repo ?? path.resolve(import.meta.dirname, '../../..');
  const built = await buildLiveInstaller({
    repoDir: repo,
    outDir: values.out,
    cacheDir: values.cache ?? path.join(repo, '.e2e-cache'),
    kernelPackage: values['kernel-package'],
  });
  process.stdout.write(JSON.stringify(built, null, 2) + '\n');
  return ExitCode.ok;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`iso-build/live: ${describeError(err)}\n`);
    process.exitCode = (err as { exitCode?: number }).exitCode ?? ExitCode.usage;
  },
);
