/** hvagent: the resident node agent (issue #6 fills in the guards). */
import { runCli } from '../installer/cli.js';
import { ExitCode } from '../lib/errors.js';

const USAGE = `usage: hvagent <run|once|status> [options]

  run    [--guard NAME]... [--root DIR]   run the guards as a daemon (SIGTERM stops cleanly)
  once   [--guard NAME]... [--root DIR]   one pass; exit code says whether every guard succeeded
  status [--json] [--root DIR]            each guard's phase, last error and next retry

guards: network-online, image-preload, registries, rke2, vip, longhorn-disk, promotion`;

export async function main(argv: string[]): Promise<number> {
  process.stdout.write(USAGE + '\n');
  return argv.length === 0 || argv[0] === '--help' ? ExitCode.ok : ExitCode.usage;
}

if (import.meta.url === `file://${process.argv[1]}`) await runCli(main, 'hvagent');
