/** Bad input of any shape gets a clear finding (exit 1) or a usage error (exit 2), never a crash. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadConfig } from '../../../config/index.js';
import { MAX_CONFIG_BYTES } from '../../../config/load.js';
import { parseYamlWithPositions } from '../../../config/parse-yaml.js';

const tmp = mkdtempSync('/tmp/hvcfg-load-');
const VALID = 'scheme_version: 1\ntoken: abc\nos: {password: x}\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: static\n  management_interface: {interfaces: [{name: ens3}], method: dhcp}\n';
let routes: Record<string, (res: http.ServerResponse) => void> = {};
const server = http.createServer((req, res) => (routes[req.url ?? ''] ?? ((r) => ((r.statusCode = 404), r.end())))(res));
let base = '';

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  routes = {
    '/ok.yaml': (res) => res.end(VALID),
    '/html': (res) => {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end('<!DOCTYPE html><html><body>Index of /</body></html>');
    },
    '/html-as-text': (res) => res.end('<html><body>404 not found</body></html>'),
    '/error': (res) => {
      res.statusCode = 500;
      res.end('boom');
    },
    '/hang': () => undefined,
  };
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(tmp, { recursive: true, force: true });
});

function file(name: string, content: string | Buffer): string {
  const p = `${tmp}/${name}`;
  writeFileSync(p, content);
  return p;
}

describe('loadConfig: files', () => {
  it('a missing file is a usage error (exit 2) with a hint', async () => {
    await expect(loadConfig(`${tmp}/nope.yaml`)).rejects.toMatchObject({ exitCode: 2, message: `config file not found: ${tmp}/nope.yaml`, hint: expect.stringContaining('- to read standard input') });
  });
  it('a directory is a usage error', async () => {
    mkdirSync(`${tmp}/dir`);
    await expect(loadConfig(`${tmp}/dir`)).rejects.toMatchObject({ exitCode: 2, message: `${tmp}/dir is a directory, not a config file` });
  });
  it('binary data is reported, not parsed', async () => {
    const r = await loadConfig(file('bin', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2])));
    expect(r.valid).toBe(false);
    expect(r.errors).toEqual([{ severity: 'error', path: '', source: `${tmp}/bin`, message: 'binary data, not a YAML config (NUL byte at offset 4)', hint: expect.any(String) }]);
  });
  it('text that is not UTF-8 is reported', async () => {
    const r = await loadConfig(file('latin1', Buffer.from([0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x3a, 0x20, 0xe9, 0x0a])));
    expect(r.errors.map((e) => e.message)).toEqual(['not UTF-8 text, not a YAML config']);
  });
  it('a 10 MB file is refused without parsing it', async () => {
    const big = file('big.yaml', 'a: ' + 'x'.repeat(10 * 1024 * 1024) + '\n');
    const r = await loadConfig(big);
    expect(r.valid).toBe(false);
    expect(r.errors.map((e) => e.message)).toEqual([`the config is larger than ${MAX_CONFIG_BYTES / 1024 / 1024} MiB; a Harvester config is a few KiB`]);
  });
  it('deep nesting is refused (block and flow)', async () => {
    let block = '';
    for (let i = 0; i < 200; i++) block += `${' '.repeat(i)}k${i}:\n`;
    const r1 = await loadConfig(file('deep-block.yaml', block));
    expect(r1.errors.map((e) => e.message)).toEqual(['the YAML is nested more than 64 levels deep; this is not a Harvester config']);
    const r2 = await loadConfig(file('deep-flow.yaml', 'a: ' + '['.repeat(5000) + ']'.repeat(5000) + '\n'));
    expect(r2.valid).toBe(false);
    expect(r2.errors).toHaveLength(1);
  });
  it('deep flow nesting gives one finding however much stack the caller already uses', () => {
    const text = 'a: ' + '['.repeat(5000) + ']'.repeat(5000) + '\n';
    const parseAtDepth = (depth: number): string[] => (depth > 0 ? parseAtDepth(depth - 1) : parseYamlWithPositions(text, 'deep.yaml').errors.map((e) => e.message));
    const deep = 'the YAML is nested more than 64 levels deep; this is not a Harvester config';
    const byDepth = new Map<number, string[]>();
    for (let depth = 0; depth <= 6000; depth += 200) byDepth.set(depth, parseAtDepth(depth));
    expect(new Map([...byDepth].filter(([, msgs]) => msgs.length !== 1 || msgs[0] !== deep))).toEqual(new Map());
  });
  it('an alias bomb is refused', async () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 9; i++) lines.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9).fill('*' + String.fromCharCode(96 + i)).join(',')}]`);
    const r = await loadConfig(file('bomb.yaml', lines.join('\n') + '\n'));
    expect(r.valid).toBe(false);
    expect(r.errors[0].message).toMatch(/^not valid YAML: /);
  });
  it('a UTF-8 BOM and a #cloud-config line are fine', async () => {
    const r = await loadConfig(file('bom.yaml', '\ufeff#cloud-config\n' + VALID));
    expect(r.errors).toEqual([]);
  });
});

describe('loadConfig: URLs', () => {
  it('loads a config over http', async () => {
    const r = await loadConfig(`${base}/ok.yaml`);
    expect(r.source).toBe(`${base}/ok.yaml`);
    expect(r.errors).toEqual([]);
  });
  it('a 404 is a usage error naming the URL', async () => {
    await expect(loadConfig(`${base}/missing.yaml`, { attempts: 1 })).rejects.toMatchObject({ exitCode: 2, message: `cannot fetch config: HTTP 404 from ${base}/missing.yaml` });
  });
  it('a 500 is retried, then a usage error', async () => {
    await expect(loadConfig(`${base}/error`, { attempts: 2, retryDelayMs: 5 })).rejects.toMatchObject({ exitCode: 2, message: `cannot fetch config: HTTP 500 from ${base}/error (after 2 attempts)` });
  });
  it('a server that never answers times out', async () => {
    await expect(loadConfig(`${base}/hang`, { attempts: 1, timeoutMs: 200 })).rejects.toMatchObject({ exitCode: 2, message: `cannot fetch config: timed out after 200 ms fetching ${base}/hang` });
  });
  it('an HTML page is reported as such (by content type or content)', async () => {
    const r1 = await loadConfig(`${base}/html`);
    expect(r1.errors.map((e) => e.message)).toEqual(['the server returned an HTML page (text/html; charset=utf-8), not a YAML config']);
    const r2 = await loadConfig(`${base}/html-as-text`);
    expect(r2.errors.map((e) => e.message)).toEqual(['the server returned an HTML page, not a YAML config']);
  });
  it('with only a command line, fetches its config_url like the installer', async () => {
    const r = await loadConfig(undefined, { cmdline: `harvester.install.config_url=${base}/ok.yaml harvester.install.device=/dev/vdb` });
    expect(r.source).toBe(`${base}/ok.yaml`);
    expect(r.errors).toEqual([]);
    expect(r.config.install?.device).toBe('/dev/vdb');
    expect(r.config.install?.configUrl).toBe(`${base}/ok.yaml`);
  });
  it('nothing at all is a usage error', async () => {
    await expect(loadConfig(undefined)).rejects.toMatchObject({ exitCode: 2, message: 'no config given' });
  });
});

describe('loadConfig: a broken file with a command line', () => {
  it('reports the file problem and the command line findings, not every rule', async () => {
    const r = await loadConfig(file('broken.yaml', 'a: [\n'), { cmdline: 'harvester.install.management_interface.vlan_id=x' });
    expect(r.valid).toBe(false);
    expect(r.errors.map((e) => [e.source, e.path, e.message.split(':')[0]])).toEqual([
      [`${tmp}/broken.yaml`, '', 'not valid YAML'],
      ['<cmdline>', 'install.management_interface.vlan_id', 'must be a whole number (got "x")'],
    ]);
  });
});
