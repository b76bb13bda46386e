/** The operator's side: the token file (created 0600, refused when others can read it), the bearer check, what /healthz calls degraded, the `hvpxe machines` table. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type http from 'node:http';
import { authorised, healthReport, loadAdminToken } from '../../../pxe/admin.js';
import { machinesTable } from '../../../pxe/machines-command.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hvpxe-admin-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const req = (authorization?: string): http.IncomingMessage => ({ headers: authorization === undefined ? {} : { authorization } }) as http.IncomingMessage;

describe('loadAdminToken', () => {
  it('creates a random token 0600 when there is none, and reads it back the next time', async () => {
    const file = path.join(dir, 'state', 'admin-token');
    const first = await loadAdminToken(file);
    expect(first.created).toBe(true);
    expect(first.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).toBe(`${first.token}\n`);
    expect(await loadAdminToken(file)).toEqual({ token: first.token, created: false });
    expect((await loadAdminToken(path.join(dir, 'other-token'))).token).not.toBe(first.token);
  });

  it('refuses a token others can read, a short one, and (for hvpxe machines) a missing one', async () => {
    const open = path.join(dir, 'open-token');
    await writeFile(open, 'a-long-enough-token-123\n', { mode: 0o644 });
    await chmod(open, 0o644);
    await expect(loadAdminToken(open)).rejects.toMatchObject({ message: `the admin token ${open} is readable by others (mode 644)`, hint: `chmod 600 ${open}`, exitCode: 2 });
    const short = path.join(dir, 'short-token');
    await writeFile(short, 'short\n', { mode: 0o600 });
    await expect(loadAdminToken(short)).rejects.toThrow('must be one word of at least 16 characters');
    await expect(loadAdminToken(path.join(dir, 'none'), false)).rejects.toThrow(/cannot read the admin token .*none: ENOENT/);
  });
});

describe('authorised', () => {
  const token = 'the-operator-token-0123456789';
  it('takes exactly the bearer token', () => {
    expect(authorised(req(`Bearer ${token}`), token)).toBe(true);
    expect(authorised(req(`bearer  ${token} `), token)).toBe(true);
    for (const bad of [undefined, '', token, `Bearer ${token}x`, `Bearer ${token.slice(1)}`, `Basic ${token}`, `Bearer ${token} extra`, 'Bearer ']) expect(authorised(req(bad), token)).toBe(false);
  });
});

describe('healthReport', () => {
  const fine = { reloadRefused: false, historyLost: false };
  it('is ok with nothing to look at, degraded with each problem said', () => {
    expect(healthReport(fine, 0)).toEqual({ status: 'ok', problems: [] });
    expect(healthReport({ ...fine, historyWritable: true }, 0).status).toBe('ok');
    const all = healthReport({ reloadRefused: true, lastReloadError: 'bad yaml', historyLost: true, lostAt: 'T1', lostKeptAs: '/s/x.corrupt', historyWritable: false, historyFile: '/s/machines.json', historyFailingSince: 'T2', historyLastError: 'EIO' }, 2);
    expect(all).toEqual({
      status: 'degraded',
      problems: [
        'the last reload of profiles.yaml was refused (still serving the previous profiles): bad yaml',
        'the machine history /s/machines.json cannot be written since T2 (EIO); retrying, and no config is served until it can',
        'the machine history was lost at T1 (kept as /s/x.corrupt): every machine boots its disk until `hvpxe rearm`',
        '2 machines held on local boot because hvpxe cannot tell whether they finished installing (`hvpxe machines`; `hvpxe rearm` installs)',
      ],
    });
    expect(healthReport(fine, 1).problems).toEqual(['1 machine held on local boot because hvpxe cannot tell whether it finished installing (`hvpxe machines`; `hvpxe rearm` installs)']);
  });
});

describe('machinesTable: a node report', () => {
  it('says what the installed node reported, after its line', () => {
    const out = machinesTable([{ name: 'node-1', group: 'rack1', nodeReport: { event: 'FALLBACK', at: 'T', summary: 'node upgrade fell back from v3, runs v2' }, boot: { next: 'local', why: 'installed' } }]);
    expect(out.split('\n')[2]).toBe('node-1: reported T: node upgrade fell back from v3, runs v2');
  });
});

describe('machinesTable', () => {
  it('one line per machine, then what needs the operator', () => {
    const out = machinesTable([
      { name: 'node-1', group: 'rack1', lastSeen: '2026-12-01T10:00:00Z', lastAddress: '10.0.0.11', progress: { event: 'step', summary: 'step 4/9 deploy done' }, boot: { next: 'install', why: 'x' } },
      { name: 'node-2', group: 'rack1', hold: { why: 'hvpxe stopped while its install was running' }, refusals: [{ at: 'T', what: 'config', reason: 'used' }], boot: { next: 'local', why: 'held', loop: 'asked 3 times' } },
    ]);
    expect(out.split('\n')).toEqual([
      'MACHINE  GROUP  NEXT BOOT  LAST SEEN                       PROGRESS',
      'node-1   rack1  install    2026-12-01T10:00:00Z 10.0.0.11  step 4/9 deploy done',
      'node-2   rack1  local      -                               -',
      'node-2: held on local boot: hvpxe stopped while its install was running; `hvpxe rearm node-2` installs it',
      'node-2: asked 3 times',
      'node-2: 1 refused request, the last T: config: used',
      '',
    ]);
  });
});
