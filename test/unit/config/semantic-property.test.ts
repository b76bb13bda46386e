/**
 * What the validator says, as properties over generated valid create-mode configs:
 * - a valid config stays valid, with the same canonical config and the same warnings, whatever the
 *   YAML layout (indentation, flow or block, quoting) and whichever of Harvester's spellings
 *   (snake_case, camelCase, all-lowercase) each key is written in;
 * - taking away one required field gives exactly the one error Harvester gives for it, at its path.
 * The seed changes every run and is printed (replay with HV_FUZZ_SEED).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { validateRawConfig, validateSources } from '../../../config/validate.js';
import { normaliseYamlText } from '../../../config/load.js';
import type { ValidationResult } from '../../../config/types.js';
import { fuzzRuns, fuzzSeed } from '../../fuzz-seed.js';

type Obj = Record<string, unknown>;

const octet = fc.integer({ min: 1, max: 254 });
const word = (re: RegExp) => fc.stringMatching(re).filter((s) => !/change[_-]?me|replace[_-]?me/i.test(s));

/** A create-mode config as a user writes it (snake_case), valid by Harvester's rules. */
const validCreateConfig = fc
  .record({
    hostname: word(/^[a-z][a-z0-9-]{0,14}[a-z0-9]$/),
    token: word(/^[A-Za-z0-9][A-Za-z0-9!#%+,.:=@_-]{7,31}$/),
    password: word(/^[A-Za-z0-9][A-Za-z0-9!#%+.:=@_-]{5,20}$/),
    nics: fc.uniqueArray(fc.constantFrom('ens3', 'eno1', 'enp1s0', 'eth0', 'ens1f0np0'), { minLength: 1, maxLength: 2 }),
    // 10.52/16 and 10.53/16 are the cluster's default pod and service networks: a trap, not a valid LAN.
    net: fc.record({ a: octet.filter((a) => a !== 52 && a !== 53), b: octet, host: fc.integer({ min: 2, max: 120 }), vipHost: fc.integer({ min: 121, max: 250 }) }),
    static: fc.boolean(),
    bond: fc.option(fc.record({ mode: fc.constantFrom('active-backup', 'balance-tlb', '802.3ad'), miimon: fc.constantFrom('100', '200') }), { nil: undefined }),
    device: fc.constantFrom('/dev/sda', '/dev/nvme0n1', '/dev/vda', '/dev/disk/by-id/nvme-SAMSUNG_MZ1L2960HCJR-00A07_S665NE0R123456'),
    ntp: fc.array(fc.constantFrom('0.suse.pool.ntp.org', 'ntp1.example.com', '10.0.0.1'), { maxLength: 2 }),
    labels: fc.dictionary(word(/^[a-z][a-z0-9]{0,8}$/), word(/^[a-z0-9]{1,10}$/), { maxKeys: 3 }),
    sysctls: fc.dictionary(fc.constantFrom('net.ipv4.ip_forward', 'vm.max_map_count', 'kernel.pid_max'), fc.constantFrom('1', '262144', '4194304'), { maxKeys: 2 }),
    forceEfi: fc.boolean(),
    logLevel: fc.option(fc.constantFrom('info', 'debug'), { nil: undefined }),
  })
  .map((g) => {
    const net = `10.${g.net.a}.${g.net.b}`;
    const mi: Obj = { interfaces: g.nics.map((name) => ({ name })), method: g.static ? 'static' : 'dhcp' };
    if (g.static) Object.assign(mi, { ip: `${net}.${g.net.host}`, subnet_mask: '255.255.255.0', gateway: `${net}.1` });
    if (g.bond) mi.bond_options = g.bond;
    const os: Obj = { hostname: g.hostname, password: g.password };
    if (g.static) os.dns_nameservers = [`${net}.53`];
    if (g.ntp.length) os.ntp_servers = g.ntp;
    if (Object.keys(g.labels).length) os.labels = g.labels;
    if (Object.keys(g.sysctls).length) os.sysctls = g.sysctls;
    const install: Obj = { mode: 'create', management_interface: mi, device: g.device, vip: `${net}.${g.net.vipHost}`, vip_mode: 'static' };
    if (g.forceEfi) install.force_efi = true;
    const cfg: Obj = { scheme_version: 1, token: g.token, os, install };
    if (g.logLevel) cfg.system_settings = { 'log-level': g.logLevel };
    return cfg;
  });

/** Keys under these are data (label names, sysctl names, setting names), not field names: never respelled. */
const MAP_KEYS = new Set(['labels', 'sysctls', 'system_settings', 'bond_options', 'environment', 'headers']);

const camel = (snake: string) => snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const SPELLINGS = [(k: string) => k, camel, (k: string) => camel(k).toLowerCase()];

/** Rewrites every field name in one of Harvester's accepted spellings, chosen by `pick`. */
function respell(v: unknown, pick: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => respell(x, pick));
  if (!v || typeof v !== 'object') return v;
  const out: Obj = {};
  for (const [k, x] of Object.entries(v)) out[SPELLINGS[pick() % SPELLINGS.length]!(k)] = MAP_KEYS.has(k) ? x : respell(x, pick);
  return out;
}

const yamlStyle = fc.record({
  indent: fc.integer({ min: 1, max: 6 }),
  collectionStyle: fc.constantFrom('any', 'block', 'flow'),
  defaultStringType: fc.constantFrom('PLAIN', 'QUOTE_DOUBLE', 'QUOTE_SINGLE', 'BLOCK_LITERAL'),
  defaultKeyType: fc.constantFrom(null, 'PLAIN', 'QUOTE_DOUBLE'),
  comment: fc.boolean(),
});

function asYaml(v: unknown, style: { indent: number; collectionStyle: string; defaultStringType: string; defaultKeyType: string | null; comment: boolean }): string {
  const text = stringify(v, {
    indent: style.indent,
    collectionStyle: style.collectionStyle as 'any',
    defaultStringType: style.defaultStringType as 'PLAIN',
    defaultKeyType: style.defaultKeyType as 'PLAIN' | null,
    lineWidth: 0,
  });
  return style.comment ? `# generated by a property test\n${text}\n# end\n` : text;
}

function validateText(text: string): ValidationResult {
  const n = normaliseYamlText(text, 'generated.yaml');
  if (!n.source) return { valid: false, errors: n.errors, warnings: n.warnings, config: {} };
  return validateSources([n.source], {}, { warnings: n.warnings });
}

const messages = (r: ValidationResult) => ({ errors: r.errors.map((e) => e.message).sort(), warnings: r.warnings.map((w) => w.message).sort() });

const fixtures = (() => {
  const dir = path.resolve(__dirname, '../../fixtures/config/valid');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ name: f, value: (parseAllDocuments(readFileSync(path.join(dir, f), 'utf8'), { merge: true }) as Array<{ toJS(): unknown }>)[0]!.toJS() }));
})();

