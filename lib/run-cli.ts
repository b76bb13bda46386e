/** Runs a CLI main and turns every thrown error into a message and an exit code, never a stack trace. */
import { describeError, ExitCode } from './errors.js';
import { Redactor } from './redact.js';

export async function runCli(mainFn: (argv: string[]) => Promise<number>, prog: string): Promise<void> {
  try {
    process.exitCode = await mainFn(process.argv.slice(2));
  } catch (err) {
    // Registered secrets are the commands' business; URL credentials are redacted here for every error.
    process.stderr.write(`${prog}: ${new Redactor().redactString(describeError(err))}\n`);
    if (process.env.HV_DEBUG && err instanceof Error && err.stack) process.stderr.write(err.stack + '\n');
    process.exitCode = (err as { exitCode?: number }).exitCode ?? ExitCode.usage;
  }
}
