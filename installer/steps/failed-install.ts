/**
 * What a failed install tells the operator: the same facts, worded once, for every front end
 * (`hvinstall install`, `hvinstall image`, the console's "Installation Failed" screen), so that a
 * journal status, the failed step or an invalidated disk is never shown by one and dropped by another.
 */
import { describeError } from '../../lib/errors.js';
import type { Redactor } from '../../lib/redact.js';
import type { InstallOutcome } from './pipeline.js';

export interface FailedInstallReport {
  /** The guard refused the install: no disk was changed. */
  refused: boolean;
  /** The step that failed (undefined when the guard refused). */
  failedStep?: string;
  /** `describeError` of the cause, every secret of the run redacted. */
  error: string;
  /** The journal file, with the status it was left in when it was written. */
  journal: string;
  /** Each step and its status, the failed one as FAILED; undefined when no journal was written. */
  steps?: string;
  /** What was invalidated so the disk cannot boot half-installed (empty when nothing was). */
  invalidated: string[];
  /** What could not be invalidated: `could not invalidate /dev/X (…): …; do not boot this disk`. */
  notInvalidated: string[];
  logFile: string;
}

export function describeFailedInstall(outcome: InstallOutcome, redactor: Redactor): FailedInstallReport {
  const status = outcome.journal?.status;
  const refused = outcome.failedStep === 'guard';
  return {
    refused,
    failedStep: refused ? undefined : outcome.failedStep,
    error: redactor.redactString(describeError(outcome.error)),
    journal: `${outcome.journalFile}${outcome.hostRecordProblem ? ` (${outcome.hostRecordProblem})` : status ? ` (${status})` : ''}`,
    steps: outcome.journal?.steps.map((s) => `${s.name} ${s.status === 'failed' ? 'FAILED' : s.status}`).join(', '),
    invalidated: outcome.journal?.invalidation ?? [],
    notInvalidated: outcome.journal?.notInvalidated ?? [],
    logFile: outcome.logFile,
  };
}

/** The report as the command-line tools print it to stderr, one item a line; `program` heads it. */
export function failedInstallText(r: FailedInstallReport, program: string, consequence = ''): string {
  const lines = [
    `${program}: install ${r.refused ? 'refused' : `failed in step ${r.failedStep}`}${consequence}`,
    r.error,
    `  journal: ${r.journal}`,
    `  log: ${r.logFile}`,
  ];
  if (r.steps !== undefined) lines.push(`  steps: ${r.steps}`);
  if (r.invalidated.length > 0) lines.push(`  invalidated: ${r.invalidated.join(', ')}`);
  for (const n of r.notInvalidated) lines.push(`  NOT INVALIDATED: ${n}`);
  return lines.join('\n') + '\n';
}
