/**
 * TPM 2.0 attestation for real: two software TPMs (swtpm, the TPM QEMU gives its guests), the
 * installer's side as the live system runs it (prepareAutomaticInstall with Debian's tpm2-tools),
 * the built `hvpxe serve`. The machine enrolled by its TPM's endorsement key (its sha256 taken with
 * tpm2-tools, not with hvpxe's code) gets its config; a second machine with the same MAC and another
 * TPM gets nothing and leaves a refusal the operator sees; an enrolled machine that skips the
 * attestation gets no config either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { prepareAutomaticInstall } from '../../../installer/remote/automatic.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { waitUntil } from '../../../lib/wait.js';
import { adminGet, bootIpxe, machineOf, makeTree, profilesYaml, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let hv: Running | undefined;
const tpms: Array<{ proc: ChildProcess; tcti: string }> = [];
let enrolled: string;
let other: string;

/** A port free right now whose next port is free too (tpm2-tools reach swtpm's control channel at port + 1). */
async function portPair(): Promise<number> {
  for (;;) {
    const a = net.createServer();
    await new Promise<void>((r) => a.listen(0, '127.0.0.1', r));
    const port = (a.address() as net.AddressInfo).port;
    const b = net.createServer();
    const free = await new Promise<boolean>((r) => {
      b.once('error', () => r(false));
      b.listen(port + 1, '127.0.0.1', () => r(true));
    });
    await Promise.all([new Promise((r) => a.close(r)), free ? new Promise((r) => b.close(r)) : Promise.resolve()]);
    if (free && port < 65535) return port;
  }
}

/** A swtpm listening on loopback, its state in `state`; the tcti tpm2-tools reach it with. */
async function startTpm(state: string): Promise<void> {
  await mkdir(state, { recursive: true });
  const server = await portPair();
  const ctrl = server + 1;
  const proc = spawn('swtpm', ['socket', '--tpm2', '--tpmstate', `dir=${state}`, '--server', `type=tcp,port=${server},bindaddr=127.0.0.1`, '--ctrl', `type=tcp,port=${ctrl},bindaddr=127.0.0.1`, '--flags', 'not-need-init,startup-clear'], { stdio: 'ignore' });
  const tcti = `swtpm:host=127.0.0.1,port=${server}`;
  tpms.push({ proc, tcti }); // stopped in afterAll, whatever happens next
  await waitUntil(
    async () => {
      try {
        execFileSync('tpm2_getrandom', ['8', '--hex'], { env: { ...process.env, TPM2TOOLS_TCTI: tcti }, stdio: 'pipe' });
        return { done: true as const, value: true };
      } catch (err) {
        return { done: false as const, reason: String(err) };
      }
    },
    { what: 'swtpm to answer', timeoutMs: 20_000, intervalMs: 100 },
  );
}

/** The EK's sha256 as an operator takes it: tpm2_createek writes the public key as DER, sha256 of that. */
async function ekSha256Of(tcti: string, work: string): Promise<string> {
  const env = { ...process.env, TPM2TOOLS_TCTI: tcti };
  execFileSync('tpm2_createek', ['-G', 'rsa', '-c', path.join(work, 'ek.ctx'), '-u', path.join(work, 'ek.der'), '-f', 'der'], { env, stdio: 'pipe' });
  execFileSync('tpm2_flushcontext', ['-t'], { env, stdio: 'pipe' });
  return createHash('sha256').update(await readFile(path.join(work, 'ek.der'))).digest('hex');
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-tpm-'));
  tree = await makeTree(dir);
  for (const name of ['tpm-a', 'tpm-b']) await startTpm(path.join(dir, name));
  enrolled = await ekSha256Of(tpms[0]!.tcti, await mkdtemp(path.join(dir, 'ek-a-')));
  other = await ekSha256Of(tpms[1]!.tcti, await mkdtemp(path.join(dir, 'ek-b-')));
  expect(enrolled).not.toBe(other);
  const profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree).replace('{ hostname: node-1, mac: "52:54:00:00:00:01", role: management }', `{ hostname: node-1, mac: "52:54:00:00:00:01", role: management, tpm_ek_sha256: "${enrolled}" }`));
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state')]);
}, 120_000);

