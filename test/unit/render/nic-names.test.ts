// NIC names pinned at install (installer/render/nic-names.ts): the rendered /oem/grubenv carries
// ifname=<name>:<permanent MAC> for every management interface, a bond member by its own address
// (bonding_slave/perm_hwaddr), never the bond's shared one; the facts read that address from sysfs.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderNode } from '../../../installer/render/index.js';
import type { RenderFacts, RenderNic } from '../../../installer/render/types.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { gatherNics } from '../../../installer/preflight/machine.js';
import { Host } from '../../../lib/host.js';
import { HvError } from '../../../lib/errors.js';
import { main } from '../../../installer/cli.js';
import { CREATE } from '../config/helpers.js';
import { fixtureFacts } from '../preflight/helpers.js';

const BOND_MAC = '0c:42:a1:00:00:01';
const OWN_A = '0c:42:a1:00:00:01';
const OWN_B = '0c:42:a1:00:00:02';

function config(interfaces: Array<{ name?: string; hwAddr?: string }>, extra: Partial<HarvesterConfig['os']> = {}, mode = 'create'): HarvesterConfig {
  return {
    schemeVersion: 1,
    token: 'pin-test-token',
    os: { hostname: 'node-1', password: 'pin-test-pw', ...extra },
    install: { mode, device: '/dev/sda', vip: '10.0.0.100', vipMode: 'static', managementInterface: { interfaces, method: 'dhcp' } },
  } as HarvesterConfig;
}

const facts = (nics: RenderNic[]): RenderFacts => ({ cpuCount: 8, nics });

