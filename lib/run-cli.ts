/** Runs a CLI main and turns every thrown error into a message and an exit code, never a stack trace. */
import { describeError, ExitCode } from './errors.js';
import { Redactor } from './redact.js';

export interface RunCliOptions {
  /**
   * A command-line tool whose main has returned its verdict exits within this long, whatever is
   * still open (a worker thread, a socket, a read a hung disk never answers); what kept it is named.
   * Not for daemons whose main returns while they serve.
   */
  exitAfterVerdictMs?: number;
}

export async function runCli(mainFn: (argv: string[]) => Promise<number>, prog: string, opts: RunCliOptions = {}): Promise<void> {
  try {
    process.exitCode = await mainFn(process.argv.slice(2));
  } catch (err) {
    // Registered secrets are the commands' business; URL credentials are redacted here for every error.
    process.stderr.write(`${prog}: ${new Redactor().redactString(describeError(err))}\n`);
    if (process.env.HV_DEBUG && err instanceof Error && err.stack) process.stderr.write(err.stack + '\n');
    process.exitCode = (err as { exitCode?: number }).exitCode ?? ExitCode.usage;
  }
  if (opts.exitAfterVerdictMs !== undefined) {
    // unref: a process with nothing left open exits at once, as before; this only ends one that would not.
    setTimeout(() => {
      const open = process.getActiveResourcesInfo().filter((r) => r !== 'Timeout');
      process.stderr.write(`${prog}: exiting ${opts.exitAfterVerdictMs! / 1000} s after the verdict with ${open.join(', ') || 'work'} still open\n`);
      process.exit();
    }, opts.exitAfterVerdictMs).unref();
  }
}
