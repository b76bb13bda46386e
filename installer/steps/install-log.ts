/**
 * The install's log on the host (<state dir>/<disk>.install.log). It holds lines in memory until the
 * journal says whether to append (a resume) or start afresh. A write that fails (the state dir's
 * filesystem full or read-only) must not crash the install from inside a progress event: the log
 * keeps the lines in memory from then on, and the pipeline stops the install with `failure` at the
 * end of the step, where the journal can still record it.
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { HvError, ExitCode } from '../../lib/errors.js';

export type AppendFile = (file: string, data: string) => void;

const appendPrivate: AppendFile = (file, data) => appendFileSync(file, data, { mode: 0o600 });

export class InstallLog {
  private pending: string[] = [];
  private file?: string;
  /** The first write that failed; the lines from it on are in memory only. */
  failure?: HvError;

  constructor(private readonly append: AppendFile = appendPrivate) {}

  write(line: string): void {
    if (this.file && !this.failure) {
      try {
        this.append(this.file, line);
        return;
      } catch (err) {
        this.failure = new HvError(`cannot write the install log ${this.file}: ${err instanceof Error ? err.message : String(err)}`, {
          where: this.file,
          hint: 'free space on (or make writable) the filesystem of the state dir (--state-dir, default /var/lib/hvinstall), then run the same install again: it resumes from its journal',
          exitCode: ExitCode.installFailed,
          cause: err,
        });
      }
    }
    this.pending.push(line);
  }

  open(file: string, fresh: boolean): void {
    if (fresh) writeFileSync(file, '', { mode: 0o600 });
    this.file = file;
    const lines = this.pending;
    this.pending = [];
    for (const l of lines) this.write(l);
  }

  /** Everything logged: the file, then what only memory holds. */
  text(): string {
    let written = '';
    if (this.file) {
      try {
        written = readFileSync(this.file, 'utf8');
      } catch {
        // the failure is reported on its own; the lines in memory still go to COS_OEM
      }
    }
    return written + this.pending.join('');
  }

  /** Ends the install with the log's write failure, if there was one. */
  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}