afterAll(async () => {
  await stopHvpxe(hv);
  for (const t of tpms) t.proc.kill('SIGTERM');
  await rm(dir, { recursive: true, force: true });
});

/** The kernel arguments of a machine's script, as the live system finds them in /proc/cmdline. */
function cmdlineOf(script: string): string {
  return script.split('\n').find((l) => l.startsWith('kernel '))!.replace(/^kernel \S+ /, '').replace(/ \|\| goto failed$/, '');
}

const fast = { attempts: 2, retryDelayMs: 200, timeoutMs: 10_000 };

describe('TPM 2.0 attestation', () => {
  it('the machine enrolled by its EK proves its TPM and gets its config', async () => {
    const boot = await bootIpxe(hv!, 'mac=52:54:00:00:00:01');
    expect(boot.attest).toBe(`${hv!.url}/attest/node-1?credential=${boot.credential}`);
    const sink = new MemorySink();
    const a = await prepareAutomaticInstall(cmdlineOf(boot.script), { fetch: fast, log: new Logger(sink), tpm: { tcti: tpms[0]!.tcti } });
    expect(a.config.token).toBe('cluster-token-xyz123');
    expect(sink.lines.join('')).toContain('TPM attestation accepted');
    expect(sink.lines.join('')).not.toContain(boot.credential);
    const m = await machineOf(hv!, 'node-1');
    expect(m.credentials.at(-1)).toMatchObject({ attestedAt: expect.any(String), configAt: expect.any(String) });
    expect(hv!.stderr.join('')).toContain('"msg":"machine proved its enrolled TPM","machine":"node-1"');
  });

  it('another TPM with the same MAC (and so the same script) gets nothing, and the operator sees why', async () => {
    const boot = await bootIpxe(hv!, 'mac=52:54:00:00:00:01');
    const err = await prepareAutomaticInstall(cmdlineOf(boot.script), { fetch: fast, log: new Logger(new MemorySink()), tpm: { tcti: tpms[1]!.tcti } }).catch((e: Error & { exitCode?: number }) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(`hvpxe refused the TPM attestation (challenge): HTTP 403: refused: the machine's TPM has endorsement key sha256 ${other}, not the enrolled ${enrolled}`);
    expect((err as { exitCode: number }).exitCode).toBe(3);
    // Its config URL, tried without the attestation, is refused too.
    const config = await fetch(boot.config!);
    expect(config.status).toBe(403);
    expect(await config.text()).toBe('refused: this machine is enrolled by its TPM and has not proven it for this boot\n');
    const m = await machineOf(hv!, 'node-1');
    expect(m.refusals.map((r: { what: string; reason: string }) => `${r.what}: ${r.reason}`)).toEqual(
      expect.arrayContaining([`attest: the machine's TPM has endorsement key sha256 ${other}, not the enrolled ${enrolled}`, 'config: this machine is enrolled by its TPM and has not proven it for this boot']),
    );
    // Nor can it report a finished install for the enrolled machine.
    const succeeded = await fetch(boot.events!, { method: 'POST', body: '{"event":"SUCCEEDED"}' });
    expect(succeeded.status).toBe(403);
    expect((await machineOf(hv!, 'node-1')).installed).toBeUndefined();
    const metrics = (await adminGet(hv!, '/metrics')).text;
    expect(metrics).toMatch(/^hvpxe_refused_total\{what="attest",reason="tpm mismatch"\} 1$/m);
    expect(metrics).toMatch(/^hvpxe_refused_total\{what="config",reason="not attested"\} 1$/m);
  });

  it('a machine that is not enrolled gets no attestation URL and its config as before', async () => {
    const boot = await bootIpxe(hv!, 'mac=52:54:00:00:00:02');
    expect(boot.attest).toBeUndefined();
    expect((await fetch(boot.config!)).status).toBe(200);
    expect((await fetch(`${hv!.url}/attest/node-2?credential=${boot.credential}`, { method: 'POST', body: '{}' })).status).toBe(404);
  });
});
