import { afterEach, describe, expect, it } from 'vitest';
import { readFile, access } from 'node:fs/promises';
import rke2 from '../../../agent/guards/rke2.js';
import { makeNode, writeDropIn, createConfig, joinConfig, type Node } from './harness.js';

let node: Node | undefined;
afterEach(async () => {
  await node?.cleanup();
  node = undefined;
});

async function pidOf(n: Node, role: string): Promise<number> {
  return (JSON.parse(await readFile(n.root(`/run/hvagent/rke2-${role}.pid`), 'utf8')) as { pid: number }).pid;
}

describe('rke2 guard (with the rke2 stand-in)', () => {
  it('starts rke2-server on a create node and waits for /readyz over mutual TLS', async () => {
    node = await makeNode();
    await node.behave({ server: { readyAfterMs: 1500 } });
    await writeDropIn(node, '90-harvester-server.yaml', 'cni: multus,canal\n');
    const r = await rke2.reconcile(node.ctx(createConfig));
    expect(r).toEqual({ status: 'ok', detail: 'rke2-server ready (process)' });
    const pid = await pidOf(node, 'server');
    expect(() => process.kill(pid, 0)).not.toThrow();
    // A second pass finds it running and does not start another.
    expect((await rke2.reconcile(node.ctx(createConfig))).status).toBe('ok');
    expect(await pidOf(node, 'server')).toBe(pid);
  });

  it('reports what /readyz says is failing, with the service log, when it never becomes ready', async () => {
    node = await makeNode();
    await node.behave({ server: { neverReady: true } });
    const r = await rke2.reconcile(node.ctx(createConfig, { probeWindowMs: 2_000 }));
    expect(r.status).toBe('retry');
    const reason = (r as { reason: string }).reason;
    expect(reason).toMatch(/^rke2-server not ready: https:\/\/127\.0\.0\.1:\d+\/readyz: HTTP 500 \(failing: etcd\)/);
    expect(reason).toContain('last log lines of rke2:');
    expect(reason).toContain('Waiting for etcd server to become available');
  });

  it('gives up with the fatal log line after rke2 keeps crashing', async () => {
    node = await makeNode();
    await node.behave({ server: { crash: 'starting kubernetes: preparing server: bootstrap data already found and encrypted with different token' } });
    const ctx = node.ctx(createConfig, { probeWindowMs: 2_000 });
    const results = [];
    for (let i = 0; i < 4; i++) {
      const r = await rke2.reconcile(ctx);
      results.push(r.status);
      if (r.status === 'fail') {
        expect(r.diagnosis).toMatch(/^rke2-server exited 3 times: rke2 server \(pid \d+, started .*\) is no longer running/);
        expect(r.diagnosis).toContain('level=fatal msg="starting kubernetes: preparing server: bootstrap data already found');
        break;
      }
    }
    expect(results).toEqual(['retry', 'retry', 'retry', 'fail']);
  });

  it('refuses to start a join agent without a token, naming what is missing', async () => {
    node = await makeNode();
    await node.behave({ agent: { readyAfterMs: 0 } });
    const r = await rke2.reconcile(node.ctx(joinConfig));
    expect(r.status).toBe('fail');
    expect((r as { diagnosis: string }).diagnosis).toBe(
      'RKE2 agent config incomplete: no `token:` in any drop-in (the installer writes it, mode 0600)',
    );
    await expect(access(node.root('/run/hvagent/rke2-agent.pid'))).rejects.toThrow();
  });

  it('writes the supervisor address a join agent registers with, then waits for the kubelet', async () => {
    node = await makeNode();
    await node.behave({ agent: { readyAfterMs: 500 } });
    await writeDropIn(node, '90-harvester-agent.yaml', 'token: cluster-token-xyz\n');
    const r = await rke2.reconcile(node.ctx(joinConfig));
    expect(r).toEqual({ status: 'ok', detail: 'rke2-agent ready (process)' });
    expect(await readFile(node.root('/etc/rancher/rke2/config.yaml.d/90-harvester-vip.yaml'), 'utf8')).toBe('server: https://10.0.0.5:9345\n');
    // The token never reaches the agent's log.
    expect(node.sink.lines.join('')).not.toContain('cluster-token-xyz');
  });

  it('reports an unparseable drop-in as such rather than starting RKE2', async () => {
    node = await makeNode();
    await node.behave({ server: {} });
    await writeDropIn(node, '50-broken.yaml', 'tls-san: [a, b\n');
    const r = await rke2.reconcile(node.ctx(createConfig));
    expect(r.status).toBe('fail');
    expect((r as { diagnosis: string }).diagnosis).toMatch(/^RKE2 drop-ins in \/etc\/rancher\/rke2\/config\.yaml\.d do not parse: 50-broken\.yaml: /);
  });
});
