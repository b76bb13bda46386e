import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { PxeServer } from '../../../pxe/server.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { startFixtureServer, validatorDouble } from './helpers.js';

let dir: string;
let server: PxeServer;

beforeAll(async () => {
  ({ dir, server } = await startFixtureServer('hv-pxe-unit-'));
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

describe('PxeServer (validator test double)', () => {
  it('keeps /machines bounded however many made-up MACs hit the default group', async () => {
    for (let i = 0; i < 1010; i++) {
      const mac = `02:00:00:00:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
      await (await fetch(`${server.url}/ipxe/auto?mac=${mac}`)).text();
    }
    const { machines } = (await (await fetch(`${server.url}/machines`)).json()) as { machines: Array<{ name: string }> };
    expect(machines.length).toBeLessThanOrEqual(1000 + 4); // the cap plus the four declared machines
    expect(machines.map((m) => m.name)).toEqual(expect.arrayContaining(['node-1', 'node-2', 'node-3', 'spare-0200000003f1']));
  });

  it('publishes <artifact>.sha256 for declared artifacts only', async () => {
    const r = await fetch(`${server.url}/artifacts/harvester.iso.sha256`);
    expect(await r.text()).toBe(`${createHash('sha256').update('harvester.iso').digest('hex')}  harvester.iso\n`);
    expect((await fetch(`${server.url}/artifacts/undeclared.sha256`)).status).toBe(404);
  });

  it('refuses to start on a missing --root', async () => {
    const s = new PxeServer({ root: path.join(dir, 'nope'), profilesPath: path.join(dir, 'profiles.yaml'), host: '127.0.0.1', port: 0, log: new Logger(new MemorySink()), validate: validatorDouble });
    await expect(s.start()).rejects.toThrow(/--root .*nope is not a readable directory/);
  });
});
