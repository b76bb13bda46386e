import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildCatalog, matchMachine, machineByName, parseProfiles, requestIdentifies } from '../../../pxe/profiles.js';
import { renderMachineConfig, asInstallSees } from '../../../pxe/render-config.js';
import { renderBootScript, renderMachineScript, renderNoMatchScript } from '../../../pxe/ipxe.js';
import { renderAndValidateConfigs } from '../../../pxe/state.js';
import { profilesText, validatorDouble } from './helpers.js';

const URL_ = 'http://10.0.0.1:8080';

async function catalog(extra = '') {
  return buildCatalog(await parseProfiles(profilesText(extra)));
}

describe('parseProfiles', () => {
  it('accepts the example and reports schema errors with their line', async () => {
    await expect(parseProfiles(profilesText())).resolves.toMatchObject({ server_url: URL_ });
    const bad = profilesText().replace('sha256: "' + 'a'.repeat(64) + '" }\n  initrd', 'sha256: "xyz" }\n  initrd');
    await expect(parseProfiles(bad, 'p.yaml')).rejects.toThrow(/p\.yaml: 1 problem:\n {2}- \/artifacts\/kernel\/sha256 \(line 4\): must match pattern/);
  });
  it('refuses unknown keys, artifacts, profiles and two default groups', async () => {
    await expect(parseProfiles(profilesText() + 'bogus: 1\n')).rejects.toThrow(/must NOT have additional properties 'bogus'/);
    await expect(parseProfiles(profilesText().replace('rootfs: rootfs\n', 'rootfs: nope\n'))).rejects.toThrow(/profiles\.hv\.rootfs: unknown artifact 'nope'/);
    await expect(parseProfiles(profilesText().replace('profile: hv\n    default', 'profile: other\n    default'))).rejects.toThrow(/groups\.spare\.profile: unknown profile 'other'/);
    await expect(parseProfiles(profilesText('  - { name: more, profile: hv, default: true }\n'))).rejects.toThrow(/only one group may be the default \(found spare, more\)/);
  });
  it('refuses YAML syntax errors with the line', async () => {
    await expect(parseProfiles('artifacts: [\n', 'x.yaml')).rejects.toThrow(/x\.yaml: 1 problem:\n  - line 2: Flow sequence/);
  });
});

describe('buildCatalog', () => {
  it('refuses duplicate MACs (in either spelling), UUIDs and names', async () => {
    const dupMac = profilesText('  - name: g2\n    profile: hv\n    machines: [{ hostname: node-9, mac: "52:54:00:00:00:02" }]\n');
    expect(() => buildCatalog((parse(dupMac) as never))).toThrow("machines 'node-2' (group rack1) and 'node-9' (group g2) have the same MAC 52:54:00:00:00:02");
    const dupName = profilesText('  - name: g2\n    profile: hv\n    machines: [{ hostname: node-1, mac: "52:54:00:00:00:09" }]\n');
    expect(() => buildCatalog(parse(dupName) as never)).toThrow("machines 'node-1' (group rack1) and 'node-1' (group g2) have the same name node-1");
  });
  it('needs gateway and dns with a static ip', async () => {
    const t = profilesText('  - name: g2\n    profile: hv\n    machines: [{ hostname: node-9, mac: "52:54:00:00:00:09", ip: 10.0.0.9/24 }]\n');
    expect(() => buildCatalog(parse(t) as never)).toThrow(/a static ip needs gateway and dns/);
  });
});

