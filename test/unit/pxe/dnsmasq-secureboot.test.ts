/**
 * render-dnsmasq for Secure Boot machines (profiles with boot: grub-signed): DHCP cannot see
 * Secure Boot, so they are tagged by MAC from profiles.yaml and get shim from hvpxe's TFTP server
 * as their UEFI boot file, the other UEFI machines iPXE; when the default group chooses
 * grub-signed it is the other way round. Read line by line, and checked by dnsmasq --test.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { renderDnsmasqConfig, secureBootClients } from '../../../pxe/dnsmasq.js';
import { buildCatalog, parseProfiles } from '../../../pxe/profiles.js';
import { profilesText } from './helpers.js';

const lines = (t: string) => t.split('\n').filter((l) => l && !l.startsWith('#'));
const SERVER = 'http://10.0.0.1:8080';
const DHCP = { start: '10.0.0.100', end: '10.0.0.150', router: '10.0.0.1' };

const SB_PROFILE = 'profiles:\n  sb:\n    boot: grub-signed\n    kernel: kernel\n    initrd: initrd\n    rootfs: rootfs\n    config: { scheme_version: 1, token: t }\n  hv:';
const SB_GROUP = '  - name: sbg\n    profile: sb\n    machines: [{ hostname: sb-1, mac: "52:54:00:00:00:51" }, { hostname: sb-2, mac: "52-54-00-00-00-52" }]\n';

/** profilesText() with a profile `sb` (boot: grub-signed), edited further by `edit`. */
async function catalog(edit: (t: string) => string) {
  return buildCatalog(await parseProfiles(edit(profilesText().replace('profiles:\n  hv:', SB_PROFILE))));
}

