/**
 * Post-install node reports against the built `hvpxe serve`: the installer's own client trades a
 * boot credential for the machine's node-report token (only once its config was served, once per
 * credential), hvagent's own client posts a FALLBACK with it, and hvpxe keeps it in the machine's
 * history (across a restart) without changing what the machine boots next. Refused: no token, a
 * forged one, another machine's, an install event carried by a node token, a token for a boot
 * whose config was never served.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Logger } from '../../../lib/logger.js';
import { requestReportToken, reportTokenUrl } from '../../../installer/remote/node-report.js';
import { tellHvpxe } from '../../../agent/assessment/tell-hvpxe.js';
import type { NodeReportGrant } from '../../../config/hvpxe-protocol.js';
import { bootIpxe, machineOf, serveDir, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
let state: string;
let hv: Running | undefined;
const log = new Logger({ write: () => undefined });

async function start(): Promise<void> {
  hv = await startHvpxe(['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', state]);
}

/** A machine's install up to its token: script, config served, token asked for with the installer's client. */
async function installUpToToken(mac: string): Promise<{ events: string; grant: NodeReportGrant | undefined }> {
  const { config, events } = await bootIpxe(hv!, `mac=${mac}&platform=pcbios`);
  expect((await fetch(config!)).status).toBe(200);
  return { events: events!, grant: await requestReportToken(events, log, { attempts: 1 }) };
}

async function grantFile(grant: NodeReportGrant, name: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, JSON.stringify(grant), { mode: 0o600 });
  return file;
}

const fallback = { event: 'FALLBACK' as const, at: '2026-12-03T07:00:00Z', message: 'network-online failed', running: 'v2', failed: 'v3' };
const tell = (file: string) => tellHvpxe(file, fallback, { log, now: Date.now, sleep: (ms) => new Promise((r) => setTimeout(r, ms)), deadlineMs: 5_000, retryDelayMs: 500 });
const postNode = (name: string, body: unknown, auth?: string) =>
  fetch(`${hv!.url}/node-events/${name}`, { method: 'POST', body: JSON.stringify(body), headers: auth ? { authorization: auth } : {} }).then((r) => r.status);

beforeAll(async () => {
  ({ dir, tree, profiles, state } = await serveDir('hv-pxe-node-report-'));
});
afterEach(async () => {
  await stopHvpxe(hv);
  hv = undefined;
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('node-report tokens and post-install events', () => {
  it('a token only for a running install, once; a FALLBACK kept that decides nothing, across a restart; other tokens refused', async () => {
    await start();
    // A boot whose config was never served gets no token.
    const early = await bootIpxe(hv!, 'mac=52:54:00:00:00:01&platform=pcbios');
    expect((await fetch(reportTokenUrl(early.events)!, { method: 'POST' })).status).toBe(403);

    const one = await installUpToToken('52:54:00:00:00:01');
    expect(one.grant?.token).toMatch(/^hvnr_[A-Za-z0-9_-]{43}$/);
    expect(one.grant?.url).toBe(`${hv!.url}/node-events/node-1`);
    // Once per boot credential.
    expect((await fetch(reportTokenUrl(one.events)!, { method: 'POST' })).status).toBe(403);
    // The install finishes: the machine boots its disk from now on.
    expect((await fetch(one.events, { method: 'POST', body: '{"event":"SUCCEEDED"}' })).status).toBe(204);
    const before = await machineOf(hv!, 'node-1');
    expect(before.boot.next).toBe('local');

    const file1 = await grantFile(one.grant!, 'node-1.json');
    const told = await tell(file1);
    expect(told).toMatchObject({ told: true });
    const after = await machineOf(hv!, 'node-1');
    expect(after.nodeReport).toMatchObject({ event: 'FALLBACK', summary: 'node upgrade fell back from v3, runs v2: network-online failed' });
    expect(after.events.at(-1)).toMatchObject({ event: 'FALLBACK', note: 'reported by the installed node' });
    expect(after.boot.next).toBe('local');
    expect(after.installed).toEqual(before.installed);
    expect(after.reportToken.issuedAt).toBeDefined();
    expect(JSON.stringify(after)).not.toContain(one.grant!.token);

    // Another machine's token, a forged one, none: refused and recorded; an install event never goes through a node token.
    const two = await installUpToToken('52:54:00:00:00:02');
    expect(await postNode('node-1', fallback, `Bearer ${two.grant!.token}`)).toBe(401);
    expect(await postNode('node-1', fallback, `Bearer hvnr_${'A'.repeat(43)}`)).toBe(401);
    expect(await postNode('node-1', fallback)).toBe(401);
    expect(await postNode('node-1', { event: 'SUCCEEDED', at: fallback.at }, `Bearer ${one.grant!.token}`)).toBe(400);
    expect(await postNode('node-2', { event: 'FAILED', at: fallback.at }, `Bearer ${two.grant!.token}`)).toBe(400);
    const refused = await machineOf(hv!, 'node-1');
    expect(refused.refusals.filter((r: { what: string }) => r.what === 'node-events')).toHaveLength(3);
    expect(refused.nodeReport.event).toBe('FALLBACK');
    expect((await machineOf(hv!, 'node-2')).installed).toBeUndefined();
    // The token unlocks nothing else: not the config, not install events.
    expect((await fetch(`${hv!.url}/config/node-1.yaml?credential=${one.grant!.token}`)).status).toBe(404);
    expect((await fetch(`${hv!.url}/events/node-1?credential=${one.grant!.token}`, { method: 'POST', body: '{"event":"FAILED"}' })).status).toBe(404);

    // A restart: the token and the report come back from the state directory.
    expect([...hv!.stdout, ...hv!.stderr].join('')).not.toContain(one.grant!.token);
    await stopHvpxe(hv);
    await start();
    expect((await machineOf(hv!, 'node-1')).nodeReport.event).toBe('FALLBACK');
    expect(await postNode('node-1', { event: 'UPGRADED', at: '2026-12-03T08:00:00Z', running: 'v4' }, `Bearer ${one.grant!.token}`)).toBe(204);
    const last = await machineOf(hv!, 'node-1');
    expect(last.nodeReport).toMatchObject({ event: 'UPGRADED', summary: 'node upgraded to v4' });
    expect(last.boot.next).toBe('local');
  });

  it("a reinstall's token replaces the old one: the old node's token is refused", async () => {
    // A history of its own: the first test left node-2's install running, so hvpxe holds it.
    state = path.join(dir, 'state-reinstall');
    await start();
    const first = await installUpToToken('52:54:00:00:00:02');
    const second = await installUpToToken('52:54:00:00:00:02');
    expect(await postNode('node-2', fallback, `Bearer ${first.grant!.token}`)).toBe(401);
    expect(await postNode('node-2', fallback, `Bearer ${second.grant!.token}`)).toBe(204);
  });
});
