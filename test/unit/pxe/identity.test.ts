/**
 * Who a machine is: MACs with letters in both cases and spellings, in profiles.yaml and in requests;
 * SMBIOS UUIDs that identify no machine (all zeros, all ones, the white-box placeholder), refused in
 * profiles.yaml and never matched; machine names with dots; a TPM endorsement key claimed twice.
 */
import { describe, expect, it } from 'vitest';
import { buildCatalog, MACHINE_NAME_RE, machineByName, matchMachine, normaliseMac, normaliseUuid, parseProfiles, requestIdentifies } from '../../../pxe/profiles.js';
import { profilesText } from './helpers.js';

const withMacs = (a: string, b: string): string => profilesText().replace('mac: "52:54:00:00:00:01"', `mac: "${a}"`).replace('mac: "52-54-00-00-00-02"', `mac: "${b}"`);

describe('MACs in any case', () => {
  it('an upper-case MAC in profiles.yaml matches a lower-case request, and the reverse, in either spelling', async () => {
    const cat = buildCatalog(await parseProfiles(withMacs('AA:BB:CC:DD:EE:01', 'aa-bb-cc-dd-ee-02')));
    for (const q of ['aa:bb:cc:dd:ee:01', 'AA-BB-CC-DD-EE-01', 'Aa:bB:cC:Dd:eE:01', ' aa:bb:cc:dd:ee:01 ']) expect(matchMachine(cat, { mac: q })).toMatchObject({ by: 'mac', machine: { name: 'node-1', mac: 'aa:bb:cc:dd:ee:01' } });
    for (const q of ['AA:BB:CC:DD:EE:02', 'aa-bb-cc-dd-ee-02']) expect(matchMachine(cat, { mac: q })).toMatchObject({ by: 'mac', machine: { name: 'node-2' } });
    expect(requestIdentifies(machineByName(cat, 'node-1')!, { mac: 'AA-BB-CC-DD-EE-01' })).toBe(true);
    expect(requestIdentifies(machineByName(cat, 'node-1')!, { mac: 'AA-BB-CC-DD-EE-02' })).toBe(false);
    // The default group's made-up name is the same whatever the case the firmware sent.
    expect(matchMachine(cat, { mac: 'DE:AD:BE:EF:00:0A' })!.machine.name).toBe(matchMachine(cat, { mac: 'de-ad-be-ef-00-0a' })!.machine.name);
    expect(machineByName(cat, 'spare-deadbeef000a')).toMatchObject({ mac: 'de:ad:be:ef:00:0a' });
  });

  it('the same MAC in two cases under two machines is one MAC', async () => {
    const file = await parseProfiles(withMacs('AA:BB:CC:DD:EE:01', 'aa-bb-cc-dd-ee-01'));
    expect(() => buildCatalog(file)).toThrow("machines 'node-1' (group rack1) and 'node-2' (group rack1) have the same MAC aa:bb:cc:dd:ee:01");
  });

  it('normalises only MACs', () => {
    expect(normaliseMac('AB-CD-EF-01-23-45')).toBe('ab:cd:ef:01:23:45');
    for (const bad of ['ab:cd:ef:01:23', 'ab:cd:ef:01:23:45:67', 'gg:cd:ef:01:23:45', 'abcdef012345', '', null, undefined, 'ab:cd:ef:01:23:45:']) expect(normaliseMac(bad as string)).toBeUndefined();
  });
});

describe('SMBIOS UUIDs that identify no machine', () => {
  const useless = ['00000000-0000-0000-0000-000000000000', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '03000200-0400-0500-0006-000700080009'];

  it.each(useless)('refuses %s in profiles.yaml', async (uuid) => {
    const text = profilesText().replace('uuid: "11111111-2222-3333-4444-555555555555"', `uuid: "${uuid}"`);
    const file = await parseProfiles(text);
    expect(() => buildCatalog(file)).toThrow(`groups.rack1.machines[2].uuid: ${uuid} identifies no machine (firmware reports it when no UUID is set, or on every board of a model): use mac:`);
  });

  it.each(useless)('never matches a request carrying %s', async (uuid) => {
    const cat = buildCatalog(await parseProfiles(profilesText().replace('    default: true\n', '')));
    expect(normaliseUuid(uuid)).toBeUndefined();
    expect(matchMachine(cat, { uuid })).toBeUndefined();
    expect(requestIdentifies(machineByName(cat, 'node-3')!, { uuid })).toBe(false);
  });

  it('normalises real UUIDs to lower case', () => {
    expect(normaliseUuid(' 4C4C4544-0000-1111-2222-333344445555 ')).toBe('4c4c4544-0000-1111-2222-333344445555');
    expect(normaliseUuid('4c4c4544000011112222333344445555')).toBeUndefined();
  });
});

