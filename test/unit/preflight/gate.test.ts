import { describe, expect, it } from 'vitest';
import { decideInstallGate, gateLines, type PreflightCheck, type PreflightReport } from '../../../installer/preflight/index.js';

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

const MODES = ['automatic', 'interactive', 'unattended'] as const;

describe('decideInstallGate (skipchecks semantics)', () => {
  it('no failures: proceed, warnings never block', () => {
    for (const mode of MODES) {
      expect(decideInstallGate(report([warn]), { mode, skipchecks: false })).toMatchObject({ proceed: true, needsAcknowledgement: false, blocking: [], message: 'preflight passed' });
    }
  });

  it('automatic mode: a failure aborts unless install.skipchecks, and says where to set it', () => {
    const aborted = decideInstallGate(report([soft, warn]), { mode: 'automatic', skipchecks: false });
    expect(aborted.proceed).toBe(false);
    expect(aborted.blocking.map((c) => c.id)).toEqual(['cpu.cores']);
    expect(aborted.message).toBe('preflight failed (automatic mode): cpu.cores');
    expect(aborted.override).toBe('set harvester.install.skipchecks=true on the kernel command line (or install.skipchecks: true in the config) to install anyway');
    const skipped = decideInstallGate(report([soft, warn]), { mode: 'automatic', skipchecks: true });
    expect(skipped).toMatchObject({ proceed: true, needsAcknowledgement: false, blocking: [] });
    expect(skipped.overridden.map((c) => c.id)).toEqual(['cpu.cores']);
    expect(skipped.message).toBe('preflight failures overridden by install.skipchecks: cpu.cores');
  });

  it('an install nobody watches (install --config --yes) stops on a failure like automatic mode', () => {
    const g = decideInstallGate(report([soft]), { mode: 'unattended', skipchecks: false });
    expect(g).toMatchObject({ proceed: false, needsAcknowledgement: false, acknowledge: [] });
    expect(g.override).toBe('set install.skipchecks: true in the config to install anyway');
  });

  it('interactive mode: a hardware failure needs the operator to acknowledge it, unless skipchecks', () => {
    expect(decideInstallGate(report([soft]), { mode: 'interactive', skipchecks: false })).toMatchObject({ proceed: true, needsAcknowledgement: true, acknowledge: [expect.objectContaining({ id: 'cpu.cores' })], blocking: [] });
    expect(decideInstallGate(report([soft]), { mode: 'interactive', skipchecks: true })).toMatchObject({ proceed: true, needsAcknowledgement: false, acknowledge: [] });
  });

  it('interactive mode: a disk below the minimum cannot be acknowledged, only skipchecks lets it through', () => {
    const size = { id: 'device.size', subject: '/dev/sda', result: 'fail', skippable: true } as const;
    const g = decideInstallGate(report([soft, size]), { mode: 'interactive', skipchecks: false });
    expect(g).toMatchObject({ proceed: false, needsAcknowledgement: false });
    expect(g.blocking.map((c) => c.id)).toEqual(['device.size']);
    expect(g.acknowledge.map((c) => c.id)).toEqual(['cpu.cores']);
    expect(decideInstallGate(report([soft, size]), { mode: 'interactive', skipchecks: true })).toMatchObject({ proceed: true, blocking: [] });
  });

  it('hard failures stop the install whatever the flags say', () => {
    for (const mode of MODES) {
      for (const skipchecks of [true, false]) {
        const g = decideInstallGate(report([soft, hard]), { mode, skipchecks });
        expect(g.proceed).toBe(false);
        expect(g.message).toBe('preflight failed: device.not-mounted (/dev/sdd); install.skipchecks cannot override these');
        expect(g.override).toMatch(/^nothing overrides device.not-mounted \(\/dev\/sdd\)/);
        const stillBlocking = skipchecks || mode === 'interactive' ? [] : ['cpu.cores'];
        expect(g.blocking.map((c) => c.id)).toEqual(['device.not-mounted', ...stillBlocking]);
      }
    }
  });

  it('gateLines: every check that did not pass with what it measured, the decision and the override', () => {
    const r = report([{ ...soft, measured: '2 logical CPUs (2 cores)', threshold: '>= 8', message: 'Only 2 CPU cores detected.' }, { ...warn, measured: 'kvm', message: 'System is virtualized (kvm).' }, { id: 'memory', result: 'pass', skippable: true }]);
    const g = decideInstallGate(r, { mode: 'automatic', skipchecks: false });
    expect(gateLines(r, g)).toEqual([
      'FAIL cpu.cores: 2 logical CPUs (2 cores) (needs >= 8): Only 2 CPU cores detected.',
      'WARN virt.host: kvm: System is virtualized (kvm).',
      'decision: preflight failed (automatic mode): cpu.cores',
      'to go on: set harvester.install.skipchecks=true on the kernel command line (or install.skipchecks: true in the config) to install anyway',
    ]);
  });
});
