/**
 * render-dnsmasq's two modes, line by line as dnsmasq reads them: proxy-DHCP for PXE clients
 * (BIOS x86PC, UEFI architectures 7 and 9) with what HTTP Boot needs from the site's DHCP server,
 * and the DHCP-server mode that answers every architecture, HTTP Boot (16, HTTPClient) included.
 * dnsmasq's own check of both is in test/integration/pxe/cli.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { httpBootUrl, renderDnsmasqConfig } from '../../../pxe/dnsmasq.js';

const lines = (t: string) => t.split('\n').filter((l) => l && !l.startsWith('#'));

describe('render-dnsmasq, DHCP-server mode', () => {
  const text = renderDnsmasqConfig({ serverUrl: 'http://10.0.0.1:8080/', interface: 'br0', netmask: '255.255.255.0', tftpRoot: '/srv/tftp', dhcp: { start: '10.0.0.100', end: '10.0.0.150', router: '10.0.0.1' } });

  it('hands out the pool with the router, and each architecture gets its own boot file', () => {
    expect(lines(text)).toEqual([
      'port=0',
      'log-dhcp',
      'interface=br0',
      'bind-interfaces',
      'dhcp-range=10.0.0.100,10.0.0.150,255.255.255.0,1h',
      'dhcp-option=option:router,10.0.0.1',
      'enable-tftp',
      'tftp-root=/srv/tftp',
      'dhcp-userclass=set:ipxe,iPXE',
      'dhcp-match=set:bios,option:client-arch,0',
      'dhcp-match=set:efi64,option:client-arch,7',
      'dhcp-match=set:efi64,option:client-arch,9',
      'dhcp-match=set:httpboot,option:client-arch,16',
      'dhcp-vendorclass=set:httpboot,HTTPClient',
      'dhcp-boot=tag:ipxe,http://10.0.0.1:8080/boot.ipxe',
      'dhcp-boot=tag:!ipxe,tag:bios,undionly.kpxe',
      'dhcp-boot=tag:!ipxe,tag:efi64,ipxe.efi',
      'dhcp-boot=tag:!ipxe,tag:httpboot,http://10.0.0.1:8080/artifacts/ipxe.efi',
      'dhcp-option-force=tag:httpboot,option:vendor-class,HTTPClient',
    ]);
    expect(text).not.toContain('proxy');
  });

  it('every boot file line but the iPXE one excludes iPXE, so ipxe.efi never loads itself again', () => {
    const boots = lines(text).filter((l) => l.startsWith('dhcp-boot='));
    expect(boots.filter((l) => !l.startsWith('dhcp-boot=tag:ipxe,')).every((l) => l.startsWith('dhcp-boot=tag:!ipxe,'))).toBe(true);
  });

  it('a lease time and another HTTP Boot binary are passed through; bad ones refused', () => {
    const t = renderDnsmasqConfig({ serverUrl: 'https://pxe.example', dhcp: { start: '10.1.0.10', end: '10.1.0.20', router: '10.1.0.1', leaseTime: '12h' }, httpBootFile: 'efi/snponly.efi' });
    expect(lines(t)).toContain('dhcp-range=10.1.0.10,10.1.0.20,12h');
    expect(lines(t)).toContain('dhcp-boot=tag:!ipxe,tag:httpboot,https://pxe.example/artifacts/efi/snponly.efi');
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', dhcp: { start: '10.1.0', end: '10.1.0.20', router: '10.1.0.1' } })).toThrow("--dhcp-range start must be an IPv4 address, got '10.1.0'");
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', dhcp: { start: '10.1.0.10', end: '10.1.0.20', router: 'gw' } })).toThrow("--router must be an IPv4 address, got 'gw'");
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', dhcp: { start: '10.1.0.10', end: '10.1.0.20', router: '10.1.0.1', leaseTime: '1h\ndhcp-script=/x' } })).toThrow(/--lease-time/);
  });
});

describe('render-dnsmasq, DHCP-server mode without TFTP (--no-tftp)', () => {
  const text = renderDnsmasqConfig({ serverUrl: 'http://10.0.0.1:8080', interface: 'br0', dhcp: { start: '10.0.0.100', end: '10.0.0.150', router: '10.0.0.1' }, noTftp: true });

  it('runs no TFTP server and hands out boot files to UEFI HTTP Boot and iPXE only', () => {
    expect(lines(text)).toEqual([
      'port=0',
      'log-dhcp',
      'interface=br0',
      'bind-interfaces',
      'dhcp-range=10.0.0.100,10.0.0.150,1h',
      'dhcp-option=option:router,10.0.0.1',
      'dhcp-userclass=set:ipxe,iPXE',
      'dhcp-match=set:httpboot,option:client-arch,16',
      'dhcp-vendorclass=set:httpboot,HTTPClient',
      'dhcp-boot=tag:ipxe,http://10.0.0.1:8080/boot.ipxe',
      'dhcp-boot=tag:!ipxe,tag:httpboot,http://10.0.0.1:8080/artifacts/ipxe.efi',
      'dhcp-option-force=tag:httpboot,option:vendor-class,HTTPClient',
    ]);
    expect(text).not.toMatch(/^(enable-tftp|tftp-root=)/m);
    expect(text).not.toMatch(/undionly\.kpxe|,ipxe\.efi$/m);
  });

  it('is refused with proxy-DHCP (PXE loads its first binary by TFTP) and with a TFTP root', () => {
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://10.0.0.1:8080', subnet: '10.0.0.0', noTftp: true })).toThrow('--no-tftp needs --dhcp-range: proxy-DHCP answers PXE clients only, and PXE loads its first binary by TFTP');
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', tftpRoot: '/srv/tftp', dhcp: { start: '10.0.0.100', end: '10.0.0.150', router: '10.0.0.1' }, noTftp: true })).toThrow('--no-tftp and --tftp-root contradict each other');
  });
});

describe('render-dnsmasq, proxy-DHCP mode', () => {
  const text = renderDnsmasqConfig({ serverUrl: 'http://10.0.0.1:8080', subnet: '10.0.0.0' });

  it('answers PXE clients of both UEFI architectures and BIOS, and tells the site DHCP server what HTTP Boot needs', () => {
    expect(lines(text).filter((l) => l.startsWith('pxe-service='))).toEqual([
      'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
      'pxe-service=tag:!ipxe,X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
      'pxe-service=tag:!ipxe,BC_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
      'pxe-service=tag:ipxe,x86PC,"hvpxe: boot script",http://10.0.0.1:8080/boot.ipxe',
      'pxe-service=tag:ipxe,X86-64_EFI,"hvpxe: boot script",http://10.0.0.1:8080/boot.ipxe',
      'pxe-service=tag:ipxe,BC_EFI,"hvpxe: boot script",http://10.0.0.1:8080/boot.ipxe',
    ]);
    expect(lines(text)).toContain('dhcp-range=10.0.0.0,proxy');
    expect(text).toContain('#   option 60 (vendor class identifier) = "HTTPClient"');
    expect(text).toContain('#   boot file name (option 67 / "filename") = http://10.0.0.1:8080/artifacts/ipxe.efi');
    expect(lines(text).some((l) => l.startsWith('dhcp-boot=') || l.startsWith('dhcp-option'))).toBe(false);
  });

  it('needs a subnet', () => {
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h' })).toThrow("--subnet must be an IPv4 network address, got ''");
  });
});

describe('httpBootUrl', () => {
  it.each(['../ipxe.efi', '/ipxe.efi', 'a/../b.efi', '.hidden.efi', 'a/.b/c.efi', 'ipxe efi', 'a,b.efi', 'a"b', ''])('%j is not a path hvpxe would serve', (f) => {
    expect(() => httpBootUrl('http://h', f)).toThrow(/--http-boot-file must be a path under hvpxe's --root/);
  });
  it('joins the server URL and /artifacts/ once', () => {
    expect(httpBootUrl('http://h:8080///')).toBe('http://h:8080/artifacts/ipxe.efi');
    expect(httpBootUrl('http://h', 'efi/x64/ipxe.efi')).toBe('http://h/artifacts/efi/x64/ipxe.efi');
  });
});