describe('matchMachine', () => {
  it('matches by MAC (any case and separator), then UUID, then hostname, then the default group', async () => {
    const cat = await catalog();
    expect(matchMachine(cat, { mac: '52:54:00:00:00:01' })).toMatchObject({ by: 'mac', machine: { name: 'node-1' } });
    expect(matchMachine(cat, { mac: '52-54-00-00-00-02' })).toMatchObject({ by: 'mac', machine: { name: 'node-2' } });
    expect(matchMachine(cat, { mac: 'aa:aa:aa:aa:aa:aa', uuid: '11111111-2222-3333-4444-555555555555' })).toMatchObject({ by: 'uuid', machine: { name: 'node-3' } });
    expect(matchMachine(cat, { uuid: '4c4c4544-0000-1111-2222-333344445555' })).toMatchObject({ by: 'uuid', machine: { name: 'node-2' } });
    expect(matchMachine(cat, { hostname: 'NODE-4' })).toMatchObject({ by: 'hostname', machine: { name: 'node-4' } });
    expect(matchMachine(cat, { mac: 'AA:BB:CC:DD:EE:FF' })).toMatchObject({ by: 'default', machine: { name: 'spare-aabbccddeeff', viaDefault: true } });
  });
  it("a DHCP hostname never matches a MAC- or UUID-bound machine (it would hand out that machine's config URL)", async () => {
    const cat = await catalog();
    expect(matchMachine(cat, { hostname: 'node-3' })).toBeUndefined();
    expect(matchMachine(cat, { hostname: 'node-1', mac: 'aa:bb:cc:00:00:01' })).toMatchObject({ by: 'default', machine: { name: 'spare-aabbcc000001' } });
    const n4 = machineByName(cat, 'node-4')!;
    expect(requestIdentifies(n4, { hostname: 'node-4' })).toBe(true);
    expect(requestIdentifies(n4, { mac: '52:54:00:00:00:01' })).toBe(false);
    expect(requestIdentifies(machineByName(cat, 'node-1')!, { hostname: 'node-1' })).toBe(false);
  });

  it('matches nothing without a default group, and never on the all-zero UUID or garbage', async () => {
    const noDefault = buildCatalog(await parseProfiles(profilesText().replace('    default: true\n', '')));
    expect(matchMachine(noDefault, { mac: 'aa:bb:cc:dd:ee:ff' })).toBeUndefined();
    expect(matchMachine(noDefault, { uuid: '00000000-0000-0000-0000-000000000000' })).toBeUndefined();
    expect(matchMachine(noDefault, { mac: '52:54:00:00:00:01\nchain http://evil/' })).toBeUndefined();
    expect(matchMachine(await catalog(), {})).toBeUndefined();
  });
  it('finds machines by URL name and checks a request identifies them', async () => {
    const cat = await catalog();
    const n2 = machineByName(cat, 'node-2')!;
    expect(requestIdentifies(n2, { mac: '52:54:00:00:00:02' })).toBe(true);
    expect(requestIdentifies(n2, { uuid: '4C4C4544-0000-1111-2222-333344445555' })).toBe(true);
    expect(requestIdentifies(n2, { mac: '52:54:00:00:00:01' })).toBe(false);
    expect(requestIdentifies(n2, {})).toBe(false);
    expect(machineByName(cat, 'spare-aabbccddeeff')).toMatchObject({ mac: 'aa:bb:cc:dd:ee:ff', viaDefault: true });
    expect(machineByName(cat, 'spare-zz')).toBeUndefined();
    expect(machineByName(cat, 'nobody')).toBeUndefined();
  });
});

