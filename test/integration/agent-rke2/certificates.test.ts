/**
 * The certificates guard on a node root holding RKE2's certificate layout, with certificates openssl
 * made at chosen dates (`openssl ca -startdate -enddate`: valid, expiring, expired), the rke2 TEST
 * DOUBLE recording each `rke2 certificate rotate`, and the real runner: what status.json, the
 * metrics textfile and the Node Event say, and when the rotate runs — before RKE2 starts, once,
 * never under rancherd, never while rke2-server runs.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';
import type { GuardName, StatusDocument } from '../../../agent/guard.js';
import { runGuards } from '../../../agent/runner.js';
import { defaultSettings } from '../../../agent/settings.js';
import { ProcessRke2Services } from '../../../agent/rke2/services.js';
import { ROTATION_RECORD_PATH } from '../../../agent/certs/rotation.js';
import { createConfig, makeNode, makeTls, startKubeApiDouble, TLS_DIR, writeDropIn, type KubeApiDouble, type Node } from './harness.js';

const DAY = 86_400_000;
let node: Node | undefined;
let api: KubeApiDouble | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
  await node?.cleanup();
  node = undefined;
});

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** openssl ca's date form, YYYYMMDDHHMMSSZ. */
function asn1(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:T]/g, '').replace(/\.\d+Z$/, 'Z');
}

