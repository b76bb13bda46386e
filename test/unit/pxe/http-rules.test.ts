import { describe, expect, it } from 'vitest';
import { checkRequestPath } from '../../../pxe/safe-path.js';
import { parseRange } from '../../../pxe/server.js';
import { renderDnsmasqConfig, guessSubnet } from '../../../pxe/dnsmasq.js';
import { parseListen } from '../../../pxe/cli.js';

describe('checkRequestPath', () => {
  it('accepts plain nested paths', () => {
    expect(checkRequestPath('k/vmlinuz')).toEqual({ ok: true, segments: ['k', 'vmlinuz'] });
    expect(checkRequestPath('harvester%20v1.iso')).toEqual({ ok: true, segments: ['harvester v1.iso'] });
  });
  it.each([
    ['..', "segment '..' not allowed"],
    ['../etc/passwd', "segment '..' not allowed"],
    ['a/../../etc/passwd', "segment '..' not allowed"],
    ['a/./b', "segment '.' not allowed"],
    ['%2e%2e/etc/passwd', 'encoded slash, backslash, dot or NUL'],
    ['%2E%2E%2Fetc%2Fpasswd', 'encoded slash, backslash, dot or NUL'],
    ['a%2fb', 'encoded slash, backslash, dot or NUL'],
    ['a%5cb', 'encoded slash, backslash, dot or NUL'],
    ['a%00.iso', 'encoded slash, backslash, dot or NUL'],
    ['a\\..\\b', 'backslash or NUL'],
    ['a\0b', 'backslash or NUL'],
    ['.hidden', 'hidden files are not served'],
    ['a/.git/config', 'hidden files are not served'],
    ['', 'empty path'],
    ['a//b', "segment '' not allowed"],
    ['a/', "segment '' not allowed"],
    ['%', 'malformed percent-encoding'],
    ['%zz', 'malformed percent-encoding'],
    ['%c0%ae%c0%ae/etc', 'malformed percent-encoding'],
    ['a%0ab', 'control character or separator in a segment'],
    ['a%7fb', 'control character or separator in a segment'],
    ['x'.repeat(1025), 'path too long'],
  ])('refuses %j: %s', (p, reason) => {
    expect(checkRequestPath(p)).toEqual({ ok: false, reason });
  });
  it('accepts a path of exactly 1024 characters', () => {
    expect(checkRequestPath('x'.repeat(1024))).toEqual({ ok: true, segments: ['x'.repeat(1024)] });
  });
});

describe('parseRange', () => {
  it('handles start-end, open-ended and suffix ranges, clamping the end', () => {
    expect(parseRange('bytes=0-99', 1000)).toEqual({ start: 0, end: 99 });
    expect(parseRange('bytes=900-', 1000)).toEqual({ start: 900, end: 999 });
    expect(parseRange('bytes=-100', 1000)).toEqual({ start: 900, end: 999 });
    expect(parseRange('bytes=-5000', 1000)).toEqual({ start: 0, end: 999 });
    expect(parseRange('bytes=990-5000', 1000)).toEqual({ start: 990, end: 999 });
  });
  it('416 for ranges past the end; ignores multi-range, other units and reversed ranges', () => {
    expect(parseRange('bytes=1000-', 1000)).toBe('unsatisfiable');
    expect(parseRange('bytes=-0', 1000)).toBe('unsatisfiable');
    expect(parseRange('bytes=0-1,5-6', 1000)).toBeUndefined();
    expect(parseRange('items=0-1', 1000)).toBeUndefined();
    expect(parseRange('bytes=9-1', 1000)).toBeUndefined();
  });
});

describe('renderDnsmasqConfig', () => {
  it('proxy-DHCP with TFTP chain-loading and the iPXE user class, and the router warning', () => {
    const text = renderDnsmasqConfig({ serverUrl: 'http://10.0.0.1:8080', subnet: '10.0.0.0', tftpRoot: '/srv/tftp', interface: 'eth1' });
    const lines = text.split('\n');
    for (const l of [
      'port=0',
      'interface=eth1',
      'dhcp-range=10.0.0.0,proxy',
      'enable-tftp',
      'tftp-root=/srv/tftp',
      'dhcp-userclass=set:ipxe,iPXE',
      'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
      'pxe-service=tag:!ipxe,X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
      'pxe-service=tag:ipxe,x86PC,"hvpxe: boot script",http://10.0.0.1:8080/boot.ipxe',
      'pxe-service=tag:ipxe,X86-64_EFI,"hvpxe: boot script",http://10.0.0.1:8080/boot.ipxe',
    ]) expect(lines).toContain(l);
    expect(text).toMatch(/must carry a router .*harvester#5675/s);
  });
  it('refuses bad subnets, masks and interface names; guesses a /24 from an IPv4 URL', () => {
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', subnet: '10.0.0' })).toThrow(/--subnet must be an IPv4 network/);
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', subnet: '10.0.0.0', netmask: '255.0' })).toThrow(/--netmask/);
    expect(() => renderDnsmasqConfig({ serverUrl: 'http://h', subnet: '10.0.0.0', interface: 'eth0\nconf-file=/x' })).toThrow(/not an interface name/);
    expect(guessSubnet('http://192.168.7.5:8080')).toBe('192.168.7.0');
    expect(guessSubnet('http://pxe.example:8080')).toBeUndefined();
  });
});

describe('parseListen', () => {
  it('parses ADDR:PORT forms and refuses others', () => {
    expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListen('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseListen(':8080')).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(() => parseListen('8080')).toThrow(/--listen must be ADDR:PORT/);
    expect(() => parseListen('h:99999')).toThrow(/--listen/);
  });
});

describe('summariseEvent', () => {
  it('says in one line how far an install got', async () => {
    const { summariseEvent } = await import('../../../pxe/event-body.js');
    expect(summariseEvent({ type: 'step', phase: 'done', step: 'deploy', index: 4, total: 9 })).toBe('step 4/9 deploy done');
    expect(summariseEvent({ type: 'bytes', step: 'deploy', done: 512 * 1048576, total: 1024 * 1048576 })).toBe('deploy: 50% of 1024 MiB');
    expect(summariseEvent({ type: 'install', phase: 'failed', device: '/dev/sda', message: 'disk busy' })).toBe('install failed on /dev/sda: disk busy');
    expect(summariseEvent({ event: 'SUCCEEDED', hostname: 'n1' })).toBe('webhook SUCCEEDED');
    expect(summariseEvent({ other: 1 })).toBeUndefined();
    expect(summariseEvent({ type: 'bytes', step: 'deploy', done: 5, total: 0 })).toBe('deploy: 0% of 0 MiB');
    expect(summariseEvent({ type: 'install', phase: 'started' })).toBe('install started');
    expect(summariseEvent({ type: 'step', phase: 'failed', step: 'oem', index: 7, total: 9, message: 'no space' })).toBe('step 7/9 oem failed: no space');
    expect(summariseEvent({ type: 'message', level: 'warn', message: 'slow disk' })).toBe('warn: slow disk');
    expect(summariseEvent({ type: 'step', phase: true, step: null, index: 1, total: 2 })).toBe('step 1/2  ');
  });
});