describe('renderMachineConfig', () => {
  it('fleet shorthand: the first machine creates on the VIP, the rest join https://<vip>:443', async () => {
    const cat = await catalog();
    const c1 = renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_) as any;
    expect(c1.install).toMatchObject({ mode: 'create', vip: '10.0.0.100', vip_mode: 'static', role: 'management', device: '/dev/disk/by-id/nvme-1' });
    expect(c1.server_url).toBeUndefined();
    expect(c1.token).toBe('tok-alpha');
    expect(c1.os.hostname).toBe('node-1');
    expect(c1.install.management_interface).toEqual({ interfaces: [{ hwAddr: '52:54:00:00:00:01' }], method: 'dhcp' });
    expect(c1.install.iso_url).toBe(`${URL_}/artifacts/harvester.iso`);
    const c2 = renderMachineConfig(cat, machineByName(cat, 'node-2')!, URL_) as any;
    expect(c2.install.mode).toBe('join');
    expect(c2.server_url).toBe('https://10.0.0.100:443');
    expect(c2.install.vip).toBeUndefined();
  });
  it('static ip sets method, address, mask, gateway and DNS; machine values override group values', async () => {
    const cat = await catalog();
    const c3 = renderMachineConfig(cat, machineByName(cat, 'node-3')!, URL_) as any;
    expect(c3.install.management_interface).toEqual({ method: 'static', ip: '10.0.0.13', subnet_mask: '255.255.255.0', gateway: '10.0.0.1' });
    expect(c3.os.dns_nameservers).toEqual(['10.0.0.1', '1.1.1.1']);
    expect(c3.install.device).toBe('/dev/disk/by-id/sda');
  });
  it('adds webhooks that report progress to hvpxe, after the template ones', async () => {
    const cat = await catalog();
    const c1 = renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_) as any;
    expect(c1.install.webhooks.map((w: any) => `${w.event} ${w.method} ${w.url}`)).toEqual([
      `STARTED POST ${URL_}/events/node-1`,
      `SUCCEEDED POST ${URL_}/events/node-1`,
      `FAILED POST ${URL_}/events/node-1`,
    ]);
    const off = buildCatalog(await parseProfiles(profilesText().replace('kernel_args:', 'report_events: false\n    kernel_args:')));
    expect((renderMachineConfig(off, machineByName(off, 'node-1')!, URL_) as any).install.webhooks).toBeUndefined();
  });
  it('replaces every spelling of a key it sets (camelCase templates stay loadable)', async () => {
    const t = profilesText().replace('      install:\n        device:', '      serverUrl: https://stale:443\n      install:\n        vipMode: dhcp\n        device:');
    const cat = buildCatalog(await parseProfiles(t));
    const c1 = renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_) as any;
    expect(c1.serverUrl).toBeUndefined();
    expect(c1.install.vipMode).toBe('static');
    expect(c1.install.vip_mode).toBeUndefined();
  });
  it('refuses unknown placeholders with where they are', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText().replace('tok-${cluster}', 'tok-${nope}')));
    expect(() => renderMachineConfig(cat, machineByName(cat, 'node-1')!, URL_)).toThrow(/token: unknown placeholder \$\{nope\}/);
  });
  it('keys named like Object.prototype members stay plain keys: a group config __proto__ is served (and so reported), ${constructor} is an unknown placeholder', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText().replace("config: { server_url: https://10.0.0.100:443, install: { mode: join } }", "config: { server_url: https://10.0.0.100:443, install: { mode: join }, __proto__: { install: { mode: create } } }")));
    const spare = renderMachineConfig(cat, machineByName(cat, 'spare-aabbccddeeff')!, URL_);
    expect(Object.getPrototypeOf(spare)).toBe(Object.prototype);
    expect(Object.keys(spare)).toContain('__proto__');
    expect((spare as any).install.mode).toBe('join');
    expect(({} as any).install).toBeUndefined();
    const ctor = buildCatalog(await parseProfiles(profilesText().replace('tok-${cluster}', 'tok-${constructor}')));
    expect(() => renderMachineConfig(ctor, machineByName(ctor, 'node-1')!, URL_)).toThrow(/token: unknown placeholder \$\{constructor\}/);
  });
  it('validates every servable config, default group included, and reports which machine failed', async () => {
    const cat = buildCatalog(await parseProfiles(profilesText().replace('server_url: https://10.0.0.100:443, ', '')));
    const r = await renderAndValidateConfigs(cat, URL_, validatorDouble);
    expect(r.errors).toEqual(["default group spare (rendered for sample MAC 02:00:00:00:00:01): server_url: ServerURL can't empty in join mode"]);
    expect([...r.configs.keys()]).toEqual(['node-1', 'node-2', 'node-3', 'node-4']);
    expect(r.redactor.redactString('x tok-alpha pw-secret')).toBe('x <redacted> <redacted>');
    expect(asInstallSees({ install: { mode: 'join' } })).toEqual({ install: { mode: 'join', automatic: true } });
  });
});

