/**
 * The decisions the mutation run (docs/testing.md) showed unchecked: the containerd-registry
 * setting's shape errors and what it keeps, the placeholder pattern and where its warnings point,
 * the SSH-key login rule, the secrets collected from webhooks. Expected values are written out.
 */
import { describe, expect, it } from 'vitest';
import { configSecrets, validateConfig } from '../../../config/index.js';
import { parseContainerdRegistry, registriesHoldCredentials, registryCredentials } from '../../../config/containerd-registry.js';
import type { HarvesterConfig } from '../../../config/index.js';
import { formatServerUrl, normaliseServerUrl } from '../../../config/server-url.js';
import { FindingList } from '../../../config/findings.js';
import { ownValue, setOwn } from '../../../lib/own-keys.js';
import { parseCmdline, tokenizeCmdline } from '../../../config/cmdline.js';

const base = {
  scheme_version: 1,
  token: 'token-rancher-123',
  os: { hostname: 'node1', password: 'rancher' },
  install: { mode: 'create', management_interface: { interfaces: [{ name: 'ens5' }], method: 'dhcp' }, device: '/dev/sda', vip: '10.10.0.20', vip_mode: 'static' },
};

const refusal = (setting: unknown): string => {
  try {
    parseContainerdRegistry(setting as object);
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};
const DECODE = 'could not parse containerd-registry as JSON: ';

describe('containerd-registry: shapes Go would refuse, and what is kept', () => {
  it('each wrong type is refused with its path, as Go refuses it', () => {
    expect(refusal('[]')).toBe(`${DECODE}containerd-registry must be an object`);
    expect(refusal({ Mirrors: [] })).toBe(`${DECODE}Mirrors must be an object`);
    expect(refusal({ Configs: 'x' })).toBe(`${DECODE}Configs must be an object`);
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['https://m.example', 5] } } })).toBe(`${DECODE}Mirrors.docker.io.Endpoints must be a list of URLs`);
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['https://m.example'], Rewrites: { '^a': 5 } } } })).toBe(`${DECODE}Mirrors.docker.io.Rewrites["^a"] must be a string`);
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['https://m.example'], Rewrites: [] } } })).toBe(`${DECODE}Mirrors.docker.io.Rewrites must be an object`);
    expect(refusal({ Configs: { r: { Auth: [] } } })).toBe(`${DECODE}Configs.r.Auth must be an object`);
    expect(refusal({ Configs: { r: { Auth: { Username: 7 } } } })).toBe(`${DECODE}Configs.r.Auth.Username must be a string`);
    expect(refusal({ Configs: { r: { TLS: { CAFile: true } } } })).toBe(`${DECODE}Configs.r.TLS.CAFile must be a string`);
    expect(refusal({ Configs: { r: { TLS: { InsecureSkipVerify: 'yes' } } } })).toBe(`${DECODE}Configs.r.TLS.InsecureSkipVerify must be true or false`);
  });

  it('our own refusals: unknown keys in a section, half a client certificate, a URL that is not one', () => {
    expect(refusal({ Configs: { r: { TLS: { Cafile: '/a', Bogus: 1 } } } })).toBe('Configs.r.TLS: unknown key "Bogus"');
    expect(refusal({ Configs: { r: { TLS: { CertFile: '/c.pem' } } } })).toBe('Configs.r.TLS: CertFile and KeyFile go together');
    expect(refusal({ Configs: { r: { TLS: { KeyFile: '/k.pem' } } } })).toBe('Configs.r.TLS: CertFile and KeyFile go together');
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['mirror https://m.example'] } } })).toBe('Mirrors.docker.io.Endpoints: "mirror https://m.example" is not an http(s) URL');
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['ftp://m.example'] } } })).toBe('Mirrors.docker.io.Endpoints: "ftp://m.example" is not an http(s) URL');
    expect(refusal({ Mirrors: { 'docker.io': { Endpoints: ['http://m.example:5000', 'https://n.example'] } } })).toBe('accepted');
  });

  it('absent, null and empty values leave nothing behind; hosts and rewrites come out sorted', () => {
    const doc = parseContainerdRegistry({
      Mirrors: { 'z.io': { Endpoints: ['https://z.example'], Rewrites: { '^b/': 'x/', '^a/': 'y/' } }, 'a.io': { Endpoints: ['https://a.example'] } },
      Configs: { 'z.example': { Auth: null, TLS: null }, 'y.example': { Auth: { Username: 'u', Auth: '' }, TLS: { InsecureSkipVerify: false, CAFile: '' } }, 'x.example': { TLS: { InsecureSkipVerify: null } } },
    });
    expect(Object.keys(doc.mirrors)).toEqual(['a.io', 'z.io']);
    expect(Object.keys(doc.mirrors['z.io']!.rewrite!)).toEqual(['^a/', '^b/']);
    expect(doc.mirrors['a.io']).toEqual({ endpoint: ['https://a.example'] });
    expect(Object.keys(doc.configs)).toEqual(['x.example', 'y.example', 'z.example']);
    expect(doc.configs).toEqual({ 'x.example': {}, 'y.example': { auth: { username: 'u' } }, 'z.example': {} });
  });

  it('credentials: only a non-empty auth holds some; a TLS-only registry has none and does not throw', () => {
    const tlsOnly = parseContainerdRegistry({ Configs: { r: { TLS: { InsecureSkipVerify: true } } } });
    expect(tlsOnly.configs.r).toEqual({ tls: { insecure_skip_verify: true } });
    expect(registriesHoldCredentials(tlsOnly)).toBe(false);
    expect(registryCredentials(tlsOnly)).toEqual([]);
    const withUser = parseContainerdRegistry({ Configs: { r: { Auth: { Username: 'u' } } } });
    expect(registriesHoldCredentials(withUser)).toBe(true);
    expect(registriesHoldCredentials({ mirrors: {}, configs: { r: { auth: {} } } })).toBe(false);
    const all = parseContainerdRegistry({ Configs: { r: { Auth: { Username: 'u', Password: 'pw-1', Auth: 'dTpwdw==', IdentityToken: 'idt-1' } } } });
    expect(registryCredentials(all)).toEqual(['pw-1', 'dTpwdw==', 'idt-1']);
  });
});

