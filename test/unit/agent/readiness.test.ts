import { describe, expect, it } from 'vitest';
import { resolveBootstrapMode } from '../../../agent/mode.js';
import { readiness, type SettledOutcome } from '../../../agent/sd-notify.js';
import type { GuardName } from '../../../agent/guard.js';
import { GUARD_ORDER } from '../../../agent/guard.js';

const outcomes = (o: Partial<Record<GuardName, SettledOutcome | 'stopped'>>) => new Map(Object.entries(o)) as Map<GuardName, SettledOutcome | 'stopped'>;

describe('readiness (READY=1 for rancherd)', () => {
  it('waits for every pre-bootstrap guard and names the ones still at work', () => {
    const r = readiness(outcomes({ 'network-online': 'ok', registries: 'ok' }), GUARD_ORDER);
    expect(r.ready).toBe(false);
    expect(r.status).toBe('preparing the node: waiting for node-identity, time-sync, image-preload, longhorn-disk');
  });

  it('holds rancherd back for the clock and the node identity too: RKE2 would loop on x509 or etcd membership errors', () => {
    const r = readiness(outcomes({ 'network-online': 'ok', registries: 'ok', 'image-preload': 'ok', 'longhorn-disk': 'ok', 'node-identity': 'ok' }), GUARD_ORDER);
    expect(r).toEqual({ ready: false, status: 'preparing the node: waiting for time-sync' });
  });

  it('does not wait for rke2, vip or promotion: rancherd starts RKE2 after READY', () => {
    const r = readiness(outcomes({ 'network-online': 'ok', 'node-identity': 'ok', 'time-sync': 'ok', registries: 'ok', 'image-preload': 'skip', 'longhorn-disk': 'ok' }), GUARD_ORDER);
    expect(r).toEqual({ ready: true, status: 'node prepared: network-online ok, node-identity ok, time-sync ok, registries ok, image-preload skipped, longhorn-disk ok' });
  });

  it('is ready when a guard failed at its deadline, and says so: the bootstrap must never wait forever', () => {
    const r = readiness(outcomes({ 'network-online': 'failed', 'node-identity': 'skip', 'time-sync': 'failed', registries: 'ok', 'image-preload': 'ok', 'longhorn-disk': 'unavailable' }), GUARD_ORDER);
    expect(r.ready).toBe(true);
    expect(r.status).toBe('bootstrap may start, with failures (hvagent status): network-online FAILED, node-identity skipped, time-sync FAILED, registries ok, image-preload ok, longhorn-disk FAILED');
  });

  it('is not ready for a stopped guard, and counts only guards in the run (--guard)', () => {
    expect(readiness(outcomes({ 'network-online': 'stopped', 'node-identity': 'ok', 'time-sync': 'ok', registries: 'ok', 'image-preload': 'ok', 'longhorn-disk': 'ok' }), GUARD_ORDER).ready).toBe(false);
    expect(readiness(outcomes({ registries: 'ok' }), ['registries', 'rke2']).ready).toBe(true);
  });
});

describe('bootstrap mode', () => {
  const image = { by: 'rancherd' as const, why: 'the image carries rancherd' };
  it('follows the image unless the setting says otherwise', () => {
    expect(resolveBootstrapMode(undefined, image)).toEqual(image);
    expect(resolveBootstrapMode('auto', image)).toEqual(image);
    expect(resolveBootstrapMode('hvagent', image)).toEqual({ by: 'hvagent', why: 'the bootstrapper setting says hvagent (the image alone would give: rancherd)' });
  });
  it('refuses a setting it does not know', () => {
    expect(() => resolveBootstrapMode('k3s', image)).toThrow(/bootstrapper must be rancherd, hvagent or auto, got "k3s"/);
  });
});
