/**
 * A stopping agent does not wait out a guard's request: the vip guard's probe of a VIP that never
 * answers, the rke2 guard's readiness probe, time-sync's look at the join server's Date and the
 * certificates guard's Event end when the agent stops (ctx.stopping: SIGTERM),
 * and say so, instead of running to their 5 s deadline (a VIP nobody holds takes the kernel's ARP
 * timeout to fail, seconds that a node's shutdown or reboot would wait). The guard's deadline
 * (ctx.signal alone) does not cut them: the last attempt's reason stays the answer.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import timeSyncGuard from '../../../agent/guards/time-sync.js';
import vipGuard from '../../../agent/guards/vip.js';
import { probeRole } from '../../../agent/rke2/bringup.js';
import { rke2Settings } from '../../../agent/rke2/settings.js';
import { observeServerClock } from '../../../agent/time/observe.js';
import { sendCertificateEvent } from '../../../agent/certs/event.js';
import type { GuardContext } from '../../../agent/guard.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const config = { token: 't0ken-secret', install: { mode: 'create', vip: '10.0.0.10', vipMode: 'static' }, os: { hostname: 'n1' } } as unknown as HarvesterConfig;
let root = '';
let server: http.Server;
let silentUrl = '';
/** The paths the server was asked for; it never answers any. */
const asked: string[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hv-guard-stop-'));
  await mkdir(path.join(root, 'var/lib/rancher/rke2/agent/pod-manifests'), { recursive: true });
  await writeFile(path.join(root, 'var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml'), 'metadata:\n  name: kube-vip\n');
  // Never answers, but /late answers 503 a moment after it was asked.
  server = http.createServer((req, res) => {
    asked.push(req.url ?? '');
    if (req.url === '/late') setTimeout(() => res.writeHead(503).end('[-]etcd failed: reason withheld\n'), 200);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  silentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(root, { recursive: true, force: true });
});

/** A guard context whose signal aborts with DEADLINE or STOP, and whose stopping aborts with STOP only, as the runner makes them. */
function context(deadline: AbortController, stop: AbortController, settings: Record<string, unknown>, reported: Array<Record<string, unknown>> = []): GuardContext {
  return {
    report: (d) => reported.push(d),
    root: (p) => path.join(root, p),
    config,
    log: new Logger(new MemorySink(), new Redactor(), 'debug'),
    signal: AbortSignal.any([deadline.signal, stop.signal]),
    stopping: stop.signal,
    settings,
    progress: () => undefined,
    now: Date.now,
    bootstrapper: 'hvagent',
  };
}

/** Aborts STOP once the server has been asked for URL. */
async function abortWhenAsked(url: string, stop: AbortController): Promise<void> {
  while (!asked.includes(url)) await new Promise((r) => setTimeout(r, 10));
  stop.abort(new Error('stopped by SIGTERM'));
}

describe('guards stop their requests with the agent', () => {
  it('vip: the probe of a VIP that does not answer ends at the stop, and the reason says so', async () => {
    const stop = new AbortController();
    const aborted = abortWhenAsked('/vip-readyz', stop);
    const r = await vipGuard.reconcile(context(new AbortController(), stop, { vipUrl: `${silentUrl}/vip-readyz` }));
    await aborted;
    expect(r).toEqual({
      status: 'retry',
      reason: `VIP 10.0.0.10 does not answer on 6443 yet (kube-vip from kube-vip.yaml may not lead yet): ${silentUrl}/vip-readyz: abandoned: the agent is stopping`,
    });
  });

  it('rke2: the API server readiness probe ends at the stop', async () => {
    const stop = new AbortController();
    const aborted = abortWhenAsked('/readyz', stop);
    const s = rke2Settings({ apiServerUrl: silentUrl });
    const probe = await probeRole('server', config, s, context(new AbortController(), stop, {}));
    await aborted;
    expect(probe).toEqual({ done: false, reason: `${silentUrl}/readyz: abandoned: the agent is stopping` });
  });

  it('vip: the deadline does not cut the probe: the reason is the answer that came', async () => {
    const deadline = new AbortController();
    const aborted = abortWhenAsked('/late', deadline);
    const r = await vipGuard.reconcile(context(deadline, new AbortController(), { vipUrl: `${silentUrl}/late` }));
    await aborted;
    expect(r).toEqual({
      status: 'retry',
      reason: `VIP 10.0.0.10 does not answer on 6443 yet (kube-vip from kube-vip.yaml may not lead yet): ${silentUrl}/late: HTTP 503 (failing: etcd)`,
    });
  });

  it('time-sync: a stop ends the look at the join server\'s clock, and what it did not see is not judged nor reported', async () => {
    const stop = new AbortController();
    const aborted = abortWhenAsked('/ping', stop);
    const reported: Array<Record<string, unknown>> = [];
    // No time daemon: the join server's Date is the only evidence; without it the clock would pass unconfirmed.
    const r = await timeSyncGuard.reconcile(context(new AbortController(), stop, { daemon: 'none', serverUrl: `${silentUrl}/ping`, syncWait: '0s' }, reported));
    await aborted;
    expect(r).toEqual({ status: 'retry', reason: 'stopped before the clock was judged' });
    expect(reported).toEqual([]);
  });

  it('time-sync: the look at the join server\'s Date itself ends at the stop, saying so', async () => {
    const stop = new AbortController();
    const aborted = abortWhenAsked('/date', stop);
    const clock = await observeServerClock(`${silentUrl}/date`, Date.now, stop.signal);
    await aborted;
    expect(clock).toEqual({ url: `${silentUrl}/date`, problem: `${silentUrl}/date: abandoned: the agent is stopping` });
  });

  it('certificates: the Event to the kube API ends at the stop, and is reported as not sent', async () => {
    await mkdir(path.join(root, 'etc/rancher/rke2'), { recursive: true });
    await writeFile(
      path.join(root, 'etc/rancher/rke2/rke2.yaml'),
      `apiVersion: v1\nkind: Config\nclusters:\n- name: default\n  cluster:\n    server: ${silentUrl}\ncontexts:\n- name: default\n  context:\n    cluster: default\n    user: default\ncurrent-context: default\nusers:\n- name: default\n  user:\n    token: t0ken\n`,
    );
    const stop = new AbortController();
    const aborted = abortWhenAsked('/api/v1/namespaces/default/events', stop);
    const out = await sendCertificateEvent((p) => path.join(root, p), ['/etc/rancher/rke2/rke2.yaml'], { reason: 'RKE2CertificateExpiring' }, stop.signal);
    await aborted;
    expect(out).toEqual({ sent: false, problem: `POST ${silentUrl}/api/v1/namespaces/default/events: abandoned: the agent is stopping` });
  });
});
