import { describe, expect, it, vi } from 'vitest';
import fetchCommand from '../../../installer/commands/fetch.js';
import { main as hvpxe } from '../../../pxe/cli.js';

describe('hvinstall fetch: usage', () => {
  it('prints help, and refuses missing or unknown arguments with exit 2', async () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await fetchCommand(['--help'])).toBe(0);
      expect(String(out.mock.calls.at(-1)?.[0])).toContain('usage: hvinstall fetch config');
      expect(await fetchCommand([])).toBe(2);
    } finally {
      out.mockRestore();
    }
    await expect(fetchCommand(['disk'])).rejects.toMatchObject({ exitCode: 2, message: "unknown fetch target 'disk' (config or iso)" });
    await expect(fetchCommand(['config'])).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('give a URL, or --cmdline') });
    await expect(fetchCommand(['iso', 'http://h/x.iso'])).rejects.toMatchObject({ exitCode: 2, message: 'fetch iso URL needs --output FILE' });
    await expect(fetchCommand(['iso', 'ftp://h/x.iso', '--output', '/tmp/x'])).rejects.toMatchObject({ exitCode: 2, message: 'not an http(s) URL: ftp://h/x.iso' });
    await expect(fetchCommand(['config', 'http://h/c.yaml', '--attempts', '0'])).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('--attempts must be a positive whole number') });
    await expect(fetchCommand(['iso', '--bogus'])).rejects.toMatchObject({ exitCode: 2 });
  });
});

describe('hvpxe: usage', () => {
  it('refuses bad serve arguments with exit 2 and a message', async () => {
    await expect(hvpxe(['serve', '--root', '/tmp'])).rejects.toMatchObject({ exitCode: 2, message: 'serve needs --root DIR and --profiles FILE' });
    await expect(hvpxe(['serve', '--root', '/tmp', '--profiles', '/nope.yaml', '--tls-cert', 'c'])).rejects.toMatchObject({ message: '--tls-cert and --tls-key go together' });
    await expect(hvpxe(['serve', '--root', '/tmp', '--profiles', '/nope.yaml', '--server-url', 'http://h/x'])).rejects.toMatchObject({ exitCode: 2 });
    await expect(hvpxe(['render-ipxe', '--profiles', '/nope.yaml', '--platform', 'arm'])).rejects.toMatchObject({ message: '--platform is efi or pcbios' });
    await expect(hvpxe(['init'])).rejects.toMatchObject({ message: 'init needs exactly one directory' });
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await hvpxe(['frobnicate'])).toBe(2);
    } finally {
      err.mockRestore();
    }
  });
});