describe('machine names', () => {
  it('take hostnames with dots; never a leading dot, a slash or anything else', () => {
    for (const ok of ['node-1', 'n', 'node-2.rack1.example.com', 'mac-525400000001', 'uuid-11111111-2222-3333-4444-555555555555', 'a'.repeat(253)]) expect(MACHINE_NAME_RE.test(ok)).toBe(true);
    for (const bad of ['', '.', '..', '.hidden', 'a/b', 'node-1.', '-x', 'Node', 'a b', 'a'.repeat(254), 'a\n']) expect(MACHINE_NAME_RE.test(bad)).toBe(false);
  });
});

describe('TPM enrolment', () => {
  it('one endorsement key enrolled for two machines is refused, in any case', async () => {
    const ek = 'ab'.repeat(32);
    const text = profilesText()
      .replace('{ hostname: node-1, mac: "52:54:00:00:00:01", role: management }', `{ hostname: node-1, mac: "52:54:00:00:00:01", role: management, tpm_ek_sha256: "${ek}" }`)
      .replace('{ hostname: node-4 }', `{ hostname: node-4, tpm_ek_sha256: "${ek.toUpperCase()}" }`);
    const file = await parseProfiles(text);
    expect(() => buildCatalog(file)).toThrow(`machines 'node-1' (group rack1) and 'node-4' (group named) have the same TPM endorsement key ${ek}`);
  });
});

describe('buildCatalog, the rest of its rules', () => {
  it("refuses a machine named like the default group's made-up names", async () => {
    const file = await parseProfiles(profilesText('  - name: more\n    profile: hv\n    machines: [{ name: spare-x, mac: "52:54:00:00:00:42" }]\n'));
    expect(() => buildCatalog(file)).toThrow("machine name 'spare-x' collides with the default group's generated names (spare-<mac>)");
  });

  it('numbers the machines of a fleet (0 creates the cluster), not the others; names fall back to the hostname, then mac-, then uuid-', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText('  - name: bare\n    profile: hv\n    machines: [{ mac: "52:54:00:00:00:43" }, { uuid: "22222222-3333-4444-5555-666666666666" }]\n')));
    expect(cat.machines.map((m) => [m.name, m.fleetIndex])).toEqual([
      ['node-1', 0],
      ['node-2', 1],
      ['node-3', 2],
      ['node-4', undefined],
      ['mac-525400000043', undefined],
      ['uuid-22222222-3333-4444-5555-666666666666', undefined],
    ]);
    expect(cat.defaultGroup?.name).toBe('spare');
    expect(cat.byHostname.get('node-4')?.name).toBe('node-4');
    expect(cat.byUuid.get('22222222-3333-4444-5555-666666666666')?.name).toBe('uuid-22222222-3333-4444-5555-666666666666');
  });

  it('a machine declared by hostname alone matches its hostname in any case; the default group only with a MAC', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText()));
    expect(matchMachine(cat, { hostname: ' Node-4 ' })).toMatchObject({ by: 'hostname', machine: { name: 'node-4' } });
    expect(requestIdentifies(machineByName(cat, 'node-4')!, { hostname: 'NODE-4' })).toBe(true);
    expect(requestIdentifies(machineByName(cat, 'node-4')!, {})).toBe(false);
    expect(matchMachine(cat, { uuid: '99999999-0000-0000-0000-000000000000' })).toBeUndefined();
    expect(machineByName(cat, 'spare-52540000004')).toBeUndefined();
    expect(machineByName(cat, 'spare-52540000004g')).toBeUndefined();
    expect(machineByName(cat, 'nobody')).toBeUndefined();
  });
});