describe('iPXE scripts', () => {
  it('boot.ipxe chains to /ipxe/auto with the MAC, UUID, hostname, arch and platform', () => {
    expect(renderBootScript(URL_).split('\n')).toEqual([
      '#!ipxe',
      '# hvpxe: identify this machine (MAC of the boot NIC, SMBIOS UUID, DHCP hostname) and chain to its script.',
      'isset ${netX/ip} || dhcp',
      `chain --autofree ${URL_}/ipxe/auto?mac=\${netX/mac}&uuid=\${uuid}&hostname=\${hostname:uristring}&buildarch=\${buildarch}&platform=\${platform} || goto failed`,
      ':failed',
      `echo hvpxe: could not fetch this machine's boot script from ${URL_}`,
      'echo hvpxe: check that hvpxe serve is running and reachable; trying the next boot device in 30 s',
      'sleep 30',
      'exit 1',
      '',
    ]);
  });
  it("a machine's script has Harvester's kernel parameters; initrd= only for UEFI; profile args replace same keys", async () => {
    const cat = await catalog();
    const lines = renderMachineScript(cat, machineByName(cat, 'node-2')!, URL_, { platform: 'efi', matchedBy: 'mac' }).split('\n');
    expect(lines[0]).toBe('#!ipxe');
    expect(lines[1]).toBe('# hvpxe: machine node-2 (group rack1, profile hv, matched by mac)');
    expect(lines[3]).toBe(
      `kernel ${URL_}/artifacts/k/vmlinuz initrd=initrd.img ip=dhcp net.ifnames=1 rd.cos.disable root=live:${URL_}/artifacts/rootfs.squashfs harvester.install.automatic=true harvester.install.config_url=${URL_}/config/node-2.yaml?mac=52:54:00:00:00:02 hvinstall.events_url=${URL_}/events/node-2 rd.net.dhcp.retry=3 console=ttyS0 || goto failed`,
    );
    expect(lines[4]).toBe(`initrd ${URL_}/artifacts/k/initrd.img || goto failed`);
    expect(lines[5]).toBe('boot || goto failed');
    const bios = renderMachineScript(cat, machineByName(cat, 'node-3')!, URL_, { platform: 'pcbios' }).split('\n')[3];
    expect(bios).not.toContain('initrd=');
    expect(bios).toContain(`harvester.install.config_url=${URL_}/config/node-3.yaml?uuid=11111111-2222-3333-4444-555555555555`);
  });
  it('turns no TLS check off by default; rd.noverifyssl is there only when the profile names it', async () => {
    // Only dracut reads rd.noverifyssl (Harvester's initrd fetching root=live:https); nothing of
    // hvinstall's live system does, so it is not a default: an operator who needs it says so.
    const line = (cat: Awaited<ReturnType<typeof catalog>>) => renderMachineScript(cat, machineByName(cat, 'node-2')!, URL_, { platform: 'efi', matchedBy: 'mac' }).split('\n')[3];
    const plain = line(await catalog()).split(' ');
    expect(plain).not.toContain('rd.noverifyssl');
    expect(plain).toEqual(expect.arrayContaining(['ip=dhcp', 'net.ifnames=1', 'rd.cos.disable']));
    const asked = buildCatalog(await parseProfiles(profilesText().replace('kernel_args: [', 'kernel_args: [rd.noverifyssl, ')));
    expect(line(asked).split(' ').filter((a) => a === 'rd.noverifyssl')).toHaveLength(1);
  });
  it('an unmatched machine gets a message and exits instead of hanging; its query cannot inject commands', () => {
    const lines = renderNoMatchScript({ mac: '52:54:00:aa:bb:cc', uuid: 'x\nchain http://evil/', hostname: 'h\n#' }).split('\n');
    expect(lines).toEqual([
      '#!ipxe',
      '# hvpxe: no group in profiles.yaml matches this machine',
      'echo hvpxe: no profile matches this machine (MAC 52:54:00:aa:bb:cc, UUID unknown, DHCP hostname none).',
      'echo hvpxe: add it to a group in profiles.yaml (mac: or uuid:), or add a default group, then reload hvpxe (SIGHUP).',
      'echo hvpxe: trying the next boot device in 30 s',
      'sleep 30',
      'exit 1',
      '',
    ]);
  });
});