async function warningsAt(extra: Record<string, unknown>): Promise<Array<{ path: string; message: string }>> {
  const r = await validateConfig({ ...base, ...extra, os: { ...base.os, ...(extra.os as object) } });
  return r.warnings.filter((w) => /placeholder/.test(w.message)).map((w) => ({ path: w.path, message: w.message }));
}

describe('placeholders', () => {
  it('the pattern: the template spellings are placeholders, text around <...> or a plain word is not', async () => {
    const ntp = ['<ntp-server>', 'REPLACEME', 'REPLACE_ME', 'change-me', 'CHANGEME', 'x<ab>', '<ab> y', 'pool.ntp.org', 'REPLACEMENT'];
    expect(await warningsAt({ os: { ntp_servers: ntp } })).toEqual(
      [0, 1, 2, 3, 4].map((i) => ({ path: `os.ntp_servers[${i}]`, message: `${JSON.stringify(ntp[i])} looks like a placeholder` })),
    );
    expect((await warningsAt({ os: { environment: { A: 'say < YOUR_PROXY> here', B: 'x<ab>' } } })).map((w) => w.message)).toEqual(['"say < YOUR_PROXY> here" looks like a placeholder']);
  });

  it('the warning points into maps (keys with / and ~ escaped) and quotes at most 37 characters of a long value', async () => {
    const forty = '<' + 'x'.repeat(38) + '>';
    const long = '<' + 'y'.repeat(39) + '>';
    const w = await warningsAt({ os: { environment: { 'A/B~C': forty, LONG: long } } });
    expect(w).toEqual([
      { path: 'os.environment.LONG', message: `"${long.slice(0, 37)}..." looks like a placeholder` },
      { path: 'os.environment["A/B~C"]', message: `"${forty}" looks like a placeholder` },
    ]);
  });
});

describe('SSH keys: the login rule', () => {
  const REAL = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq5YmNnY2FkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejEy user@host';
  const keyFindings = async (keys: string[], password?: string) => {
    const r = await validateConfig({ ...base, os: { hostname: 'node1', ...(password ? { password } : {}), ssh_authorized_keys: keys } });
    return [...r.errors.map((e) => `error ${e.path}: ${e.message}`), ...r.warnings.map((w) => `warning ${w.path}: ${w.message}`)].filter((s) => s.includes('ssh_authorized_keys'));
  };

  it('a placeholder beside one real key is a warning, not an unreachable node; alone it is the error', async () => {
    expect(await keyFindings(['<YOUR_SSH_KEY>', REAL])).toEqual(['warning os.ssh_authorized_keys[0]: "<YOUR_SSH_KEY>" looks like a placeholder']);
    expect(await keyFindings(['<YOUR_SSH_KEY>'])).toEqual(['error os.ssh_authorized_keys[0]: this SSH key is a placeholder and there is no other login: the node would be unreachable']);
  });

  it('a key source with spaces around it is a source, not a malformed key', async () => {
    expect(await keyFindings([' github:someone ', REAL])).toEqual([]);
  });
});

