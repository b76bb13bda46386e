/**
 * A disk that stops answering: it fails when it answers again, it is pulled out, it stalls while
 * active.img is built
 * (the promise every case keeps, and the harness: cases.ts).
 */
import { describe, expect, it } from 'vitest';
import { atStep, expectKernelByte, expectKernelWord, failedLoudly, FAULT_CASE_MS, faultFileHooks, install, kernelNow, recoversToClean, setup } from './cases.js';

faultFileHooks();

describe('write errors', { timeout: FAULT_CASE_MS }, () => {
  it('5. the disk stops answering, then fails when it answers again; and a disk pulled out: the process ends after its verdict, the first I/O error named, no EROFS alone', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const resumedToFail = await install(t, {}, async (stdout) => {
      await atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'suspend', count: 1 }])(stdout);
      await t.disk.waitForHit('suspend');
      await t.disk.setRules([{ op: 'write', from: state.from, to: state.to, action: 'eio' }]);
    });
    await failedLoudly(t, resumedToFail);
    await expectKernelWord(resumedToFail, t.disk.dev);
    await recoversToClean(t);

    const gone = await setup();
    const since = await kernelNow();
    const pulled = await install(gone, {}, atStep('deploy', gone.disk, [{ action: 'gone' }]));
    await failedLoudly(gone, pulled);
    expect(pulled.stderr).toContain('install failed in step deploy');
    await expectKernelByte(pulled.stderr, gone.disk.dev, since);
    expect(pulled.stderr).toContain('do not boot this disk');
  });
});

describe('a disk that stalls', { timeout: FAULT_CASE_MS }, () => {
  it('7. the target stops answering while active.img is built: the error blames the target disk, not the OS source', async () => {
    const t = await setup();
    const state = t.part('COS_STATE');
    const r = await install(t, { HVINSTALL_TEST_STALL_TIMEOUT_MS: '4000' }, async (stdout) => {
      await atStep('deploy', t.disk, [{ op: 'write', from: state.from, to: state.to, action: 'suspend' }])(stdout);
      // The disk answers again once the install has given its verdict on the step.
      while (!/"type":"step","phase":"failed","step":"deploy"/.test(stdout())) await new Promise((res) => setTimeout(res, 50));
      await t.disk.setRules([]);
    });
    await failedLoudly(t, r);
    // The loop driver serves a disk's requests in order, so the suspended write to COS_STATE holds
    // every partition's requests behind it: whichever partition's watchdog fires first is named.
    expect(r.stderr).toMatch(new RegExp(`(writing cOS/active\\.img|writing the OS images|reading the OS images back|the deploy step) stalled: the target disk stopped answering \\(${t.disk.dev}(p\\d+)? has had \\d+ request\\(s\\) in flight and completed none for \\d+ s\\); the OS source is not at fault`));
    expect(r.stderr).not.toContain('reading the OS source stalled');
    await recoversToClean(t);
  });
});
