/**
 * What a guard waiting on its dependencies says in the status document (`hvagent status`): which
 * dependency it waits for, and which of them failed and will be retried, in run mode.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Logger, MemorySink } from '../../../lib/logger.js';
import type { Guard, GuardName, GuardResult, StatusDocument } from '../../../agent/guard.js';
import { runGuards } from '../../../agent/runner.js';
import { statusFile } from '../../../agent/status.js';
import { defaultSettings } from '../../../agent/settings.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvagent-pending-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function guard(name: GuardName, reconcile: Guard['reconcile'], dependsOn: GuardName[] = []): Guard {
  return { name, dependsOn, deadlineMs: 60_000, reconcile };
}

/** The status document once `pick` finds what it waits for in it (at most 400 reads, 10 ms apart). */
async function statusWhen(pick: (d: StatusDocument) => boolean): Promise<StatusDocument | undefined> {
  for (let i = 0; i < 400; i++) {
    const d = await readFile(statusFile(dir), 'utf8').then((t) => JSON.parse(t) as StatusDocument, () => undefined);
    if (d && pick(d)) return d;
    await new Promise((r) => setTimeout(r, 10));
  }
  return undefined;
}

describe('runGuards: a guard waiting on its dependencies', () => {
  it('names each one it waits for, a failed one as retried later (run mode)', async () => {
    const settings = defaultSettings();
    settings.backoff = { initialMs: 5, maxMs: 40 };
    settings.retryFailedAfterMs = 60_000;
    const stop = new AbortController();
    const failing = guard('network-online', async (): Promise<GuardResult> => ({ status: 'fail', diagnosis: 'no carrier on mgmt-br' }));
    // Still running: neither done nor failed.
    const running = guard('time-sync', (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve({ status: 'retry', reason: 'stopped' }))));
    const dependent = guard('registries', async () => ({ status: 'ok' }), ['network-online', 'time-sync']);
    const run = runGuards({
      mode: 'run',
      rootDir: dir,
      settings,
      log: new Logger(new MemorySink()),
      signal: stop.signal,
      names: ['network-online', 'time-sync', 'registries'],
      guards: { 'network-online': failing, 'time-sync': running, registries: dependent },
    });
    const registries = (d: StatusDocument) => d.guards.find((g) => g.name === 'registries');
    const seen = await statusWhen((d) => d.guards.find((g) => g.name === 'network-online')?.phase === 'failed' && registries(d)?.detail !== undefined && registries(d)?.detail !== 'waiting for network-online, time-sync');
    stop.abort();
    await run;
    expect(seen && registries(seen)).toMatchObject({ phase: 'pending', detail: 'waiting for network-online (failed; retried later), time-sync' });
  });
});
