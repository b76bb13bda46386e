/**
 * Properties over any input, not only mutations of valid configs: the validator never throws on any
 * YAML document fast-check can make (any value, written out as YAML, in any of yaml's styles; any
 * text at all), and the kernel command line parser never throws on any string. Each returns a
 * structured result whose findings are placed inside the input. The seed varies per run and is
 * printed (HV_FUZZ_SEED replays one, test/fuzz-seed.ts).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { validateSources } from '../../../config/validate.js';
import { normaliseYamlText } from '../../../config/load.js';
import { parseCmdline, tokenizeCmdline } from '../../../config/cmdline.js';
import { normaliseRaw } from '../../../config/normalise.js';
import type { Finding, ValidationResult } from '../../../config/types.js';
import { fuzzSeed } from '../../fuzz-seed.js';

function placedInside(f: Finding, text: string): void {
  const lines = text.split('\n');
  if (f.line === undefined) return;
  expect(f.line).toBeGreaterThanOrEqual(1);
  expect(f.line).toBeLessThanOrEqual(Math.max(1, lines.length));
  if (f.column !== undefined) expect(f.column).toBeGreaterThanOrEqual(1);
}

function checkResult(r: ValidationResult, text: string): void {
  expect(r.valid).toBe(r.errors.length === 0);
  for (const f of [...r.errors, ...r.warnings]) {
    expect(typeof f.message).toBe('string');
    expect(f.message.length).toBeGreaterThan(0);
    expect(typeof f.path).toBe('string');
    placedInside(f, text);
  }
  expect(() => JSON.stringify(r.config)).not.toThrow();
}

/** What `hvinstall validate FILE` runs on a file's text. */
function validateText(text: string): ValidationResult {
  const n = normaliseYamlText(text, 'any.yaml');
  if (!n.source) {
    expect(n.errors.length).toBeGreaterThan(0);
    return { valid: false, errors: n.errors, warnings: n.warnings, config: {} };
  }
  return validateSources([n.source], {}, { warnings: n.warnings });
}

/** Keys a Harvester config has, so documents reach the rules, not only the unknown-key path. */
const configKey = fc.constantFrom(
  'scheme_version', 'token', 'server_url', 'os', 'install', 'mode', 'management_interface', 'interfaces', 'method', 'ip', 'subnet_mask',
  'gateway', 'vip', 'vip_mode', 'dns_nameservers', 'ntp_servers', 'environment', 'http_proxy', 'no_proxy', 'webhooks', 'event', 'url',
  'system_settings', 'http-proxy', 'ssh_authorized_keys', 'hostname', 'cluster_pod_cidr', 'externalstorage', 'writefiles', '__proto__', 'networks',
);
const anyValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.anything({ maxDepth: 2 }),
    fc.constantFrom('10.52.0.5', '10.0.2.1', '8.8.8.8', 'https://1.2.3.4/', 'github:x', 'create', 'join', 'static', 'dhcp', '{{ .Nope }}', '255.255.255.0', null),
    fc.dictionary(fc.oneof(configKey, fc.string({ maxLength: 8 })), tie('value'), { maxKeys: 6 }),
    fc.array(tie('value'), { maxLength: 4 }),
  ),
})).value;
const yamlStyle = fc.record({
  indent: fc.integer({ min: 1, max: 8 }),
  flow: fc.boolean(),
  quote: fc.boolean(),
  version: fc.constantFrom('1.1' as const, '1.2' as const),
});

describe('the validator never throws', () => {
  it('on any document fast-check can make, written as YAML in any style', () => {
    fc.assert(
      fc.property(anyValue, yamlStyle, (doc, style) => {
        let text: string | undefined;
        try {
          text = stringify(doc, { indent: style.indent, collectionStyle: style.flow ? 'flow' : 'any', defaultStringType: style.quote ? 'QUOTE_DOUBLE' : 'PLAIN', version: style.version });
        } catch {
          return; // values yaml itself cannot write (a symbol, a function) are no documents
        }
        if (text === undefined) return; // stringify(undefined): nothing written, no document
        checkResult(validateText(text), text);
      }),
      { numRuns: 2000, seed: fuzzSeed('any document fast-check can make, as YAML') },
    );
  });

  it('on any text at all', () => {
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ unit: fc.constantFrom(...'ab:- \n\t[]{}#&*!|>\'"%@`,?0.\\'.split('')), maxLength: 200 }));
    fc.assert(
      fc.property(text, (t) => checkResult(validateText(t), t)),
      { numRuns: 2000, seed: fuzzSeed('any text as a config file') },
    );
  });
});

describe('the kernel command line parser never throws', () => {
  it('on any string; every parameter it reads starts where a token starts', () => {
    const line = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.array(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('harvester.', 'harvester.install.', '=', '"', ' ', '\n', 'hvinstall.ca_file=')), { maxLength: 30 }).map((p) => p.join('')),
    );
    fc.assert(
      fc.property(line, (text) => {
        const tokens = tokenizeCmdline(text);
        const p = parseCmdline(text);
        const starts = new Set(tokens.map((t) => `${t.line}:${t.column}`));
        for (const f of [...p.errors, ...p.warnings]) expect(starts.has(`${f.line}:${f.column}`)).toBe(true);
        const n = normaliseRaw(p.raw, { name: '<cmdline>', cmdline: true, positions: p.positions });
        checkResult(validateSources([n], {}, { errors: p.errors, warnings: p.warnings }), text);
      }),
      { numRuns: 3000, seed: fuzzSeed('any string as a kernel command line') },
    );
  });
});
