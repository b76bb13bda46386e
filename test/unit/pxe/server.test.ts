import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { artifactContentType, PxeServer } from '../../../pxe/server.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { adminJson, startFixtureServer, validatorDouble } from './helpers.js';

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
    const { machines } = await adminJson(server, '/machines');
    expect(machines.length).toBeLessThanOrEqual(1000 + 4); // the cap plus the four declared machines
    expect(machines.map((m) => m.name)).toEqual(expect.arrayContaining(['node-1', 'node-2', 'node-3', 'spare-0200000003f1']));
  });

  it('publishes <artifact>.sha256 for declared artifacts only', async () => {
    const r = await fetch(`${server.url}/artifacts/harvester.iso.sha256`);
    expect(await r.text()).toBe(`${createHash('sha256').update('harvester.iso').digest('hex')}  harvester.iso\n`);
    expect((await fetch(`${server.url}/artifacts/undeclared.sha256`)).status).toBe(404);
  });

  // What edk2's HTTP Boot client does with the URL DHCP gave it: HEAD for the size and the media
  // type, then GET.
  it('serves an EFI binary as UEFI HTTP Boot asks for it: HEAD with its size and application/efi, then GET, ranges too', async () => {
    const efi = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(4094, 0x5a)]);
    await writeFile(path.join(dir, 'root', 'ipxe.efi'), efi);
    const head = await fetch(`${server.url}/artifacts/ipxe.efi`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('application/efi');
    expect(head.headers.get('content-length')).toBe('4096');
    expect(head.headers.get('accept-ranges')).toBe('bytes');
    expect((await head.arrayBuffer()).byteLength).toBe(0);
    const get = await fetch(`${server.url}/artifacts/ipxe.efi`);
    expect(get.headers.get('content-type')).toBe('application/efi');
    expect(Buffer.from(await get.arrayBuffer()).equals(efi)).toBe(true);
    const part = await fetch(`${server.url}/artifacts/ipxe.efi`, { headers: { Range: 'bytes=0-1' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-type')).toBe('application/efi');
    expect(part.headers.get('content-range')).toBe('bytes 0-1/4096');
    expect(await part.text()).toBe('MZ');
  });

  it('names an ISO by the RAM-disk type HTTP Boot mounts, and every other artifact octet-stream', async () => {
    expect((await fetch(`${server.url}/artifacts/harvester.iso`, { method: 'HEAD' })).headers.get('content-type')).toBe('application/vnd.efi-iso');
    expect((await fetch(`${server.url}/artifacts/k/initrd.img`, { method: 'HEAD' })).headers.get('content-type')).toBe('application/octet-stream');
    expect((await fetch(`${server.url}/artifacts/k/vmlinuz`, { method: 'HEAD' })).headers.get('content-type')).toBe('application/octet-stream');
    expect(artifactContentType('EFI/BOOT/BOOTX64.EFI')).toBe('application/efi');
    expect(artifactContentType('ipxe.efi.sig')).toBe('application/octet-stream');
    expect(artifactContentType('efi')).toBe('application/octet-stream');
    expect(artifactContentType('rootfs.squashfs')).toBe('application/octet-stream');
  });

  it('refuses to start on a missing --root', async () => {
    const s = new PxeServer({ root: path.join(dir, 'nope'), profilesPath: path.join(dir, 'profiles.yaml'), host: '127.0.0.1', port: 0, log: new Logger(new MemorySink()), validate: validatorDouble });
    await expect(s.start()).rejects.toThrow(/--root .*nope is not a readable directory/);
  });
});
