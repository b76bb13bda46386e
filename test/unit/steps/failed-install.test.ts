import { describe, expect, it } from 'vitest';
import { ExitCode, HvError } from '../../../lib/errors.js';
import { Redactor } from '../../../lib/redact.js';
import { describeFailedInstall, failedInstallText } from '../../../installer/steps/failed-install.js';
import type { InstallOutcome } from '../../../installer/steps/pipeline.js';
import type { Journal } from '../../../installer/steps/journal.js';

const journal: Journal = {
  version: 1,
  installId: 'id-1',
  planDigest: 'digest',
  device: '/dev/vda',
  status: 'invalidated',
  startedAt: '2026-12-01T00:00:00.000Z',
  updatedAt: '2026-12-01T00:01:00.000Z',
  runs: 1,
  steps: [
    { name: 'guard', status: 'done', attempts: 1 },
    { name: 'clear', status: 'done', attempts: 1 },
    { name: 'format', status: 'failed', attempts: 1 },
    { name: 'verify', status: 'pending', attempts: 0 },
  ],
  invalidation: ['/dev/vda2', '/dev/vda4'],
};

const failed: InstallOutcome = {
  ok: false,
  resumed: false,
  journalFile: '/var/lib/hvinstall/vda.journal.json',
  logFile: '/var/lib/hvinstall/vda.install.log',
  journal,
  failedStep: 'format',
  error: new HvError('mkfs.ext4 failed with token s3cr3t-token-value in its arguments', { where: 'COS_STATE', hint: 'check the disk' }),
};

describe('describeFailedInstall: what every front end says about a failed install', () => {
  const redactor = new Redactor().add('s3cr3t-token-value');

  it('names the failed step, the journal with its status, every step, what was invalidated, the log; the secret redacted', () => {
    const r = describeFailedInstall(failed, redactor);
    expect(r.refused).toBe(false);
    expect(r.failedStep).toBe('format');
    expect(r.journal).toBe('/var/lib/hvinstall/vda.journal.json (invalidated)');
    expect(r.steps).toBe('guard done, clear done, format FAILED, verify pending');
    expect(r.invalidated).toEqual(['/dev/vda2', '/dev/vda4']);
    expect(r.logFile).toBe('/var/lib/hvinstall/vda.install.log');
    expect(r.error).toBe('error: mkfs.ext4 failed with token <redacted> in its arguments\n  where: COS_STATE\n  hint: check the disk');
    expect(r.error).not.toContain('s3cr3t');
  });

  it('a refusal by the guard names no step; no journal means no steps and no status', () => {
    const refused: InstallOutcome = { ...failed, journal: undefined, failedStep: 'guard', error: new HvError('/dev/vda is mounted', { exitCode: ExitCode.checkFailed }) };
    const r = describeFailedInstall(refused, redactor);
    expect(r.refused).toBe(true);
    expect(r.failedStep).toBeUndefined();
    expect(r.journal).toBe('/var/lib/hvinstall/vda.journal.json');
    expect(r.steps).toBeUndefined();
    expect(r.invalidated).toEqual([]);
  });

  it('failedInstallText: the command line gets each item on its own line, headed by the program', () => {
    const text = failedInstallText(describeFailedInstall(failed, redactor), 'hvinstall image', '; no image written');
    expect(text.split('\n')).toEqual([
      'hvinstall image: install failed in step format; no image written',
      'error: mkfs.ext4 failed with token <redacted> in its arguments',
      '  where: COS_STATE',
      '  hint: check the disk',
      '  journal: /var/lib/hvinstall/vda.journal.json (invalidated)',
      '  log: /var/lib/hvinstall/vda.install.log',
      '  steps: guard done, clear done, format FAILED, verify pending',
      '  invalidated: /dev/vda2, /dev/vda4',
      '',
    ]);
    const refused = failedInstallText(describeFailedInstall({ ...failed, journal: undefined, failedStep: 'guard' }, redactor), 'hvinstall');
    expect(refused.split('\n')[0]).toBe('hvinstall: install refused');
    expect(refused).not.toContain('steps:');
    expect(refused).not.toContain('invalidated');
  });
});

describe('what could not be invalidated, and a host record that was not written', () => {
  it('each partition that could not be invalidated gets its own line, apart from those that were', () => {
    const notInvalidated = ['could not invalidate /dev/vda4 (COS_STATE): writing zeros at byte 0: EIO; do not boot this disk'];
    const r = describeFailedInstall({ ...failed, journal: { ...journal, status: 'failed', invalidation: ['/dev/vda2 (COS_GRUB)'], notInvalidated } }, new Redactor());
    expect(r.notInvalidated).toEqual(notInvalidated);
    const text = failedInstallText(r, 'hvinstall');
    expect(text).toContain('  invalidated: /dev/vda2 (COS_GRUB)\n');
    expect(text).toContain(`  NOT INVALIDATED: ${notInvalidated[0]}\n`);
  });

  it('a journal that was never written is said to be so, not shown as if it were there', () => {
    const r = describeFailedInstall({ ...failed, journal: undefined, failedStep: 'guard', hostRecordProblem: 'not written: cannot write the install\'s journal and log in /var/lib/hvinstall: ENOSPC' }, new Redactor());
    expect(r.journal).toBe("/var/lib/hvinstall/vda.journal.json (not written: cannot write the install's journal and log in /var/lib/hvinstall: ENOSPC)");
  });
});
