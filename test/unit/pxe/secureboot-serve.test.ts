/**
 * hvpxe serve with a boot: grub-signed profile: what its TFTP server gives each machine (grub's
 * bootstrap, the machine's own script and nothing secret to another MAC, the signed binaries and
 * artifacts byte for byte), what it refuses (writes, other modes, names outside the root), the
 * refusal to start without the signed binaries or without --tftp, and the console message and
 * /machines event for a machine of an architecture no profile serves (grub and iPXE).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import type { PxeServer } from '../../../pxe/server.js';
import { adminJson, FAKE_EFI, postEvent, scriptUrls, startFixtureServer } from './helpers.js';
import { tftpGet, type TftpResult } from './tftp-client.js';

const grubSigned = (t: string): string => t.replace('    kernel_args:', '    boot: grub-signed\n    kernel_args:');
const SHIM = Buffer.concat([FAKE_EFI, Buffer.from('shim')]);
const GRUB = Buffer.concat([FAKE_EFI, Buffer.from('grub'), Buffer.alloc(5000, 1)]);

let dir: string;
let server: PxeServer;
let port: number;

beforeAll(async () => {
  ({ dir, server } = await startFixtureServer('hv-pxe-sb-', { edit: grubSigned, files: { 'shimx64.efi': SHIM, 'grubx64.efi': GRUB }, tftp: true }));
  port = server.tftpAddress!.port;
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

function text(r: TftpResult): string {
  if ('error' in r) throw new Error(`TFTP error ${r.error}: ${r.message}`);
  return r.data.toString('utf8');
}

async function machines(): Promise<Array<{ name: string; fetched: Record<string, unknown>; events: Array<{ event: string; data: Record<string, unknown> }> }>> {
  return (await adminJson<{ machines: never[] }>(server, '/machines')).machines;
}

describe('hvpxe serve --tftp (boot: grub-signed)', () => {
  it("answers grub's bootstrap, then each machine's own script by its MAC", async () => {
    const boot = text(await tftpGet(port, 'grub/grub.cfg'));
    expect(boot).toContain(`source "(tftp,127.0.0.1:${port})/grub/auto?mac=\${net_default_mac}&`);
    expect(boot).not.toMatch(/node-\d/);
    const script = text(await tftpGet(port, '/grub/auto?mac=52:54:00:00:00:01&uuid=00000000-0000-0000-0000-000000000000&arch=x86_64&platform=efi'));
    const linux = script.split('\n').find((l) => l.startsWith('linux '))!;
    expect(linux).toContain(`'(tftp,127.0.0.1:${port})/k/vmlinuz'`);
    expect(linux).toMatch(new RegExp(`'harvester\\.install\\.config_url=${server.url}/config/node-1\\.yaml\\?credential=[A-Za-z0-9_-]{43}'`));
    expect(script.split('\n').find((l) => l.startsWith('initrd '))).toBe(`initrd '(tftp,127.0.0.1:${port})/k/initrd.img'`);
    const node1 = (await machines()).find((m) => m.name === 'node-1')!;
    expect(node1.fetched.grub).toEqual(expect.any(String));
  });

  it("never puts a machine's secrets in a script, and another MAC gets only its own (default-group) script", async () => {
    const mine = text(await tftpGet(port, 'grub/auto?mac=52:54:00:00:00:01&arch=x86_64&platform=efi'));
    const other = text(await tftpGet(port, 'grub/auto?mac=52:54:00:00:00:99&arch=x86_64&platform=efi'));
    for (const s of [mine, other]) expect(s).not.toMatch(/tok-alpha|pw-secret|ssh-ed25519/);
    expect(other).not.toMatch(/node-1/);
    expect(other).toContain(`config/spare-525400000099.yaml?credential=`);
    // The config behind the URL is only for the credential's own machine, and only once.
    const spareCredential = scriptUrls(other).credential!;
    expect((await fetch(`${server.url}/config/node-1.yaml?credential=${spareCredential}`)).status).toBe(404);
    const node1 = scriptUrls(mine).config!;
    expect(await (await fetch(node1)).text()).toContain('tok-alpha');
    expect((await fetch(node1)).status).toBe(403);
  });

  it('serves the signed binaries byte for byte, with the block size and size it was asked for, and sends a block again when its ACK is lost', async () => {
    const r = await tftpGet(port, 'grubx64.efi', { options: { blksize: '1468', tsize: '0' } });
    if ('error' in r) throw new Error(r.message);
    expect(r.data.equals(GRUB)).toBe(true);
    expect(Object.fromEntries(r.oack)).toEqual({ blksize: '1468', tsize: String(GRUB.length) });
    const lossy = await tftpGet(port, 'shimx64.efi', { options: { timeout: '1' }, dropFirstAck: true });
    if ('error' in lossy) throw new Error(lossy.message);
    expect(lossy.data.equals(SHIM)).toBe(true);
    expect(lossy.dataPackets).toBe(lossy.blocks + 1);
    // A file whose size is a multiple of the block size ends with an empty block.
    const even = await tftpGet(port, 'k/vmlinuz', { options: { blksize: '9' } });
    expect('data' in even && even.data.toString()).toBe('k/vmlinuz');
    expect('data' in even && even.blocks).toBe(2);
  });

  it('a machine that reported a finished install gets a local boot from grub, not the installer again', async () => {
    const script = text(await tftpGet(port, 'grub/auto?mac=52:54:00:00:00:77&arch=x86_64&platform=efi'));
    expect(script).toMatch(/^linux /m);
    expect(await postEvent(scriptUrls(script).events!, { event: 'SUCCEEDED' })).toBe(204);
    const local = text(await tftpGet(port, 'grub/auto?mac=52:54:00:00:00:77&arch=x86_64&platform=efi'));
    expect(local).not.toMatch(/^(linux|initrd|boot)\b/m);
    expect(local).toMatch(/^echo 'hvpxe: spare-525400000077 is installed \(.*\); handing back to the firmware to boot the local disk'$/m);
    expect(local.trim().split('\n').at(-1)).toBe('exit 0');
  });

  it('refuses writes, netascii and names outside the root, with TFTP errors', async () => {
    expect(await tftpGet(port, 'x', { write: true })).toEqual({ error: 2, message: 'hvpxe serves TFTP read-only' });
    expect(await tftpGet(port, 'shimx64.efi', { mode: 'netascii' })).toEqual({ error: 4, message: 'only octet mode is served' });
    for (const name of ['../profiles.yaml', '/etc/passwd', 'k/../../profiles.yaml', 'nothere.efi']) expect(await tftpGet(port, name)).toEqual({ error: 1, message: 'file not found' });
  });

  it('tells a machine of an unserved architecture so on its console and records it in /machines (grub and iPXE)', async () => {
    const grub = text(await tftpGet(port, 'grub/auto?mac=52:54:00:00:00:01&arch=arm64&platform=efi'));
    expect(grub).toContain("echo 'hvpxe: node-1 booted as arm64, but profile hv serves an x86_64 installer only.'");
    expect(grub).not.toMatch(/^linux /m);
    const ipxe = await (await fetch(`${server.url}/ipxe/auto?mac=52:54:00:00:00:02&buildarch=arm64&platform=efi`)).text();
    expect(ipxe).toContain('echo hvpxe: node-2 booted as arm64, but profile hv serves an x86_64 installer only.');
    expect(ipxe).not.toMatch(/^kernel /m);
    // x86_64 UEFI iPXE (ipxe.efi) boots it; a BIOS iPXE is i386 and boots the x86_64 kernel too; an i386 UEFI cannot.
    expect(await (await fetch(`${server.url}/ipxe/auto?mac=52:54:00:00:00:02&buildarch=x86_64&platform=efi`)).text()).toMatch(/^kernel \S+ initrd=initrd\.img /m);
    expect(await (await fetch(`${server.url}/ipxe/auto?mac=52:54:00:00:00:02&buildarch=i386&platform=pcbios`)).text()).toMatch(/^kernel /m);
    expect(await (await fetch(`${server.url}/ipxe/auto?mac=52:54:00:00:00:02&buildarch=i386&platform=efi`)).text()).toContain('booted as i386');
    const ms = await machines();
    expect(ms.find((m) => m.name === 'node-1')!.events).toContainEqual(expect.objectContaining({ event: 'unsupported-arch', data: { arch: 'arm64', via: 'grub' } }));
    expect(ms.find((m) => m.name === 'node-2')!.events).toContainEqual(expect.objectContaining({ event: 'unsupported-arch', data: { arch: 'arm64', via: 'ipxe' } }));
  });
});

describe('hvpxe serve refuses to start without what boot: grub-signed needs', () => {
  it('names the missing shim and the Debian package it comes from', async () => {
    await expect(startFixtureServer('hv-pxe-sb-', { edit: grubSigned, files: { 'grubx64.efi': GRUB }, tftp: true })).rejects.toThrow(
      /profile hv \(boot: grub-signed\): \S+\/root\/shimx64\.efi \(shim, signed by Microsoft's UEFI CA\) is missing or unreadable \(ENOENT\): copy \/usr\/lib\/shim\/shimx64\.efi\.signed from the Debian package shim-signed there as shimx64\.efi/,
    );
  });
  it('refuses a grub that is not an EFI executable, naming grubnetx64 and its package', async () => {
    const err = await startFixtureServer('hv-pxe-sb-', { edit: grubSigned, files: { 'shimx64.efi': SHIM, 'grubx64.efi': 'not a PE' }, tftp: true }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/root\/grubx64\.efi \(Debian's signed grub network image .*\) is not an EFI executable: copy \/usr\/lib\/grub\/x86_64-efi-signed\/grubnetx64\.efi\.signed from the Debian package grub-efi-amd64-signed/);
    expect((err as Error).message).not.toMatch(/shimx64/);
  });
  it('needs --tftp', async () => {
    await expect(startFixtureServer('hv-pxe-sb-', { edit: grubSigned, files: { 'shimx64.efi': SHIM, 'grubx64.efi': GRUB } })).rejects.toThrow(/profile hv selects boot: grub-signed, whose signed grub fetches everything over TFTP: hvpxe serve needs --tftp/);
  });
  it('an ipxe profile needs neither', async () => {
    const s = await startFixtureServer('hv-pxe-sb-');
    await s.server.close();
    await rm(s.dir, { recursive: true, force: true });
  });
});
