/**
 * hvinstall command dispatcher. Each subcommand lives in ./commands/<name>.ts and is imported only
 * when used, so `hvinstall validate` does not pay for the install engine's imports.
 */
import { ExitCode } from '../lib/errors.js';

export interface CommandInfo {
  name: string;
  summary: string;
}

const COMMANDS: CommandInfo[] = [
  { name: 'validate', summary: 'load, merge and validate a config.yaml (file, URL or -)' },
  { name: 'preflight', summary: 'gather hardware facts and check this machine can run a node' },
  { name: 'plan', summary: 'print the partition table, images and steps an install would use' },
  { name: 'install', summary: 'install onto a disk (destroys it): partition, format, deploy, bootloader' },
  { name: 'image', summary: 'install a node into a new disk image (qcow2 or raw) for virtual labs and clouds' },
  { name: 'console', summary: "the interactive installer (Harvester's console pages), on a terminal" },
  { name: 'render', summary: "render the installed node's configuration files into a directory" },
  { name: 'fetch', summary: 'fetch a remote config or ISO with retries and checksum verification' },
];

export function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'usage: hvinstall <command> [options]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    "Run 'hvinstall <command> --help' for a command's options.",
    'Exit codes: 0 ok, 1 a check failed, 2 usage or environment error, 3 the install failed.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage() + '\n');
    return name ? ExitCode.ok : ExitCode.usage;
  }
  if (name === '--version') {
    process.stdout.write('hvinstall 0.1.0\n');
    return ExitCode.ok;
  }
  if (!COMMANDS.some((c) => c.name === name)) {
    process.stderr.write(`hvinstall: unknown command '${name}'\n\n${usage()}\n`);
    return ExitCode.usage;
  }
  const mod = (await import(new URL(`./commands/${name}.js`, import.meta.url).href)) as {
    default: (argv: string[]) => Promise<number>;
  };
  return mod.default(rest);
}

export { runCli } from '../lib/run-cli.js';
import { runCli } from '../lib/run-cli.js';

if (import.meta.url === `file://${process.argv[1]}`) await runCli(main, 'hvinstall');
