/**
 * `hvinstall validate` end to end through the built launcher (make build runs before the tests):
 * exit codes, compiler-style lines, --json, --print with secrets redacted, stdin, usage errors,
 * and never a stack trace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const repo = path.resolve(__dirname, '../../..');
const cli = path.join(repo, 'dist/installer/cli.js');
const tmp = mkdtempSync('/tmp/hvcfg-cli-');
const fixtures = path.join(repo, 'test/fixtures/config');

beforeAll(() => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run make build first`);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function hv(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [cli, 'validate', ...args], { input, encoding: 'utf8', cwd: tmp, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const SECRETS = `scheme_version: 1
token: SuperSecretToken123
os:
  password: hunter2-password
install:
  mode: create
  device: /dev/sda
  vip: 10.0.0.5
  vip_mode: static
  management_interface: {interfaces: [{name: ens3}], method: dhcp}
  webhooks:
    - event: STARTED
      url: http://hooks.example.com/x
      headers: {Authorization: ["Bearer hook-secret-xyz"]}
      basic_auth: {user: admin, password: basic-secret-pw}
system_settings:
  containerd-registry: '{"Configs": {"r.example.com": {"Auth": {"Username": "u", "Password": "registry-secret-pw"}}}}'
`;

const MORE_SECRETS = `scheme_version: 1
token: SuperSecretToken123
os:
  password: hunter2-password
install:
  mode: create
  device: /dev/sda
  vip: 10.0.0.5
  vip_mode: static
  config_url: https://ops:cfg-url-pass-1@config.example/node.yaml
  management_interface: {interfaces: [{name: ens3}], method: dhcp}
  webhooks:
    - event: STARTED
      method: POST
      url: https://h.example/notify?token=query-token-2
      headers: {X-Api-Key: ["api-key-value-3"]}
    - event: SUCCEEDED
      method: POST
      url: https://hooks.slack.com/services/T0001AAAA/B0002BBBB/slackSecret4abcdef
system_settings:
  backup-target: '{"type":"s3","endpoint":"https://s3.example","bucketName":"b","accessKeyId":"AKIAPUBLIC","secretAccessKey":"s3-secret-5"}'
  ssl-certificates: '{"publicCertificate":"cert","privateKey":"-----BEGIN PRIVATE KEY-----private-key-6-----END PRIVATE KEY-----"}'
`;

describe('hvinstall validate --print: what showed in clear', () => {
  it.each([[['--print']], [['--json', '--print']]])('%j holds no secret, keeps what is not', (flags) => {
    writeFileSync(`${tmp}/more.yaml`, MORE_SECRETS);
    const r = hv(['more.yaml', ...flags]);
    const all = r.stdout + r.stderr;
    for (const s of ['cfg-url-pass-1', 'query-token-2', 'api-key-value-3', 'slackSecret4abcdef', 's3-secret-5', 'private-key-6', 'SuperSecretToken123', 'hunter2-password']) expect(all).not.toContain(s);
    for (const kept of ['config.example', 'h.example/notify', 'AKIAPUBLIC', 'hooks.slack.com']) expect(all).toContain(kept);
  });
});

describe('hvinstall validate', () => {
  it('exit 0 for a valid file, with a summary', () => {
    const r = hv([path.join(fixtures, 'valid/create-dhcp-snake.yaml')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/create-dhcp-snake\.yaml: valid \(0 errors, 0 warnings\)/);
  });

  it('exit 1 with compiler-style lines and hints', () => {
    const file = `${tmp}/config.yaml`;
    writeFileSync(file, 'scheme_version: 1\ntoken: abc\nos:\n  password: x\n  ntp_servers: [10.0.0.2]\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: dhpc\n  management_interface: {interfaces: [{name: ens3}], method: dhcp}\n');
    const r = hv(['config.yaml']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('config.yaml:10:13: error: install.vip_mode: unknown vip mode: dhpc\n  hint: did you mean "dhcp"?\n');
    expect(r.stderr).toContain('config.yaml: invalid (1 error, 0 warnings)');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('--json prints {valid, errors, warnings} with positions', () => {
    const r = hv(['--json', path.join(fixtures, 'invalid/mode-typo.yaml')]);
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.stdout);
    expect(doc.valid).toBe(false);
    expect(doc.errors).toEqual([
      { path: 'install.mode', source: path.join(fixtures, 'invalid/mode-typo.yaml'), line: 7, column: 9, message: 'unknown mode: craete', hint: 'did you mean "create"?' },
    ]);
    expect(doc.warnings).toEqual([]);
  });

  it('--strict fails on warnings alone (exit 1), without it the same file is valid (exit 0)', () => {
    const file = `${tmp}/typo.yaml`;
    writeFileSync(file, 'scheme_version: 1\ntoken: abc\nos:\n  password: x\n  ntp_servers: [10.0.0.2]\n  hostnme: n1\ninstall:\n  mode: create\n  device: /dev/sda\n  vip: 10.0.0.5\n  vip_mode: static\n  management_interface: {interfaces: [{name: ens3}], method: dhcp}\n');
    const lax = hv(['typo.yaml']);
    expect(lax.code).toBe(0);
    expect(lax.stderr).toContain('typo.yaml:6:3: warning: os.hostnme: unknown key "hostnme": Harvester ignores it\n  hint: did you mean "hostname"?\n');
    const strict = hv(['--strict', 'typo.yaml']);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toContain('typo.yaml: invalid (0 errors, 1 warning; --strict: warnings fail)');
    const json = JSON.parse(hv(['--strict', '--json', 'typo.yaml']).stdout);
    expect(json.valid).toBe(false);
    expect(json.errors).toEqual([]);
  });

  it('--print prints the normalised config with every secret redacted', () => {
    const r = hv(['--print', '-'], SECRETS);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('schemeVersion: 1');
    expect(r.stdout).toContain('- kvm');
    for (const secret of ['SuperSecretToken123', 'hunter2-password', 'hook-secret-xyz', 'basic-secret-pw', 'registry-secret-pw']) {
      expect(r.stdout).not.toContain(secret);
      expect(r.stderr).not.toContain(secret);
    }
    expect(r.stdout).toContain('<redacted>');
  });

  it('--json --print includes the redacted config', () => {
    const r = hv(['--json', '--print', '-'], SECRETS);
    const doc = JSON.parse(r.stdout);
    expect(doc.valid).toBe(true);
    expect(doc.config.token).toBe('<redacted>');
    expect(JSON.stringify(doc)).not.toContain('registry-secret-pw');
  });

  it('reads standard input with -', () => {
    const r = hv(['-'], 'just text\n');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('<stdin>:1:1: error: the config must be a mapping of keys at the top level (got the string "just text")');
  });

  it('merges --cmdline over the file', () => {
    const r = hv(['--json', '--print', path.join(fixtures, 'invalid/device-missing.yaml'), '--cmdline', 'quiet harvester.install.device=/dev/vda']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).config.install.device).toBe('/dev/vda');
  });

  it.each([
    [['--bogus', 'x.yaml'], 'unknown option --bogus'],
    [['a.yaml', 'b.yaml'], 'one config at a time (got 2)'],
    [[], 'no config given'],
    [['--cmdline', 'x', '--cmdline-file', 'y'], 'give --cmdline or --cmdline-file, not both'],
    [['--timeout', 'soon', 'x.yaml'], '--timeout must be a positive whole number (got "soon")'],
  ])('usage error %j -> exit 2', (args, message) => {
    const r = hv(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('a missing file is exit 2 with a clear message and no stack trace', () => {
    const r = hv(['nope.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("hvinstall: error: config file not found: nope.yaml\n  hint: check the path, or pass - to read standard input\n");
  });

  it('--json reports an unreadable input as JSON too, exit 2', () => {
    const r = hv(['--json', 'nope.yaml']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({
      valid: false,
      source: 'nope.yaml',
      errors: [{ path: '', source: 'nope.yaml', line: null, column: null, message: 'config file not found: nope.yaml', hint: 'check the path, or pass - to read standard input' }],
      warnings: [],
    });
  });

  it('--help prints the usage and exits 0', () => {
    const r = hv(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('usage: hvinstall validate [FILE|URL|-]');
  });
});

describe('the build-time bundle stays lean', () => {
  it('loads undici only through the lazily imported URL fetcher, and shares lib/errors', async () => {
    const { readFileSync } = await import('node:fs');
    const bundle = readFileSync(path.join(repo, 'dist/installer/commands/validate.bundle.js'), 'utf8');
    expect(bundle).not.toMatch(/from\s*"undici"|require\("undici"\)/);
    expect(bundle).toContain('import("../../lib/http-fetch.js")');
    expect(bundle).toMatch(/from\s*"\.\.\/\.\.\/lib\/errors\.js"/);
    expect(bundle).not.toMatch(/from\s*"ajv|require\("ajv/);
  });
});

describe('installer/commands/validate without the build-time bundle', () => {
  it('falls back to the modules and runs the same command', async () => {
    const { vi } = await import('vitest');
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    try {
      const { default: validate } = await import('../../../installer/commands/validate.js');
      expect(await validate(['--help'])).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(out.join('')).toContain('usage: hvinstall validate [FILE|URL|-]');
  });
});
