/**
 * The systemd units: `systemd-analyze verify` accepts them (with the man pages make build writes, so
 * Documentation=man: resolves), hvpxe.service's exposure stays low, and `systemctl reload hvpxe`
 * (its ExecReload, SIGHUP) really re-reads profiles.yaml in a running hvpxe serve.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';

const REPO = path.resolve(__dirname, '../../..');
const tmp = mkdtempSync('/tmp/hv-units-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The unit with its ExecStart pointed at this checkout's launcher (verify checks the binary exists). */
function localCopy(unit: string, prog: string): string {
  const text = readFileSync(path.join(REPO, unit), 'utf8').replaceAll(`/usr/local/bin/${prog}`, path.join(REPO, 'bin', prog));
  const out = path.join(tmp, path.basename(unit));
  writeFileSync(out, text);
  return out;
}

const analyze = (args: string[]) => spawnSync('systemd-analyze', args, { encoding: 'utf8', env: { ...process.env, MANPATH: path.join(REPO, 'dist/share/man') } });

/** systemd-analyze security's overall exposure score of a unit file (0 safe … 10 unsafe). */
function exposure(unit: string): number {
  const r = analyze(['security', '--offline=true', unit]);
  return Number(/Overall exposure level for \S+: ([\d.]+)/.exec(r.stdout + r.stderr)?.[1]);
}

describe('systemd units', () => {
  it.each([
    ['agent/hvagent.service', 'hvagent'],
    ['agent/hvagent-console.service', 'hvagent'],
    ['pxe/hvpxe.service', 'hvpxe'],
  ])('%s passes systemd-analyze verify', (unit, prog) => {
    const r = analyze(['verify', localCopy(unit, prog)]);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('verify is a real oracle: a misspelt directive fails it', () => {
    const bad = path.join(tmp, 'bad.service');
    writeFileSync(bad, readFileSync(localCopy('pxe/hvpxe.service', 'hvpxe'), 'utf8').replace('ProtectSystem=strict', 'ProtectSystm=strict'));
    const r = analyze(['verify', bad]);
    expect(r.stderr).toContain("Unknown key 'ProtectSystm'");
  });

  it('hvpxe.service: exposure below 2.5 (systemd-analyze security) and ExecReload sends SIGHUP', () => {
    const unit = localCopy('pxe/hvpxe.service', 'hvpxe');
    expect(exposure(unit)).toBeLessThan(2.5);
    expect(readFileSync(unit, 'utf8')).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  });

  it('hvagent.service: hardened as far as a root agent that mounts for the host allows (exposure below 6; 9.6 unhardened)', () => {
    const unit = localCopy('agent/hvagent.service', 'hvagent');
    expect(exposure(unit)).toBeLessThan(6);
    const bare = path.join(tmp, 'hvagent-bare.service');
    writeFileSync(bare, '[Service]\nExecStart=/bin/true\n');
    expect(exposure(bare)).toBeGreaterThan(9);
  });
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('hvpxe serve reloads on SIGHUP', () => {
  it('a SIGHUP re-reads profiles.yaml: the reload counter moves, and a broken file is refused', { timeout: 60_000 }, async () => {
    const dir = path.join(tmp, 'pxe');
    mkdirSync(dir);
    expect(spawnSync(path.join(REPO, 'bin/hvpxe'), ['init', dir], { encoding: 'utf8' }).status).toBe(0);
    // The example's artifacts and real-looking secrets, the way its README says (placeholders are refused).
    const profiles0 = path.join(dir, 'profiles.yaml');
    let text = readFileSync(profiles0, 'utf8');
    for (const m of text.matchAll(/path: (\S+), sha256: "(0{64})"/g)) {
      const body = randomBytes(64);
      writeFileSync(path.join(dir, 'artifacts', m[1]!), body);
      text = text.replace(`path: ${m[1]}, sha256: "${m[2]}"`, `path: ${m[1]}, sha256: "${createHash('sha256').update(body).digest('hex')}"`);
    }
    writeFileSync(profiles0, text.replace('token: change-me-cluster-token', 'token: a-real-cluster-token-7f3a').replace('password: change-me', 'password: a-real-password-9c1e'));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const profiles = path.join(dir, 'profiles.yaml');
    const child = spawn(path.join(REPO, 'bin/hvpxe'), ['serve', '--root', path.join(dir, 'artifacts'), '--profiles', profiles, '--listen', `127.0.0.1:${port}`, '--server-url', url, '--admin-listen', '127.0.0.1:0', '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const waitFor = async (re: RegExp): Promise<void> => {
      for (let i = 0; i < 600 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 50));
      if (!re.test(out)) throw new Error(`hvpxe never logged ${re}:\n${out}`);
    };
    // /metrics is the operator's: on the admin listener, with the token hvpxe wrote to its state directory.
    const reloads = async (result: string): Promise<number> => {
      const [, admin, tokenFile] = /; admin (\S+) \(token in (\S+)\)/.exec(out)!;
      const text = await (await fetch(`${admin}/metrics`, { headers: { Authorization: `Bearer ${readFileSync(tokenFile!, 'utf8').trim()}` } })).text();
      return Number(new RegExp(`^hvpxe_reloads_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
    };
    try {
      await waitFor(/serving http/);
      expect(await reloads('ok')).toBe(0);
      child.kill('SIGHUP');
      await waitFor(/"msg":"reloaded"/);
      expect(await reloads('ok')).toBe(1);
      cpSync(profiles, profiles + '.good');
      writeFileSync(profiles, 'profiles: [not, a, map\n');
      child.kill('SIGHUP');
      await waitFor(/reload refused/);
      expect(await reloads('refused')).toBe(1);
      expect(await reloads('ok')).toBe(1);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