describe('configSecrets: webhook headers', () => {
  it('a header whose name says it carries a credential is a secret in any case (the sender redacts the same); neutral headers are not', () => {
    const cfg = {
      install: {
        webhooks: [
          {
            event: 'STARTED',
            method: 'GET',
            url: 'https://h.example',
            headers: { 'proxy-authorization': ['Basic cHJveHk6c2VjcmV0'], 'X-Api-Key': ['k3y-value'], 'x-auth-token': ['t0ken-value'], Cookie: ['session=abcd'], 'Content-Type': ['application/json'], 'X-Request-Id': ['req-1234'] },
          },
        ],
      },
    } as unknown as HarvesterConfig;
    expect(configSecrets(cfg).sort()).toEqual(['Basic cHJveHk6c2VjcmV0', 'k3y-value', 'session=abcd', 't0ken-value']);
  });
});

describe('server_url: the edges of the hand-made split', () => {
  it('blank, a path that holds "http://", userinfo kept', () => {
    expect(formatServerUrl('   ')).toEqual({ error: 'server url invalid: management address cannot be empty' });
    expect(formatServerUrl('https://10.0.0.1/http://x')).toEqual({ error: 'server url invalid: path is not allowed in management address: /http://x' });
    expect(formatServerUrl('admin@10.0.0.1')).toEqual({ url: 'https://admin@10.0.0.1:443' });
  });

  it('a config without an install section is normalised, not a crash', () => {
    const out = new FindingList(new Map());
    expect(normaliseServerUrl({ serverUrl: '10.0.0.1' } as HarvesterConfig, out).serverUrl).toBe('https://10.0.0.1:443');
  });
});

describe('own-keys: what the config parsers write is an ordinary own key', () => {
  it('setOwn makes an enumerable, writable own property, even __proto__, and leaves the prototype alone', () => {
    const o: Record<string, unknown> = {};
    setOwn(o, '__proto__', { polluted: true });
    setOwn(o, 'mode', 'create');
    expect(Object.keys(o)).toEqual(['__proto__', 'mode']);
    expect(JSON.stringify(o)).toBe('{"__proto__":{"polluted":true},"mode":"create"}');
    expect(Object.getPrototypeOf(o)).toBe(Object.prototype);
    o.mode = 'join';
    expect(o.mode).toBe('join');
    expect(ownValue({}, 'constructor')).toBeUndefined();
  });
});

describe('kernel command line tokens: separators, quotes across lines, where each token starts', () => {
  it('space, tab, CR and newline separate; a newline inside quotes is a space; positions are 1-based line and column', () => {
    expect(tokenizeCmdline('a="x\ny" b\tc\rd\ne')).toEqual([
      { text: 'a=x y', line: 1, column: 1 },
      { text: 'b', line: 2, column: 4 },
      { text: 'c', line: 2, column: 6 },
      { text: 'd', line: 2, column: 8 },
      { text: 'e', line: 3, column: 1 },
    ]);
  });

  it('an empty quoted value is still a token, starting at its quote', () => {
    expect(tokenizeCmdline('  ""\n k=""')).toEqual([
      { text: '', line: 1, column: 3 },
      { text: 'k=', line: 2, column: 2 },
    ]);
  });
});