/** The grubenv's variables, as grub reads them (header and padding dropped). */
function grubenv(cfg: HarvesterConfig, f: RenderFacts): Record<string, string> {
  const file = renderNode(cfg, f, { seed: 'pin' }).files.find((x) => x.path === '/oem/grubenv')!;
  const text = Buffer.from(file.content).toString('utf8');
  expect(text.length).toBe(1024);
  return Object.fromEntries(
    text
      .split('\n')
      .filter((l) => /^[a-z_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

function renderError(cfg: HarvesterConfig, f: RenderFacts): HvError {
  try {
    renderNode(cfg, f, { seed: 'pin' });
  } catch (e) {
    if (e instanceof HvError) return e;
    throw e;
  }
  throw new Error('rendered without an error');
}

describe('the grubenv pins the management interfaces by permanent MAC', () => {
  it('a plain NIC: ifname=<name>:<MAC> after the arguments that were there', () => {
    const env = grubenv(config([{ name: 'enp6s0f0' }], { additionalKernelArguments: 'console=ttyS0' }), facts([{ name: 'enp6s0f0', mac: 'b8:ce:f6:10:00:01' }, { name: 'enp6s0f1', mac: 'b8:ce:f6:10:00:02' }]));
    expect(env.third_party_kernel_args).toBe('multipath=off console=ttyS0 ifname=enp6s0f0:b8:ce:f6:10:00:01');
  });

  it('bond members: each by its own permanent address, not the bond address they all report', () => {
    const nics = [
      { name: 'eno1', mac: BOND_MAC, permMac: OWN_A },
      { name: 'eno2', mac: BOND_MAC, permMac: OWN_B },
    ];
    const cfg = config([{ name: 'eno1' }, { name: 'eno2' }]);
    expect(grubenv(cfg, facts(nics)).third_party_kernel_args).toBe(`multipath=off ifname=eno1:${OWN_A} ifname=eno2:${OWN_B}`);
    // NetworkManager matches mac-address against the permanent address too: one per member.
    const nm = renderNode(cfg, facts(nics), { seed: 'pin' }).files.filter((f) => f.path.includes('bond-slave-'));
    expect(nm.map((f) => /mac-address=(.*)/.exec(String(f.content))?.[1])).toEqual([OWN_A.toUpperCase(), OWN_B.toUpperCase()]);
  });

  it('an interface given by hwAddr resolves to the name it has, and that name is pinned', () => {
    const nics = [
      { name: 'eno1', mac: BOND_MAC, permMac: OWN_A },
      { name: 'eno2', mac: BOND_MAC, permMac: OWN_B },
    ];
    expect(grubenv(config([{ hwAddr: OWN_B.toUpperCase() }]), facts(nics)).third_party_kernel_args).toBe(`multipath=off ifname=eno2:${OWN_B}`);
  });

  it('an ifname= the operator already gave for the same NIC stays once; others are kept', () => {
    const cfg = config([{ name: 'eno1' }], { additionalKernelArguments: `ifname=eno1:${OWN_A.toUpperCase()} ifname=bmc0:aa:bb:cc:dd:ee:ff` });
    expect(grubenv(cfg, facts([{ name: 'eno1', mac: OWN_A }])).third_party_kernel_args).toBe(`multipath=off ifname=eno1:${OWN_A.toUpperCase()} ifname=bmc0:aa:bb:cc:dd:ee:ff`);
  });

  it('refuses an ifname= that gives the management NIC another name, or its name to another NIC', () => {
    const other = renderError(config([{ name: 'eno1' }], { additionalKernelArguments: 'ifname=eno1:aa:bb:cc:dd:ee:ff' }), facts([{ name: 'eno1', mac: OWN_A }]));
    expect(other.message).toBe(`os.additional_kernel_arguments has ifname=eno1:aa:bb:cc:dd:ee:ff, but management interface eno1 has the permanent MAC ${OWN_A}`);
    expect(other.where).toBe('os.additional_kernel_arguments');
    const renamed = renderError(config([{ name: 'eno1' }], { additionalKernelArguments: `ifname=mgmt0:${OWN_A}` }), facts([{ name: 'eno1', mac: OWN_A }]));
    expect(renamed.message).toContain(`has ifname=mgmt0:${OWN_A}, but management interface eno1`);
  });

  it('refuses two management interfaces with one permanent MAC (bond members whose own address is unreadable)', () => {
    const e = renderError(config([{ name: 'eno1' }, { name: 'eno2' }]), facts([{ name: 'eno1', mac: BOND_MAC }, { name: 'eno2', mac: BOND_MAC }]));
    expect(e.message).toBe(`management interfaces eno1 and eno2 report the same permanent MAC ${BOND_MAC}: pinning either name by it would name the other too`);
  });

  it('a NIC whose permanent address is not known is not pinned, and the report says so', () => {
    const report = renderNode(config([{ name: 'eno1' }]), facts([{ name: 'eno1', mac: '5a:00:00:00:00:01', permMac: '' }]), { seed: 'pin' });
    const env = Buffer.from(report.files.find((f) => f.path === '/oem/grubenv')!.content).toString();
    expect(env).toContain('third_party_kernel_args=multipath=off\n');
    expect(report.warnings).toContain('the name of management interface eno1 is not pinned: its permanent MAC is not known (a random or assigned address), so a kernel that renames it takes the management network away');
  });

  it('warns when a kernel name (eth0) is pinned on a machine with several NICs, not with one', () => {
    const warnsOf = (nics: RenderNic[]) => renderNode(config([{ name: 'eth0' }]), facts(nics), { seed: 'pin' }).warnings.filter((w) => w.includes('a name the kernel itself gives'));
    expect(warnsOf([{ name: 'eth0', mac: OWN_A }])).toEqual([]);
    expect(warnsOf([{ name: 'eth0', mac: OWN_A }, { name: 'eth1', mac: OWN_B }])).toHaveLength(1);
  });

  it('pins nothing for binaries-only installs (no management network) or when the machine is not known', () => {
    const install = config([{ name: 'eno1' }], {}, 'install');
    expect(grubenv(install, facts([{ name: 'eno1', mac: OWN_A }])).third_party_kernel_args).toBe('multipath=off');
    expect(grubenv(config([{ name: 'eno1' }]), facts([])).third_party_kernel_args).toBe('multipath=off');
  });
});

describe('the permanent MAC in the machine facts', () => {
  let root: string | undefined;
  afterEach(async () => {
    if (root) await rm(root, { recursive: true, force: true });
    root = undefined;
  });

  async function nic(name: string, attrs: Record<string, string>): Promise<void> {
    const dir = path.join(root!, 'sys/class/net', name);
    await mkdir(dir, { recursive: true });
    for (const [k, v] of Object.entries(attrs)) {
      await mkdir(path.dirname(path.join(dir, k)), { recursive: true });
      await writeFile(path.join(dir, k), `${v}\n`);
    }
  }

  it('a bond member: perm_hwaddr; a permanent address: address; a random or assigned one: none', async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'hv-nic-facts-'));
    await nic('eno1', { address: BOND_MAC, addr_assign_type: '3', 'bonding_slave/perm_hwaddr': OWN_A.toUpperCase(), type: '1' });
    await nic('eno2', { address: BOND_MAC, addr_assign_type: '3', 'bonding_slave/perm_hwaddr': OWN_B, type: '1' });
    await nic('enp1s0', { address: 'b8:ce:f6:10:00:01', addr_assign_type: '0', type: '1' });
    await nic('usb0', { address: '5a:11:22:33:44:55', addr_assign_type: '1', type: '1' });
    await nic('lo', { address: '00:00:00:00:00:00', type: '772' });
    const got = Object.fromEntries((await gatherNics(new Host(root))).map((n) => [n.name, n.permMac]));
    expect(got).toEqual({ eno1: OWN_A, eno2: OWN_B, enp1s0: 'b8:ce:f6:10:00:01', usb0: undefined, lo: undefined });
  });
});

describe('hvinstall plan says which names it pins', () => {
  let dir = '';
  afterEach(async () => {
    vi.restoreAllMocks();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the management NIC of the raid-rack machine, by its MAC', async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'hv-plan-pin-'));
    await writeFile(path.join(dir, 'facts.json'), JSON.stringify(await fixtureFacts('raid-rack')));
    await writeFile(path.join(dir, 'config.yaml'), CREATE.replace('name: ens5', 'name: eno12409np1'));
    let out = '';
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    const code = await main(['plan', '--config', path.join(dir, 'config.yaml'), '--facts', path.join(dir, 'facts.json'), '--agent', 'none']);
    expect(code).toBe(0);
    expect(out).toContain('  - NIC names pinned at boot by permanent MAC (ifname= in /oem/grubenv): eno12409np1 b4:96:91:00:00:02\n');
  });
});
