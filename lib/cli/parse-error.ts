/**
 * node:util parseArgs's errors in a person's words: which option or argument, what is wrong, and
 * the nearest known option for a typo (`--jsn` → `--json`). Node's own text (quoting rules for
 * positionals starting with '-') is for programmers; this is what a command prints instead. Pure.
 */
import { suggest } from './suggest.js';
import type { OptionDefs } from './definition.js';

function known(options: OptionDefs): string[] {
  return Object.entries(options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
}

/** The message for a parseArgs error, or undefined when it is not one. */
export function describeParseError(err: unknown, options: OptionDefs): string | undefined {
  const e = err as { code?: string; message?: string };
  const quoted = /'([^']*)'/.exec(e.message ?? '')?.[1];
  switch (e.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const given = (quoted ?? '').split('=')[0]!;
      const near = suggest(given, known(options));
      return `unknown option ${given}${near ? ` (did you mean ${near}?)` : ''}`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const option = /'(-[^ ']+)/.exec(e.message ?? '')?.[1] ?? 'an option';
      return /argument missing/.test(e.message ?? '') ? `${option} needs a value` : `${option} takes no value`;
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument '${quoted ?? ''}': this command takes no arguments besides its options`;
    default:
      return undefined;
  }
}
