/** The argument handling every hvinstall subcommand shares: strict parsing, -h/--help, usage errors. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ExitCode, HvError } from '../../lib/errors.js';
import { describeParseError } from '../../lib/cli/parse-error.js';

type Options = NonNullable<ParseArgsConfig['options']>;
const HELP = { help: { type: 'boolean', short: 'h' } } as const;
type Config<O extends Options, P extends boolean> = { args: string[]; options: O & typeof HELP; allowPositionals: P; strict: true };

/**
 * Parses `argv` (strict: unknown options are errors, exit 2 with `hint`, by default the usage).
 * Undefined when --help was given: the usage has been printed and the command returns 0.
 */
export function parseCommandArgs<const O extends Options, const P extends boolean = false>(
  argv: string[],
  options: O,
  usage: string,
  allowPositionals: P = false as P,
  hint: string = usage,
): ReturnType<typeof parseArgs<Config<O, P>>> | undefined {
  const config: Config<O, P> = { args: argv, options: { ...options, ...HELP }, allowPositionals, strict: true };
  let parsed: ReturnType<typeof parseArgs<Config<O, P>>>;
  try {
    parsed = parseArgs(config);
  } catch (err) {
    throw new HvError(describeParseError(err, config.options) ?? (err as Error).message, { hint, exitCode: ExitCode.usage });
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(usage + '\n');
    return undefined;
  }
  return parsed;
}