async function dnsmasqTest(text: string): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'hv-dnsmasq-sb-'));
  try {
    await writeFile(path.join(dir, 'dnsmasq.conf'), text.replace('tftp-root=/var/lib/tftpboot', `tftp-root=${dir}`));
    await promisify(execFile)('dnsmasq', ['--test', '-C', path.join(dir, 'dnsmasq.conf')]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('render-dnsmasq, Secure Boot machines by MAC', () => {
  it('tags the grub-signed machines by MAC and gives only them shim, with hvpxe as next-server (DHCP server)', async () => {
    const sb = secureBootClients(await catalog((t) => t + SB_GROUP), '10.0.0.3');
    expect(sb).toEqual({ all: false, macs: ['52:54:00:00:00:51', '52:54:00:00:00:52'], tftpServer: '10.0.0.3' });
    const text = renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP, secureBoot: sb });
    const l = lines(text);
    expect(l.filter((x) => x.startsWith('dhcp-mac='))).toEqual(['dhcp-mac=set:hvpxe-sb,52:54:00:00:00:51', 'dhcp-mac=set:hvpxe-sb,52:54:00:00:00:52']);
    expect(l.filter((x) => x.startsWith('dhcp-boot='))).toEqual([
      `dhcp-boot=tag:ipxe,${SERVER}/boot.ipxe`,
      'dhcp-boot=tag:!ipxe,tag:bios,undionly.kpxe',
      'dhcp-boot=tag:!ipxe,tag:efi64,tag:!hvpxe-sb,ipxe.efi',
      'dhcp-boot=tag:!ipxe,tag:efi64,tag:hvpxe-sb,shimx64.efi,hvpxe,10.0.0.3',
      `dhcp-boot=tag:!ipxe,tag:httpboot,${SERVER}/artifacts/ipxe.efi`,
    ]);
    await dnsmasqTest(text);
  });

  it('proxy-DHCP: the UEFI services split on the tag, shim from hvpxe, and the config says what the site DHCP must send', async () => {
    const sb = secureBootClients(await catalog((t) => t + SB_GROUP), '10.0.0.3');
    const text = renderDnsmasqConfig({ serverUrl: SERVER, subnet: '10.0.0.0', secureBoot: sb });
    expect(lines(text).filter((x) => x.startsWith('pxe-service=tag:!ipxe'))).toEqual([
      'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
      'pxe-service=tag:!ipxe,tag:!hvpxe-sb,X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
      'pxe-service=tag:!ipxe,tag:!hvpxe-sb,BC_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
      'pxe-service=tag:!ipxe,tag:hvpxe-sb,X86-64_EFI,"hvpxe: shim, signed grub (Secure Boot)",shimx64.efi,10.0.0.3',
      'pxe-service=tag:!ipxe,tag:hvpxe-sb,BC_EFI,"hvpxe: shim, signed grub (Secure Boot)",shimx64.efi,10.0.0.3',
    ]);
    expect(text).toContain('# proxy\'s: your DHCP server must send next-server (siaddr) 10.0.0.3 to these machines.');
    await dnsmasqTest(text);
  });

  it('with --no-tftp (dnsmasq serves no TFTP) the Secure Boot machines still get shim from hvpxe, the other PXE clients nothing', async () => {
    const sb = secureBootClients(await catalog((t) => t + SB_GROUP), '10.0.0.3');
    const text = renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP, noTftp: true, secureBoot: sb });
    const l = lines(text);
    expect(l).not.toContain('enable-tftp');
    expect(l.filter((x) => x.startsWith('dhcp-match=set:efi64'))).toEqual(['dhcp-match=set:efi64,option:client-arch,7', 'dhcp-match=set:efi64,option:client-arch,9']);
    expect(l.filter((x) => x.startsWith('dhcp-boot='))).toEqual([
      `dhcp-boot=tag:ipxe,${SERVER}/boot.ipxe`,
      'dhcp-boot=tag:!ipxe,tag:efi64,tag:hvpxe-sb,shimx64.efi,hvpxe,10.0.0.3',
      `dhcp-boot=tag:!ipxe,tag:httpboot,${SERVER}/artifacts/ipxe.efi`,
    ]);
    await dnsmasqTest(text);
  });

  it('a default group on grub-signed: every UEFI client gets shim but the tagged iPXE machines', async () => {
    // Every iPXE machine needs a MAC here: node-3 gets one, the hostname-only group goes.
    const cat = await catalog((t) =>
      t
        .replace('- { hostname: node-3, uuid:', '- { hostname: node-3, mac: "52:54:00:00:00:03", uuid:')
        .replace(/  - name: named\n(    .*\n)+?(?=  - name: spare)/, '')
        .replace('- name: spare\n    profile: hv', '- name: spare\n    profile: sb'),
    );
    const sb = secureBootClients(cat, '10.0.0.3');
    expect(sb).toEqual({ all: true, macs: ['52:54:00:00:00:01', '52:54:00:00:00:02', '52:54:00:00:00:03'], tftpServer: '10.0.0.3' });
    const text = renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP, secureBoot: sb });
    const l = lines(text);
    expect(l.filter((x) => x.startsWith('dhcp-mac='))).toEqual(['dhcp-mac=set:hvpxe-ipxe,52:54:00:00:00:01', 'dhcp-mac=set:hvpxe-ipxe,52:54:00:00:00:02', 'dhcp-mac=set:hvpxe-ipxe,52:54:00:00:00:03']);
    expect(l).toContain('dhcp-boot=tag:!ipxe,tag:efi64,tag:hvpxe-ipxe,ipxe.efi');
    expect(l).toContain('dhcp-boot=tag:!ipxe,tag:efi64,tag:!hvpxe-ipxe,shimx64.efi,hvpxe,10.0.0.3');
    await dnsmasqTest(text);
  });

  it('refuses machines DHCP cannot tell apart (no MAC), naming them', async () => {
    // rack1's node-3 is known by UUID only.
    const cat = await catalog((t) => t.replace('- name: rack1\n    profile: hv', '- name: rack1\n    profile: sb'));
    expect(() => secureBootClients(cat, '10.0.0.3')).toThrow('DHCP tells Secure Boot machines apart by MAC, and node-3 (group rack1) has none: give it a mac: in profiles.yaml');
    expect(() => renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP, secureBoot: { all: false, macs: [], tftpServer: 'hvpxe.example' } })).toThrow(/must be an IPv4 address \(pass --tftp-server IP\), got 'hvpxe\.example'/);
  });

  it('without a grub-signed profile nothing changes', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText()));
    expect(secureBootClients(cat, '10.0.0.3')).toBeUndefined();
    expect(renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP, secureBoot: undefined })).toBe(renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP }));
    expect(renderDnsmasqConfig({ serverUrl: SERVER, dhcp: DHCP })).not.toMatch(/hvpxe-sb|shimx64/);
  });
});
