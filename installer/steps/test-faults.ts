/**
 * Test-only fault injection: `HVINSTALL_TEST_SIGKILL_AT=<point>` makes the installer SIGKILL itself
 * at that point, the way a crash, OOM kill or power cut would stop it, so integration tests can prove
 * a re-run ends with the same disk. Points: `before:<step>` (journaled as running, nothing done),
 * `after:<step>` (journaled as done), `deploy-bytes:<n>` (mid image copy), `persistent-bytes:<n>`
 * (mid image-bundle copy: a file written to its temp name, not yet renamed) and `agent-bytes:<n>`
 * (mid hvagent staging copy). Unset in production.
 */
export const TEST_KILL_ENV = 'HVINSTALL_TEST_SIGKILL_AT';

export function killIfAsked(point: string, configured: string | undefined): void {
  if (configured && configured === point) {
    process.stderr.write(`hvinstall: ${TEST_KILL_ENV}=${point}: killing myself with SIGKILL\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}

/**
 * For the `<kind>-bytes:<n>` points: a check to call with each count of bytes copied, which kills at
 * the first count of n or more (a no-op unless that point is configured).
 */
export function killAtBytes(kind: 'deploy' | 'persistent' | 'agent', configured: string | undefined): (done: number) => void {
  const n = new RegExp(`^${kind}-bytes:(\\d+)$`).exec(configured ?? '')?.[1];
  if (n === undefined) return () => undefined;
  return (done) => {
    if (done >= Number(n)) killIfAsked(`${kind}-bytes:${n}`, configured);
  };
}

/**
 * `HVINSTALL_TEST_STALL_TIMEOUT_MS=<ms>`: the stall timeout of deploy's watchdogs (source reads,
 * target writes) in place of 120 s, so a test of a stalled disk takes seconds. Unset in production.
 */
export const TEST_STALL_ENV = 'HVINSTALL_TEST_STALL_TIMEOUT_MS';

export function testStallTimeoutMs(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const ms = Number(env[TEST_STALL_ENV]);
  return Number.isInteger(ms) && ms > 0 ? ms : undefined;
}
