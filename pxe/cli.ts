/** hvpxe: the PXE/HTTP boot server (issue #7 fills in the commands). */
import { runCli } from '../installer/cli.js';
import { ExitCode } from '../lib/errors.js';

const USAGE = `usage: hvpxe <init|serve|render-dnsmasq|render-ipxe> [options]`;

export async function main(argv: string[]): Promise<number> {
  process.stdout.write(USAGE + '\n');
  return argv.length === 0 || argv[0] === '--help' ? ExitCode.ok : ExitCode.usage;
}

if (import.meta.url === `file://${process.argv[1]}`) await runCli(main, 'hvpxe');
