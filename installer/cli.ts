/**
 * hvinstall command dispatcher. Each subcommand lives in ./commands/<name>.ts and is imported only
 * when used, so `hvinstall validate` does not pay for the install engine's imports.
 */
import { HELP_OPTION, type CommandDef, type OptionDefs, type ProgramDef } from '../lib/cli/definition.js';
import { programUsage, runProgram, type Program } from '../lib/cli/program.js';
import { runCli } from '../lib/run-cli.js';

export interface CommandInfo {
  name: string;
  summary: string;
}

const COMMANDS: CommandInfo[] = [
  { name: 'validate', summary: 'load, merge and validate a config.yaml (file, URL or -)' },
  { name: 'preflight', summary: 'gather hardware facts and check this machine can run a node' },
  { name: 'plan', summary: 'print the partition table, images and steps an install would use' },
  { name: 'install', summary: 'install onto a disk (destroys it): partition, format, deploy, bootloader' },
  { name: 'upgrade', summary: 'upgrade an installed node to a new OS image (A/B, with boot assessment)' },
  { name: 'image', summary: 'install a node into a new disk image (qcow2 or raw) for virtual labs and clouds' },
  { name: 'console', summary: "the interactive installer (Harvester's console pages), on a terminal" },
  { name: 'render', summary: "render the installed node's configuration files into a directory" },
  { name: 'fetch', summary: 'fetch a remote config or ISO with retries and checksum verification' },
  { name: 'config-volume', summary: 'write a config ISO (label HARVESTER_CONFIG) for an install without PXE or a web server' },
];

export function usage(): string {
  return programUsage('hvinstall', COMMANDS, { subcommands: true });
}

/**
 * Each command's module, imported only when used. Literal specifiers, so a bundler follows them (the
 * live system runs the one-file bundle, scripts/generators/live-cli-bundle.mjs). `define` reads
 * validate's USAGE and OPTIONS from the config code, where they live.
 */
const COMMAND_MODULES: Record<string, () => Promise<unknown>> = {
  validate: () => import('./commands/validate.js'),
  preflight: () => import('./commands/preflight.js'),
  plan: () => import('./commands/plan.js'),
  install: () => import('./commands/install.js'),
  image: () => import('./commands/image.js'),
  upgrade: () => import('./commands/upgrade.js'),
  console: () => import('./commands/console.js'),
  render: () => import('./commands/render.js'),
  fetch: () => import('./commands/fetch.js'),
  'config-volume': () => import('./commands/config-volume.js'),
};
const DEFINED_IN: Record<string, () => Promise<unknown>> = { validate: () => import('../config/validate-command.js') };

interface CommandModule {
  USAGE: string;
  OPTIONS?: OptionDefs;
  SUBCOMMANDS?: CommandDef[];
}

/** hvinstall's full definition: loads every command module, so only completion and man pages use it. */
export async function definition(): Promise<ProgramDef> {
  const commands = await Promise.all(
    COMMANDS.map(async (c): Promise<CommandDef> => {
      const mod = (await (DEFINED_IN[c.name] ?? COMMAND_MODULES[c.name]!)()) as CommandModule;
      return { name: c.name, summary: c.summary, usage: mod.USAGE, options: { ...(mod.OPTIONS ?? {}), ...HELP_OPTION }, subcommands: mod.SUBCOMMANDS };
    }),
  );
  return { name: 'hvinstall', summary: 'install Harvester nodes from an ISO or over the network', usage: usage(), commands };
}

export const program: Program = {
  name: 'hvinstall',
  usage: usage(),
  commandNames: COMMANDS.map((c) => c.name),
  define: definition,
  async run(name, rest) {
    const mod = (await COMMAND_MODULES[name]!()) as { default: (argv: string[]) => Promise<number> };
    return mod.default(rest);
  },
};

export function main(argv: string[]): Promise<number> {
  return runProgram(program, argv);
}

if (import.meta.url === `file://${process.argv[1]}`) await runCli(main, 'hvinstall', { exitAfterVerdictMs: 5_000 });
