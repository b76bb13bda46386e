/** Exit codes shared by every CLI (docs/architecture.md): 0 ok, 1 a check failed, 2 usage/environment, 3 install failed. */
export const ExitCode = {
  ok: 0,
  checkFailed: 1,
  usage: 2,
  installFailed: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** The exit-code table every program's help ends with (one wording, one meaning, for every command). */
export const EXIT_CODES_LINE = 'Exit codes: 0 ok, 1 a check failed, 2 usage or environment error, 3 the install failed.';

/**
 * An error meant for a person: what went wrong, where, and what to do.
 * CLIs print `message`, then `where` and `hint` on their own lines, never a stack trace.
 */
export class HvError extends Error {
  readonly where?: string;
  readonly hint?: string;
  readonly exitCode: ExitCode;

  constructor(message: string, opts: { where?: string; hint?: string; exitCode?: ExitCode; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'HvError';
    this.where = opts.where;
    this.hint = opts.hint;
    this.exitCode = opts.exitCode ?? ExitCode.usage;
  }
}

/** Renders any thrown value as the lines a CLI prints to stderr. */
export function describeError(err: unknown): string {
  if (err instanceof HvError) {
    const lines = [`error: ${err.message}`];
    if (err.where) lines.push(`  where: ${err.where}`);
    if (err.hint) lines.push(`  hint: ${err.hint}`);
    return lines.join('\n');
  }
  if (err instanceof Error) return `error: ${err.message}`;
  return `error: ${String(err)}`;
}
