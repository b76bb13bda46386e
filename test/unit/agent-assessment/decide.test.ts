import { describe, expect, it } from 'vitest';
import { bootAction, gateVerdict } from '../../../agent/assessment/decide.js';
import { assessmentLine, notableAssessment } from '../../../agent/assessment/command.js';
import { dashboard } from '../../../agent/console/dashboard.js';
import { fallbackClusterObjects } from '../../../agent/assessment/cluster.js';
import type { GuardName, GuardStatus } from '../../../agent/guard.js';

const env = (state: string, enabled = 'yes') => ({ hv_assessment_enabled: enabled, hv_assessment_state: state });
const A = 'root=LABEL=COS_STATE cos-img/filename=/cOS/active.img hv.assessment=attempt';
const P = 'root=LABEL=COS_STATE cos-img/filename=/cOS/passive.img hv.assessment=fallback';
const R = 'root=LABEL=COS_RECOVERY cos-img/filename=/cOS/recovery.img';

describe('what a boot is', () => {
  it.each([
    [undefined, A, 'none'],
    [env(''), A, 'none'],
    [env('trying'), A, 'gate'],
    [env('trying'), P, 'commit-fallback'],
    [env('fallback'), P, 'commit-fallback'],
    [env('fallback'), A, 'none'],
    [env('armed'), A, 'unrecorded'],
    [env('armed'), P, 'none'],
    [env('trying'), R, 'none'],
    [env('trying', 'no'), A, 'disabled'],
  ] as const)('env %j, %s -> %s', (e, cmdline, kind) => {
    expect(bootAction(e, cmdline).kind).toBe(kind);
  });
});

const g = (name: GuardName, phase: GuardStatus['phase'], lastError?: string): GuardStatus => ({ name, phase, attempts: 1, updatedAt: 'x', lastError });
const req: GuardName[] = ['network-online', 'time-sync', 'rke2'];

describe('the gate', () => {
  it('passes when every required guard succeeded, is watching or was skipped; others do not count', () => {
    expect(gateVerdict({ guards: [g('network-online', 'watching'), g('time-sync', 'succeeded'), g('rke2', 'skipped'), g('vip', 'failed')], required: req, elapsedMs: 0, deadlineMs: 1 }).verdict).toBe('pass');
  });
  it('fails at once on a failed required guard, naming the first in order with its evidence', () => {
    expect(gateVerdict({ guards: [g('network-online', 'running'), g('time-sync', 'failed', 'clock 3 days behind'), g('rke2', 'failed', 'x')], required: req, elapsedMs: 0, deadlineMs: 1000 })).toEqual({ verdict: 'fail', guard: 'time-sync', evidence: 'clock 3 days behind', reason: 'failed' });
  });
  it('waits before the deadline and fails at it, naming the first guard not there (a missing one is "not started")', () => {
    const input = { guards: [g('network-online', 'succeeded'), g('time-sync', 'waiting', 'no NTP source yet')], required: req, deadlineMs: 1000 };
    expect(gateVerdict({ ...input, elapsedMs: 999 })).toMatchObject({ verdict: 'wait', waitingFor: 'time-sync' });
    expect(gateVerdict({ ...input, elapsedMs: 1000 })).toEqual({ verdict: 'fail', guard: 'time-sync', evidence: 'no NTP source yet', reason: 'deadline' });
    expect(gateVerdict({ guards: [g('network-online', 'succeeded'), g('time-sync', 'succeeded')], required: req, elapsedMs: 5000, deadlineMs: 1000 })).toMatchObject({ verdict: 'fail', guard: 'rke2', evidence: 'not started' });
  });
});

describe('what is told', () => {
  it('the status line names the switch, what is pending and the last outcome', () => {
    expect(assessmentLine(undefined)).toMatch(/not installed/);
    expect(assessmentLine({ enabled: false, state: '' })).toMatch(/DISABLED \(hvagent assessment arm\)/);
    expect(assessmentLine({ enabled: true, state: 'fallback', record: { version: 1, outcome: 'fell-back', updatedAt: 'x', message: 'UPGRADE FAILED: v3' } })).toBe('boot assessment: enabled, pending: fallback; last: fell-back: UPGRADE FAILED: v3');
  });
  it("the node's status screen shows the line only when it matters now", () => {
    const rec = (outcome: 'committed' | 'fell-back') => ({ enabled: true, state: '', record: { version: 1 as const, outcome, updatedAt: 'x', message: `m ${outcome}` } });
    expect(notableAssessment(rec('committed'))).toBeUndefined();
    expect(notableAssessment(rec('fell-back'))).toMatch(/last: fell-back: m fell-back/);
    expect(dashboard({ alive: false, hostname: 'h', addresses: [], now: 0, assessment: 'boot assessment: X' }).notes).toContain('boot assessment: X');
  });

  it('the cluster gets the Node cordoned and annotated, and a Warning Event on it', () => {
    const { patch, event } = fallbackClusterObjects('node-1', { version: 1, outcome: 'fell-back', updatedAt: 'x', message: 'UPGRADE FAILED: v3' }, 'T');
    expect(patch).toEqual({ spec: { unschedulable: true }, metadata: { annotations: { 'hvinstall.io/upgrade-fallback': 'UPGRADE FAILED: v3' } } });
    expect(event).toMatchObject({ involvedObject: { kind: 'Node', name: 'node-1' }, reason: 'UpgradeFellBack', type: 'Warning', message: 'UPGRADE FAILED: v3' });
  });
});
