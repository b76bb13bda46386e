import { describe, expect, it } from 'vitest';
import { decideInstallGate, type PreflightCheck, type PreflightReport } from '../../../installer/preflight/index.js';

function report(checks: Array<Partial<PreflightCheck> & Pick<PreflightCheck, 'id' | 'result' | 'skippable'>>): PreflightReport {
  const full = checks.map((c) => ({ title: c.id, measured: '', threshold: '', message: '', whatToDo: '', ...c }));
  return {
    profile: 'testing',
    sysroot: '/',
    checks: full,
    summary: {
      pass: full.filter((c) => c.result === 'pass').length,
      warn: full.filter((c) => c.result === 'warn').length,
      fail: full.filter((c) => c.result === 'fail').length,
    },
  };
}

const soft = { id: 'cpu.cores', result: 'fail', skippable: true } as const;
const hard = { id: 'device.not-mounted', subject: '/dev/sdd', result: 'fail', skippable: false } as const;
const warn = { id: 'virt.host', result: 'warn', skippable: true } as const;

describe('decideInstallGate (skipchecks semantics)', () => {
  it('no failures: proceed, warnings never block', () => {
    for (const automatic of [true, false]) {
      expect(decideInstallGate(report([warn]), { automatic, skipchecks: false })).toMatchObject({ proceed: true, needsAcknowledgement: false, blocking: [], message: 'preflight passed' });
    }
  });

  it('automatic mode: a failure aborts unless install.skipchecks', () => {
    const aborted = decideInstallGate(report([soft, warn]), { automatic: true, skipchecks: false });
    expect(aborted.proceed).toBe(false);
    expect(aborted.blocking.map((c) => c.id)).toEqual(['cpu.cores']);
    expect(aborted.message).toBe(
      'preflight failed in automatic mode: cpu.cores; set install.skipchecks: true (or harvester.install.skipchecks=true) to install anyway',
    );
    const skipped = decideInstallGate(report([soft, warn]), { automatic: true, skipchecks: true });
    expect(skipped).toMatchObject({ proceed: true, needsAcknowledgement: false, blocking: [] });
    expect(skipped.overridden.map((c) => c.id)).toEqual(['cpu.cores']);
    expect(skipped.message).toBe('preflight failures overridden by install.skipchecks: cpu.cores');
  });

  it('interactive mode: a failure needs the operator to acknowledge it, unless skipchecks', () => {
    expect(decideInstallGate(report([soft]), { automatic: false, skipchecks: false })).toMatchObject({ proceed: true, needsAcknowledgement: true });
    expect(decideInstallGate(report([soft]), { automatic: false, skipchecks: true })).toMatchObject({ proceed: true, needsAcknowledgement: false });
  });

  it('hard failures stop the install whatever the flags say', () => {
    for (const automatic of [true, false]) {
      for (const skipchecks of [true, false]) {
        const g = decideInstallGate(report([soft, hard]), { automatic, skipchecks });
        expect(g.proceed).toBe(false);
        expect(g.message).toBe('preflight failed: device.not-mounted (/dev/sdd); install.skipchecks cannot override these');
        expect(g.blocking.map((c) => c.id)).toEqual(skipchecks ? ['device.not-mounted'] : ['device.not-mounted', 'cpu.cores']);
      }
    }
  });
});
