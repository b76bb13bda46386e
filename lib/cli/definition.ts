/**
 * The shape every program's commands are described in. The parser, --help, shell completion and the
 * man pages all read the same definition, so a flag cannot exist in one and be missing in another.
 */

/** A node:util parseArgs option, plus what completion offers for its value. parseArgs ignores `choices`. */
export interface OptionDef {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  default?: string | boolean | string[] | boolean[];
  /** The values completion offers (and that the command accepts). */
  choices?: readonly string[];
}
export type OptionDefs = Record<string, OptionDef>;

export interface CommandDef {
  name: string;
  summary: string;
  /** The text `--help` prints: it names every option in `options` (a test holds it to that). */
  usage: string;
  options: OptionDefs;
  subcommands?: CommandDef[];
}

export interface ProgramDef {
  name: string;
  summary: string;
  usage: string;
  commands: CommandDef[];
}

/** The options every program adds to each command: -h/--help. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const satisfies OptionDefs;