/** A CA that signs with whatever validity it is told (openssl 3.0's x509 has no -not_after). */
async function makeCa(dir: string): Promise<(file: string, cn: string, fromMs: number, toMs: number) => void> {
  await mkdir(path.join(dir, 'newcerts'), { recursive: true });
  await writeFile(path.join(dir, 'index.txt'), '');
  await writeFile(path.join(dir, 'serial'), '1000\n');
  await writeFile(
    path.join(dir, 'ca.cnf'),
    ['[ca]', 'default_ca = own', '[own]', 'dir = .', 'database = index.txt', 'new_certs_dir = newcerts', 'serial = serial', 'default_md = sha256', 'policy = any', 'unique_subject = no', 'copy_extensions = copy', '[any]', 'commonName = supplied', ''].join('\n'),
  );
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '3650', '-subj', '/CN=test-ca'], dir);
  return (file, cn, fromMs, toMs) => {
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${file}.key`, '-out', 'leaf.csr', '-subj', `/CN=${cn}`], dir);
    openssl(['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.crt', '-keyfile', 'ca.key', '-in', 'leaf.csr', '-out', file, '-notext', '-startdate', asn1(fromMs), '-enddate', asn1(toMs)], dir);
  };
}

interface CertNode {
  node: Node;
  /** Issues a certificate valid from `fromDays` to `toDays` (relative to now) at a node path, or at an absolute path outside the node. */
  issue(nodePath: string, fromDays: number, toDays: number, outside?: boolean): Promise<void>;
  rotations(): Promise<Array<{ args: string[]; at: string }>>;
}

async function certNode(): Promise<CertNode> {
  const n = await makeNode();
  const caDir = path.join(n.dir, 'test-ca');
  const sign = await makeCa(caDir);
  const record = path.join(n.dir, 'rotations.jsonl');
  await n.behave({ server: {}, certificate: { record } });
  return {
    node: n,
    async issue(nodePath, fromDays, toDays, outside = false) {
      const out = path.join(caDir, 'out.crt');
      sign(out, path.posix.basename(nodePath, '.crt'), Date.now() + fromDays * DAY, Date.now() + toDays * DAY);
      const file = outside ? nodePath : n.root(nodePath);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, await readFile(out));
      await writeFile(file.replace(/\.crt$/, '.key'), await readFile(`${out}.key`));
    },
    async rotations() {
      const text = await readFile(record, 'utf8').catch(() => '');
      return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { args: string[]; at: string });
    },
  };
}

async function run(n: Node, names: GuardName[], opts: { bootstrapper?: 'rancherd' | 'hvagent'; extra?: Record<string, unknown> } = {}): Promise<{ status: StatusDocument; sink: MemorySink }> {
  const settings = defaultSettings();
  settings.backoff = { initialMs: 10, maxMs: 20 };
  for (const g of names) settings.guards[g] = { ...n.settings, ...(opts.extra ?? {}) };
  const sink = new MemorySink();
  const by = opts.bootstrapper ?? 'hvagent';
  const r = await runGuards({ mode: 'once', rootDir: n.dir, settings, config: createConfig, log: new Logger(sink, new Redactor(), 'debug'), signal: new AbortController().signal, names, bootstrap: { by, why: 'the test says so' } });
  return { status: r.status, sink };
}

const certs = (s: StatusDocument) => s.guards.find((g) => g.name === 'certificates')!;
const SERVING = `${TLS_DIR}/serving-kube-apiserver.crt`;
const SUPERVISOR = `${TLS_DIR}/serving-kube-supervisor.crt`;
const KUBELET = '/var/lib/rancher/rke2/agent/client-kubelet.crt';

describe('certificates guard (certificates by openssl, the rke2 stand-in)', () => {
  it('valid and expiring certificates: days left in status.json and a timestamp per certificate in the metrics; no rotate', async () => {
    const c = await certNode();
    node = c.node;
    await c.issue(SUPERVISOR, -300, 65.5);
    await c.issue(KUBELET, -1, 12.5);
    await writeFile(node.root(`${TLS_DIR}/broken.crt`), 'not a certificate\n');
    const { status } = await run(node, ['certificates']);
    const g = certs(status);
    expect(g.phase).toBe('succeeded');
    // makeNode's own TLS files (server-ca, serving-kube-apiserver, client-admin) last 2 days.
    expect(g.detail).toMatch(/^expiring: 4 of 5 RKE2 certificates; soonest: (server-ca|client-admin|serving-kube-apiserver)\.crt expires in 1 day \(\d{4}-\d\d-\d\d\); 1 unreadable \(broken\.crt\)$/);
    const rows = (g.data as { certificates: Array<{ path: string; daysLeft: number; level: string }> }).certificates;
    expect(rows.find((r) => r.path === KUBELET)).toMatchObject({ daysLeft: 12, level: 'expiring' });
    expect(rows.find((r) => r.path === SUPERVISOR)).toMatchObject({ daysLeft: 65, level: 'ok' });
    expect((g.data as { notes: string[] }).notes[0]).toMatch(/^\/var\/lib\/rancher\/rke2\/server\/tls\/broken\.crt: not a PEM certificate/);
    const prom = await readFile(node.root('/var/lib/node_exporter/textfile_collector/hvagent.prom'), 'utf8');
    const line = prom.split('\n').find((l) => l.startsWith(`hvagent_rke2_certificate_expiry_timestamp_seconds{path="${KUBELET}",scope="agent"} `));
    const notAfter = Number(line?.split(' ')[1]) * 1000;
    expect(Math.abs(notAfter - (Date.now() + 12.5 * DAY))).toBeLessThan(600_000);
    expect(await c.rotations()).toEqual([]);
  });

  it('server certificates that expired while RKE2 was off: rke2 certificate rotate once, before RKE2 starts, then RKE2 runs on the new ones', async () => {
    const c = await certNode();
    node = c.node;
    // The new certificates the stand-in's rotate puts in place (RKE2 itself makes them at its start).
    const fresh = path.join(node.dir, 'fresh-tls');
    await makeTls(fresh);
    await c.issue(path.join(fresh, 'serving-kube-supervisor.crt'), -1, 365, true);
    await node.behave({ server: {}, certificate: { record: path.join(node.dir, 'rotations.jsonl'), freshDir: fresh } });
    await c.issue(SERVING, -400, -35);
    await c.issue(SUPERVISOR, -400, -35);
    await writeDropIn(node, '90-harvester-server.yaml', 'cni: multus,canal\n');
    const { status } = await run(node, ['certificates', 'rke2']);
    const rotations = await c.rotations();
    expect(rotations).toEqual([{ args: ['rotate', '--data-dir', node.root('/var/lib/rancher/rke2')], at: expect.any(String) }]);
    const g = certs(status);
    expect(g.phase).toBe('succeeded');
    expect(g.detail).toMatch(/^rotated the expired server certificates \(.*Server certificates rotated \(stand-in\).*\); expiring: 3 of 4 RKE2 certificates; soonest: /);
    const record = JSON.parse(await readFile(node.root(ROTATION_RECORD_PATH), 'utf8')) as { outcome: string };
    expect(record).toMatchObject({ outcome: 'rotated', expired: [{ path: SERVING }, { path: SUPERVISOR }] });
    // RKE2 started after the rotate, on the new certificates: the readiness probe verifies the
    // serving certificate (an expired one fails it), and the stand-in's start is after the rotate.
    expect(status.guards.find((x) => x.name === 'rke2')).toMatchObject({ phase: 'succeeded', detail: 'rke2-server ready (process)' });
    const started = (JSON.parse(await readFile(node.root('/run/hvagent/rke2-server.pid'), 'utf8')) as { startedAt: string }).startedAt;
    expect(Date.parse(started)).toBeGreaterThanOrEqual(Date.parse(rotations[0]!.at));
  });

  it('a rotate that renews nothing is not run twice (the record survives a restart), and RKE2 is held with the reason', async () => {
    const c = await certNode();
    node = c.node;
    await c.issue(SERVING, -400, -35);
    const first = await run(node, ['certificates', 'rke2']);
    expect(certs(first.status)).toMatchObject({ phase: 'failed' });
    expect(certs(first.status).lastError).toMatch(/^rotated the expired server certificates .*EXPIRED: 1 of 3 RKE2 certificates; soonest: serving-kube-apiserver\.crt expired on .*hvagent ran rke2 certificate rotate for these certificates at .* and they are still expired; it does not run it twice/);
    expect(first.status.guards.find((x) => x.name === 'rke2')).toMatchObject({ phase: 'failed', lastError: 'not run: dependency certificates failed' });
    // The agent restarts (a reboot): the same expired certificates, the record on disk.
    const second = await run(node, ['certificates', 'rke2']);
    expect(await c.rotations()).toHaveLength(1);
    expect(certs(second.status).lastError).toMatch(/^EXPIRED: 1 of 3 .*and they are still expired; it does not run it twice: systemctl stop rke2-server; rke2 certificate rotate; systemctl start rke2-server, then hvagent once --guard certificates$/);
    expect(certs(second.status).hint).toMatch(/^rotate by hand/);
  });

  it('a rotate that fails: its output in the status, recorded, not run again after a restart', async () => {
    const c = await certNode();
    node = c.node;
    await node.behave({ server: {}, certificate: { record: path.join(node.dir, 'rotations.jsonl'), fail: 'open /var/lib/rancher/rke2/server/tls: read-only file system' } });
    await c.issue(SERVING, -400, -1);
    const first = await run(node, ['certificates']);
    expect(certs(first.status).phase).toBe('failed');
    expect(certs(first.status).lastError).toMatch(/^rke2 certificate rotate failed for serving-kube-apiserver\.crt: .* exited 1: .*read-only file system"$/);
    expect((certs(first.status).data as { rotation: { outcome: string } }).rotation.outcome).toBe('failed');
    const second = await run(node, ['certificates']);
    expect(await c.rotations()).toHaveLength(1);
    expect(certs(second.status).lastError).toContain('and it failed: ');
  });

  it('under rancherd: expired certificates reported, never rotated, RKE2 never held', async () => {
    const c = await certNode();
    node = c.node;
    await c.issue(SERVING, -400, -35);
    const { status } = await run(node, ['certificates'], { bootstrapper: 'rancherd' });
    expect(certs(status)).toMatchObject({ phase: 'succeeded' });
    expect(certs(status).detail).toMatch(/^EXPIRED: 1 of 3 RKE2 certificates; soonest: serving-kube-apiserver\.crt expired on /);
    expect((certs(status).data as { notes: string[] }).notes).toContain('rancherd owns RKE2 here: hvagent reports and does not rotate; on the node: systemctl stop rke2-server; rke2 certificate rotate; systemctl start rke2-server');
    expect(await c.rotations()).toEqual([]);
    await expect(readFile(node.root(ROTATION_RECORD_PATH))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('rke2-server already running (the agent restarted): not stopped, not rotated', async () => {
    const c = await certNode();
    node = c.node;
    await c.issue(SUPERVISOR, -400, -35);
    const services = new ProcessRke2Services(node.settings.binary as string, node.root, node.settings.env as Record<string, string>);
    await services.start('server');
    const { status } = await run(node, ['certificates']);
    expect(certs(status).phase).toBe('succeeded');
    expect((certs(status).data as { notes: string[] }).notes[0]).toMatch(/^rke2-server is running: hvagent rotates only before it starts RKE2/);
    expect(await c.rotations()).toEqual([]);
    expect((await services.state('server')).active).toBe(true);
  });

  it('sends a Warning Event on the Node when the API answers, and says why not when it does not', async () => {
    const c = await certNode();
    node = c.node;
    const quiet = await run(node, ['certificates']);
    expect(certs(quiet.status).data).toMatchObject({ eventSent: false, eventProblem: 'no kubeconfig yet (/etc/rancher/rke2/rke2.yaml, /var/lib/rancher/rke2/agent/kubelet.kubeconfig)' });
    api = await startKubeApiDouble(node.root(TLS_DIR));
    await node.writeKubeconfig('/etc/rancher/rke2/rke2.yaml', api.url);
    const { status } = await run(node, ['certificates']);
    expect(certs(status).data).toMatchObject({ level: 'expiring', eventSent: true });
    expect(api.events).toHaveLength(1);
    expect(api.events[0]).toMatchObject({ namespace: 'default', body: { type: 'Warning', reason: 'RKE2CertificateExpiring', involvedObject: { kind: 'Node', name: 'node-2' }, source: { component: 'hvagent' } } });
    // The detail, then what a person does (makeNode's server CA runs out too: rotate does not renew it).
    expect(api.events[0]!.body.message).toBe(`${certs(status).detail}. a CA certificate expires: rke2 certificate rotate does not renew CAs (rke2 certificate rotate-ca, docs.rke2.io/security/certificates)`);
  });
});
