import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findLocalIso } from '../../../installer/remote/media.js';
import { describeNetworkError } from '../../../installer/remote/net-errors.js';
import { Host } from '../../../lib/host.js';

let sysroot: string;
beforeAll(async () => {
  sysroot = await mkdtemp(path.join(tmpdir(), 'hv-media-'));
  await mkdir(path.join(sysroot, 'proc/self'), { recursive: true });
  await writeFile(path.join(sysroot, 'proc/self/mounts'), 'rootfs / rootfs rw 0 0\n/dev/sr0 /run/initramfs/live iso9660 ro,relatime 0 0\n');
});
afterAll(async () => {
  await rm(sysroot, { recursive: true, force: true });
});

describe('findLocalIso', () => {
  it('uses the device mounted at /run/initramfs/live (iso_url: local)', async () => {
    await expect(findLocalIso(new Host(sysroot))).resolves.toBe('/dev/sr0');
  });
});

describe('describeNetworkError', () => {
  it('names DNS, refusal, timeouts and TLS in words, and says which are worth retrying', () => {
    const e = (code: string) => Object.assign(new Error('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
    expect(describeNetworkError(e('ENOTFOUND'), 'http://pxe.lab:8080/x.iso')).toEqual({ message: 'cannot resolve pxe.lab (DNS lookup failed: ENOTFOUND); check the name and the DNS servers', retryable: true });
    expect(describeNetworkError(e('ECONNREFUSED'), 'http://10.0.0.1:8080/x.iso').message).toBe('connection to 10.0.0.1:8080 refused; is the server running and the port right?');
    expect(describeNetworkError(e('UND_ERR_BODY_TIMEOUT'), 'http://h/x', 60_000).message).toBe('h did not answer within 60 s (UND_ERR_BODY_TIMEOUT)');
    expect(describeNetworkError(e('SELF_SIGNED_CERT_IN_CHAIN'), 'https://h/x')).toMatchObject({ retryable: false });
    expect(describeNetworkError(e('EHOSTUNREACH'), 'http://h/x').message).toMatch(/unreachable .*default gateway/);
  });

  it('through a proxy, a name that does not resolve or a refusal is the proxy\'s', () => {
    const e = (code: string) => Object.assign(new Error('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
    const saved = { https: process.env.HTTPS_PROXY, no: process.env.NO_PROXY, lower: process.env.https_proxy };
    process.env.HTTPS_PROXY = 'http://proxy.lab.invalid:3128';
    delete process.env.https_proxy;
    delete process.env.NO_PROXY;
    try {
      expect(describeNetworkError(e('ENOTFOUND'), 'https://10.0.0.9/x.iso').message).toBe(
        'the proxy proxy.lab.invalid:3128 (HTTPS_PROXY) cannot be resolved (ENOTFOUND) on the way to 10.0.0.9; check HTTPS_PROXY, or add 10.0.0.9 to no_proxy',
      );
    } finally {
      for (const [k, v] of [['HTTPS_PROXY', saved.https], ['NO_PROXY', saved.no], ['https_proxy', saved.lower]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