describe('the edges a second mutation run left open', () => {
  it('containerd-registry: an empty Auth, a null field, a TLS without InsecureSkipVerify and a mirror without endpoints keep nothing extra', () => {
    const doc = parseContainerdRegistry({
      Mirrors: { 'docker.io': {}, 'quay.io': { Endpoint: ['https://q.example'] } },
      Configs: { a: { Auth: {} }, b: { Auth: { Username: 'u', Password: null } }, c: { TLS: { CAFile: '/ca.pem' } }, d: { TLS: {} } },
    });
    expect(doc.mirrors).toEqual({ 'docker.io': { endpoint: [] }, 'quay.io': { endpoint: ['https://q.example'] } });
    expect(doc.configs).toEqual({ a: {}, b: { auth: { username: 'u' } }, c: { tls: { ca_file: '/ca.pem' } }, d: {} });
    expect(Object.keys(doc.configs.c!.tls!)).toEqual(['ca_file']);
  });

  it('install.automatic in a config given as an object (no file, no command line) is still named as no consent', async () => {
    const r = await validateConfig({ ...base, install: { ...base.install, automatic: true, iso_url: 'local' } });
    expect(r.warnings.map((w) => w.message)).toContain('install.automatic in a config file does not start an automatic install: Harvester reads it only from the kernel command line');
  });

  it('a <...> placeholder key beside a real login gets the placeholder warning once, and no "..." warning', async () => {
    const r = await validateConfig({ ...base, os: { hostname: 'node1', password: 'rancher', ssh_authorized_keys: ['<ssh-key>'] } });
    expect(r.errors).toEqual([]);
    expect(r.warnings.filter((w) => w.path.startsWith('os.ssh_authorized_keys')).map((w) => w.message)).toEqual(['"<ssh-key>" looks like a placeholder']);
  });

  it('placeholders are found inside lists of objects, pointed at by index and key', async () => {
    const w = await warningsAt({ os: { write_files: [{ path: '/etc/a.conf', content: 'x' }, { path: '/etc/b.conf', content: '<CONTENT>' }] } });
    expect(w).toEqual([{ path: 'os.write_files[1].content', message: '"<CONTENT>" looks like a placeholder' }]);
  });

  it('a value that starts with <...> but goes on is text, not a placeholder', async () => {
    expect(await warningsAt({ os: { environment: { A: '<ab> y', B: '<ab>' } } })).toEqual([{ path: 'os.environment.B', message: '"<ab>" looks like a placeholder' }]);
  });

});

describe('the kernel command line: what a third mutation run left open', () => {
  it('blank lines, runs of separators and trailing white space make no empty tokens', () => {
    expect(tokenizeCmdline('a  \n\n b \t\n')).toEqual([
      { text: 'a', line: 1, column: 1 },
      { text: 'b', line: 3, column: 2 },
    ]);
  });

  it('a finding names the command line as its source, with severity and the token\'s line and column', () => {
    const r = parseCmdline('quiet harvester.os..hostname=x');
    expect(r.warnings).toEqual([
      { severity: 'warning', path: '', source: '<cmdline>', line: 1, column: 7, message: 'kernel parameter "harvester.os..hostname=x" has an empty key part and is ignored' },
    ]);
  });

  it('each key points at the first parameter that named it; later ones under it do not move it', () => {
    const r = parseCmdline('harvester.os.hostname=n1 harvester.os.ntp_servers=a');
    expect(r.positions.key.get('/os')).toEqual({ line: 1, column: 1 });
    expect(r.positions.key.get('/os/hostname')).toEqual({ line: 1, column: 1 });
    expect(r.positions.key.get('/os/ntp_servers')).toEqual({ line: 1, column: 26 });
  });

  it('a repeated key becomes a list whose every item points at its own parameter', () => {
    const r = parseCmdline('harvester.os.ntp_servers=a harvester.os.ntp_servers=b harvester.os.ntp_servers=c');
    expect(r.raw).toEqual({ os: { ntp_servers: ['a', 'b', 'c'] } });
    expect(r.positions.value.get('/os/ntp_servers/0')).toEqual({ line: 1, column: 1 });
    expect(r.positions.value.get('/os/ntp_servers/1')).toEqual({ line: 1, column: 28 });
    expect(r.positions.value.get('/os/ntp_servers/2')).toEqual({ line: 1, column: 55 });
  });
});

describe('the placeholder warning\'s kind', () => {
  it('is "placeholder", with its hint: hvpxe refuses to serve a config by that kind (pxe/state.ts), not by the words', async () => {
    const r = await validateConfig({ ...base, os: { ...base.os, ntp_servers: ['<NTP_SERVER>'] } });
    expect(r.warnings.filter((w) => w.path === 'os.ntp_servers[0]')).toEqual([
      expect.objectContaining({ severity: 'warning', kind: 'placeholder', message: '"<NTP_SERVER>" looks like a placeholder', hint: 'replace it with the real value' }),
    ]);
  });
});