describe('a valid config stays valid, meaning the same', () => {
  it('generated create configs: any layout, any accepted spelling of each key', () => {
    fc.assert(
      fc.property(validCreateConfig, yamlStyle, fc.infiniteStream(fc.nat()), (cfg, style, choices) => {
        const want = validateRawConfig(cfg);
        expect(want.errors).toEqual([]);
        const it = choices[Symbol.iterator]();
        const text = asYaml(respell(cfg, () => it.next().value as number), style);
        const got = validateText(text);
        expect(got.errors, text).toEqual([]);
        expect(got.config).toEqual(want.config);
        expect(messages(got)).toEqual(messages(want));
      }),
      { numRuns: fuzzRuns(400), seed: fuzzSeed('valid configs survive reformatting and respelling') },
    );
  });

  it('the valid fixtures: any YAML layout validates as the same document', () => {
    fc.assert(
      fc.property(fc.constantFrom(...fixtures), yamlStyle, (f, style) => {
        const want = validateRawConfig(f.value);
        const got = validateText(asYaml(f.value, style));
        expect(got.valid, f.name).toBe(true);
        expect(got.config).toEqual(want.config);
        expect(messages(got)).toEqual(messages(want));
      }),
      { numRuns: fuzzRuns(300), seed: fuzzSeed('valid fixtures survive reformatting') },
    );
  });
});

describe('taking away one required field gives exactly its error', () => {
  type Removal = { path: string[]; message: string; when?: (c: Obj) => boolean };
  const isStatic = (c: Obj) => ((c.install as Obj).management_interface as Obj).method === 'static';
  // Harvester's messages (harvester/harvester-installer pkg/config/validator.go), written out.
  const REMOVALS: Removal[] = [
    { path: ['scheme_version'], message: 'Unsupported Harvester Scheme Version 0, please use new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/' },
    { path: ['token'], message: 'token not specified' },
    { path: ['os', 'password'], message: 'no SSH authorized keys or passwords are set' },
    { path: ['install', 'mode'], message: 'unknown mode: ' },
    { path: ['install', 'device'], message: 'no device specified' },
    {
      path: ['install', 'management_interface', 'interfaces'],
      message: 'networks is deprecated, please use management_interface for new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface',
    },
    { path: ['install', 'management_interface', 'method'], message: 'management network must configure with either static or DHCP method' },
    { path: ['install', 'vip_mode'], message: 'unknown vip mode: ' },
    { path: ['install', 'vip'], message: 'vip is required in create mode with vip_mode static' },
    { path: ['install', 'management_interface', 'ip'], message: 'must specify ip in static method', when: isStatic },
    { path: ['install', 'management_interface', 'subnet_mask'], message: 'must specify subnetMask in static method', when: isStatic },
    { path: ['install', 'management_interface', 'gateway'], message: 'must specify gateway in static method', when: isStatic },
    { path: ['os', 'dns_nameservers'], message: 'DNS servers are required for static IP address', when: isStatic },
  ];

  it('for every required field of a generated create config', () => {
    fc.assert(
      fc.property(validCreateConfig, fc.constantFrom(...REMOVALS), (cfg, removal) => {
        fc.pre(!removal.when || removal.when(cfg));
        const broken = structuredClone(cfg);
        let parent = broken;
        for (const k of removal.path.slice(0, -1)) parent = parent[k] as Obj;
        delete parent[removal.path.at(-1)!];
        expect(validateRawConfig(broken).errors.map((e) => ({ path: e.path, message: e.message }))).toEqual([{ path: removal.path.join('.'), message: removal.message }]);
      }),
      { numRuns: fuzzRuns(400), seed: fuzzSeed('one required field removed gives exactly its error') },
    );
  });
});
