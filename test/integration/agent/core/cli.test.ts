/**
 * The hvagent command as systemd runs it: the built CLI (dist/, from `make build`) as a child
 * process with --root, a settings file, JSON-lines logs on stderr, the status document, `status`,
 * and SIGTERM/SIGINT.
 */
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serialiseHarvesterConfig } from '../../../../config/index.js';
import type { StatusDocument } from '../../../../agent/guard.js';

const CLI = path.resolve('dist/agent/cli.js');
let root: string;
const children = new Set<ReturnType<typeof spawn>>();

beforeAll(async () => {
  await access(CLI).catch(() => {
    throw new Error(`${CLI} is missing: run make build first`);
  });
});
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'hvagent-cli-'));
});
afterEach(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
  await rm(root, { recursive: true, force: true });
});

function start(args: string[]) {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

async function hvagent(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = start(args);
  const code = await p.exited;
  return { code, stdout: p.out(), stderr: p.err() };
}

async function setupNode(setting: string): Promise<void> {
  await mkdir(path.join(root, 'oem'), { recursive: true });
  await writeFile(path.join(root, 'oem/harvester.config'), await serialiseHarvesterConfig({ schemeVersion: 1, token: 'cluster-join-token-xyz', install: { mode: 'create', vip: '10.0.0.100', vipMode: 'static' }, systemSettings: { 'containerd-registry': setting } }));
  await mkdir(path.join(root, 'etc/hvagent'), { recursive: true });
  await writeFile(path.join(root, 'etc/hvagent/config.yaml'), 'backoff: {initial: 100ms, max: 1s}\nguards:\n  registries:\n    checkIntervalMs: 60000\n');
}

async function status(): Promise<StatusDocument | undefined> {
  return JSON.parse(await readFile(path.join(root, 'run/hvagent/status.json'), 'utf8').catch(() => 'null')) as StatusDocument | undefined;
}

async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const SETTING = '{"Mirrors":{"docker.io":{"Endpoints":["https://m.example"]}},"Configs":{"m.example":{"Auth":{"Username":"u","Password":"registry-pass-xyz"}}}}';

describe('hvagent CLI', () => {
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    it(`run keeps watching until ${sig}, then exits 0 with the status document saying stopped`, async () => {
      await setupNode(SETTING);
      const agent = start(['run', '--root', root, '--guard', 'registries']);
      await until('registries watching', async () => (await status())?.guards[0]?.phase === 'watching');

      const table = await hvagent(['status', '--root', root]);
      expect(table.code).toBe(0);
      expect(table.stdout).toMatch(/^hvagent run: running \(pid \d+\)/);
      expect(table.stdout).toMatch(/\nregistries\s+watching\s+1\s+-\s+\d\d:\d\d:\d\d\s+\d\d:\d\d:\d\d\s+\/etc\/rancher\/rke2\/registries\.yaml from \/oem\/harvester\.config system_settings\.containerd-registry: mirrors for docker\.io \(credentials; mode 0600\)\n/);
      const json = await hvagent(['status', '--json', '--root', root]);
      expect((JSON.parse(json.stdout) as StatusDocument).guards.map((g) => g.name)).toEqual(['registries']);

      agent.child.kill(sig);
      expect(await agent.exited).toBe(0);
      const doc = await status();
      expect(doc).toMatchObject({ state: 'stopped', mode: 'run' });
      expect(doc!.guards[0]!.phase).toBe('stopped');
      const logs = agent.err().trim().split('\n').map((l) => JSON.parse(l) as { msg: string; level: string });
      expect(logs.map((l) => l.msg)).toEqual(expect.arrayContaining(['node config loaded', 'guard succeeded', 'stopping', 'hvagent stopped']));
      expect(agent.err()).not.toContain('registry-pass-xyz');
      expect(agent.err()).not.toContain('cluster-join-token-xyz');

      const after = await hvagent(['status', '--root', root]);
      expect(after.stdout).toMatch(/^hvagent run: stopped \(pid \d+\)/);
    });
  }

  it('run tells systemd it is preparing, then READY=1 after it, though it does not wait for the first to start its guards', async () => {
    await setupNode(SETTING);
    // A systemd-notify that takes its time with the first message, as a busy booting node does.
    const bin = path.join(root, 'fake-bin');
    const sent = path.join(root, 'notify-sent');
    await mkdir(bin);
    const doneAt = path.join(root, 'notify-preparing-done');
    await writeFile(path.join(bin, 'systemd-notify'), `#!/bin/sh\ncase "$1" in STATUS=preparing*) sleep 1; date +%s%3N > '${doneAt}' ;; esac\necho "$*" >> '${sent}'\n`, { mode: 0o755 });
    const child = spawn(process.execPath, [CLI, 'run', '--root', root, '--guard', 'registries'], { stdio: ['ignore', 'ignore', 'ignore'], env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, NOTIFY_SOCKET: '/run/hv-test-no-socket' } });
    children.add(child);
    const exited = new Promise((resolve) => child.on('exit', resolve));
    await until('READY=1 sent', async () => (await readFile(sent, 'utf8')).includes('READY=1'));
    const lines = (await readFile(sent, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('STATUS=preparing the node (bootstrap: hvagent)');
    expect(lines[1]).toMatch(/^READY=1 STATUS=node prepared: registries ok/);
    // the guard had finished before the slow first message was out
    const doc = await status();
    expect(Date.parse(doc!.guards[0]!.finishedAt!)).toBeLessThan(Number(await readFile(doneAt, 'utf8')));
    child.kill('SIGTERM');
    await exited;
  });

  it('once exits 0 when the guards succeed and 1 when one fails; status then exits 1 too', async () => {
    await setupNode(SETTING);
    expect((await hvagent(['once', '--root', root, '--guard', 'registries'])).code).toBe(0);
    expect((await status())!.state).toBe('finished');
    await readFile(path.join(root, 'etc/rancher/rke2/registries.yaml'), 'utf8');

    await setupNode('{"Mirrors": 3}');
    const bad = await hvagent(['once', '--root', root, '--guard', 'registries']);
    expect(bad.code).toBe(1);
    const st = await hvagent(['status', '--root', root]);
    expect(st.code).toBe(1);
    expect(st.stdout).toMatch(/registries\s+failed\s+1 .*Mirrors must be an object/);
  });

  it('usage errors exit 2 with a message and no stack trace', async () => {
    const r = await hvagent(['once', '--guard', 'network-offline', '--root', root]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("hvagent: error: unknown guard 'network-offline' (guards: network-online, node-identity, time-sync, certificates, registries, image-preload, rke2, vip, longhorn-disk, promotion)\n  hint: run 'hvagent --help' for usage\n");
    const s = await hvagent(['status', '--root', root]);
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/^hvagent: error: no status document at .*\/run\/hvagent\/status\.json\n  hint: hvagent has not run on this node yet/);
    const settings = path.join(root, 'bad.yaml');
    await writeFile(settings, 'guards:\n  registries:\n    deadline: whenever\n');
    const b = await hvagent(['once', '--root', root, '--settings', settings]);
    expect(b.code).toBe(2);
    expect(b.stderr).toContain(`${settings}: guards.registries.deadline: invalid duration "whenever"`);
    expect((await hvagent(['frobnicate'])).code).toBe(2);
    expect((await hvagent(['--help'])).code).toBe(0);
  });
});
