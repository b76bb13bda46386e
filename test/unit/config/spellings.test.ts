/**
 * How a key's spelling finds its field, and how a misspelt key finds its suggestion: Harvester's
 * FuzzyNames rules (harvester/harvester-installer pkg/config/rename.go) and an optimal string
 * alignment distance, with every expected value written out. Synthetic struct nodes isolate one
 * rule each (which spelling wins when two fields could claim it).
 */
import { describe, expect, it } from 'vitest';
import { closest, editDistance, spellingsOf, toSnakeCase } from '../../../config/spellings.js';
import type { FieldNode } from '../../../config/generated/harvester-config.fields.js';

const struct = (names: string[], g?: Record<string, string>): FieldNode => ({ k: 'struct', f: Object.fromEntries(names.map((n) => [n, { k: 'string' }])), ...(g ? { g } : {}) });

describe('toSnakeCase (Go convert.ToYAMLKey: "_" before an upper-case letter that follows a non-upper one)', () => {
  it.each([
    ['serverUrl', 'server_url'],
    ['Hostname', 'hostname'],
    ['vipHwAddr', 'vip_hw_addr'],
    ['ipv4Address', 'ipv4_address'],
    ['sizeZ', 'size_z'],
    ['URLPath', 'urlpath'],
  ])('%s -> %s', (name, want) => {
    expect(toSnakeCase(name)).toBe(want);
  });
});

describe('spellingsOf: every accepted spelling of a struct\'s fields', () => {
  it('the singular of a name in -es and in -s, in every case spelling; a one- or two-letter name gives no empty spelling', () => {
    const m = spellingsOf(struct(['addresses', 'dnsNameservers', 'es', 's']));
    expect(m.get('address')).toBe('addresses');
    expect(m.get('addresse')).toBe('addresses');
    expect(m.get('dns_nameserver')).toBe('dnsNameservers');
    expect(m.get('dnsnameserver')).toBe('dnsNameservers');
    expect(m.has('')).toBe(false);
    expect(m.has('ad')).toBe(false);
    expect(m.has('addres')).toBe(false);
  });
  it('a name in neither -s nor -es has no shortened spelling', () => {
    const m = spellingsOf(struct(['hostname']));
    expect([...m.keys()].sort()).toEqual(['hostname']);
  });
  it('a spelling of one field never goes to another field derived later (the first field keeps its snake and lower case)', () => {
    const m = spellingsOf(struct(['fooBar', 'fooBars']));
    expect(m.get('foo_bar')).toBe('fooBar');
    expect(m.get('foobar')).toBe('fooBar');
    expect(m.get('foo_bars')).toBe('fooBars');
  });
  it('a yaml.v3 key never shadows another field\'s spelling, and reaches its own field otherwise', () => {
    const m = spellingsOf(struct(['a', 'externalStorageConfig'], { a: 'externalstorageconfig', externalStorageConfig: 'externalstorage' }));
    expect(m.get('externalstorageconfig')).toBe('externalStorageConfig');
    expect(m.get('externalstorage')).toBe('externalStorageConfig');
  });
});

describe('editDistance (optimal string alignment: an adjacent swap is one edit)', () => {
  it.each([
    ['kitten', 'sitting', 3],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['ab', 'ba', 1],
    ['abcd', 'acbd', 1],
    ['ca', 'abc', 3],
    ['hostname', 'hostname', 0],
    ['a', 'b', 1],
  ])('%j ~ %j is %i', (a, b, want) => {
    expect(editDistance(a, b)).toBe(want);
  });
  it('stops past max with max + 1, but gives the distance when it is exactly max', () => {
    expect(editDistance('a', 'abcdefghi', 8)).toBe(8);
    expect(editDistance('a', 'abcdefghij', 8)).toBe(9);
    expect(editDistance('a', 'abcdefghijkl', 8)).toBe(9);
    expect(editDistance('ab', 'cd', 2)).toBe(2);
    expect(editDistance('aaaa', 'bbbb', 2)).toBe(3);
  });
});

describe('closest: the suggestion for a misspelt key', () => {
  it('ignores case, _ and -; a longer word may be further off (a third of its length, 1 to 3 edits)', () => {
    expect(closest('DNS-NameServer', ['dnsNameservers', 'ntpServers'])).toBe('dnsNameservers');
    expect(closest('hostnm', ['hostname', 'password'])).toBe('hostname');
    expect(closest('ab', ['xy'])).toBeUndefined();
    expect(closest('hostnm', ['hostnamexyz'])).toBeUndefined();
  });
  it('of equally close candidates the first is named', () => {
    expect(closest('cat', ['bat', 'hat'])).toBe('bat');
  });
});
