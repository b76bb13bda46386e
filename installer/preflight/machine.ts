/** CPU, memory, firmware, hypervisor and NIC facts from /proc, /sys and /dev under a sysroot. */
import path from 'node:path';
import type { Host } from '../../lib/host.js';
import { run } from '../../lib/exec.js';
import type { CpuFacts, MachineFacts, NicFacts } from './types.js';

/** Parses /proc/cpuinfo: logical CPUs, physical cores, model and the virtualisation flags. */
export function parseCpuinfo(text: string): Omit<CpuFacts, 'devKvm'> & { hypervisorFlag: boolean } {
  let threads = 0;
  const cores = new Set<string>();
  let model: string | undefined;
  let flags = new Set<string>();
  let physId = '0';
  for (const block of text.split(/\n\s*\n/)) {
    const kv = new Map<string, string>();
    for (const line of block.split('\n')) {
      const i = line.indexOf(':');
      if (i > 0) kv.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
    }
    if (!kv.has('processor')) continue;
    threads++;
    model ??= kv.get('model name');
    physId = kv.get('physical id') ?? physId;
    const coreId = kv.get('core id');
    cores.add(coreId === undefined ? `t${threads}` : `${physId}:${coreId}`);
    if (flags.size === 0 && kv.get('flags')) flags = new Set(kv.get('flags')!.split(/\s+/));
  }
  return {
    model,
    threads,
    cores: cores.size || threads,
    vmx: flags.has('vmx'),
    svm: flags.has('svm'),
    hypervisorFlag: flags.has('hypervisor'),
  };
}

/** MemTotal from /proc/meminfo in bytes. */
export function parseMemTotal(text: string): number {
  const m = /^MemTotal:\s+(\d+)\s*kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/**
 * Size in bytes of one SMBIOS type-19 (Memory Array Mapped Address) structure, as read from
 * /sys/firmware/dmi/entries/19-N/raw: start/end in KiB at offsets 4 and 8, or, when start is
 * 0xFFFFFFFF (SMBIOS 2.7+, ranges >= 4 TiB), 64-bit byte addresses at offsets 15 and 23.
 */
export function parseDmiMappedRange(raw: Uint8Array): number {
  if (raw.length < 15 || raw[0] !== 19) return 0;
  const b = Buffer.from(raw);
  const start = b.readUInt32LE(4);
  const end = b.readUInt32LE(8);
  if (start === 0xffffffff) {
    if (raw.length < 31) return 0;
    const xs = b.readBigUInt64LE(15);
    const xe = b.readBigUInt64LE(23);
    return xe >= xs ? Number(xe - xs + 1n) : 0;
  }
  return end >= start ? (end - start + 1) * 1024 : 0;
}

/** Installed RAM as the sum of the type-19 ranges (Harvester's dmidecode source), or undefined. */
export async function readDmiMemory(host: Host): Promise<number | undefined> {
  const { readFile } = await import('node:fs/promises');
  let total = 0;
  for (const entry of await host.list('/sys/firmware/dmi/entries')) {
    if (!entry.startsWith('19-')) continue;
    const raw = await readFile(host.path(`/sys/firmware/dmi/entries/${entry}/raw`)).catch(() => undefined);
    if (raw) total += parseDmiMappedRange(raw);
  }
  return total > 0 ? total : undefined;
}

// DMI vendor/product strings of common hypervisors, named as systemd-detect-virt names them.
const DMI_HYPERVISORS: Array<[RegExp, string]> = [
  [/QEMU|Standard PC \(|KVM/i, 'kvm'],
  [/VMware/i, 'vmware'],
  [/innotek|VirtualBox/i, 'oracle'],
  [/Microsoft Corporation.*Virtual Machine|Virtual Machine.*Microsoft/i, 'microsoft'],
  [/Xen/i, 'xen'],
  [/Amazon EC2/i, 'amazon'],
  [/Google Compute Engine/i, 'google'],
  [/Parallels/i, 'parallels'],
  [/BHYVE/i, 'bhyve'],
];

export function hypervisorFromDmi(vendor?: string, product?: string): string | undefined {
  const s = `${vendor ?? ''} ${product ?? ''}`;
  return DMI_HYPERVISORS.find(([re]) => re.test(s))?.[1];
}

export async function gatherCpu(host: Host): Promise<{ cpu: CpuFacts; hypervisorFlag: boolean }> {
  const { hypervisorFlag, ...cpu } = parseCpuinfo((await host.readText('/proc/cpuinfo')) ?? '');
  return { cpu: { ...cpu, devKvm: await host.exists('/dev/kvm') }, hypervisorFlag };
}

export async function gatherVirtualization(host: Host, hypervisorFlag: boolean): Promise<MachineFacts['virtualization']> {
  const vendor = await host.readAttr('/sys/class/dmi/id/sys_vendor');
  const product = await host.readAttr('/sys/class/dmi/id/product_name');
  const xen = await host.readAttr('/sys/hypervisor/type');
  const byDmi = hypervisorFromDmi(vendor, product) ?? (xen ? xen : undefined);
  // The cpuinfo `hypervisor` flag is the CPU saying it runs under a hypervisor; DMI names which one.
  const isVm = hypervisorFlag || byDmi !== undefined;
  return { isVm, hypervisor: isVm ? byDmi : undefined };
}

const EFI_GLOBAL = '8be4df61-93ca-11d2-aa0d-00e098032b8c';

export async function gatherFirmware(host: Host): Promise<MachineFacts['firmware']> {
  const uefi = await host.isDir('/sys/firmware/efi');
  if (!uefi) return { uefi };
  // efivarfs: 4 bytes of attributes, then the value (1 byte: 1 = Secure Boot on).
  const { readFile } = await import('node:fs/promises');
  const raw = await readFile(host.path(`/sys/firmware/efi/efivars/SecureBoot-${EFI_GLOBAL}`)).catch(() => undefined);
  if (raw && raw.length >= 5) return { uefi, secureBoot: raw[4] === 1 };
  // No SecureBoot variable among readable ones: firmware without Secure Boot (it is off).
  // Nothing readable at all (efivarfs not mounted): unknown.
  const vars = await host.list('/sys/firmware/efi/efivars');
  return { uefi, secureBoot: vars.length > 0 ? false : undefined };
}

/** Global IPv4 addresses per interface (`ip -j -4 addr`): a sysroot has no live addresses, so only for `/`. */
async function gatherIpv4(host: Host): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (host.sysroot !== '/') return out;
  const r = await run('ip', ['-j', '-4', 'addr', 'show'], { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) return out;
  try {
    for (const e of JSON.parse(r.stdout) as Array<{ ifname?: string; addr_info?: Array<{ local?: string; prefixlen?: number; scope?: string }> }>) {
      const addrs = (e.addr_info ?? []).filter((a) => a.local && a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`);
      if (e.ifname && addrs.length) out.set(e.ifname, addrs);
    }
  } catch {
    // unreadable output: no addresses known
  }
  return out;
}

/** `ip -j link`'s permaddr per interface (the driver's permanent address, printed where it differs): live only. */
async function gatherPermaddr(host: Host): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (host.sysroot !== '/') return out;
  const r = await run('ip', ['-j', 'link', 'show'], { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) return out;
  try {
    for (const e of JSON.parse(r.stdout) as Array<{ ifname?: string; permaddr?: string }>) if (e.ifname && e.permaddr) out.set(e.ifname, e.permaddr.toLowerCase());
  } catch {
    // unreadable output: the sysfs sources still apply
  }
  return out;
}

// addr_assign_type (include/uapi/linux/netdevice.h): 0 NET_ADDR_PERM; 1 random, 2 stolen, 3 set.
const NET_ADDR_PERM = 0;

/** The permanent address of a NIC (NicFacts.permMac says which source wins and why). */
export async function permanentMac(host: Host, name: string, address: string | undefined, permaddr: Map<string, string>): Promise<string | undefined> {
  const base = `/sys/class/net/${name}`;
  const bondMember = (await host.readAttr(`${base}/bonding_slave/perm_hwaddr`))?.toLowerCase();
  if (bondMember) return bondMember;
  const fromDriver = permaddr.get(name);
  if (fromDriver) return fromDriver;
  const assigned = await host.readInt(`${base}/addr_assign_type`);
  return address && (assigned === undefined || assigned === NET_ADDR_PERM) ? address.toLowerCase() : undefined;
}

export async function gatherNics(host: Host): Promise<NicFacts[]> {
  const nics: NicFacts[] = [];
  const ipv4 = await gatherIpv4(host);
  const permaddr = await gatherPermaddr(host);
  for (const name of await host.list('/sys/class/net')) {
    const base = `/sys/class/net/${name}`;
    // bonding_masters is a file in /sys/class/net, not an interface.
    if (!(await host.isDir(base))) continue;
    const link = (await host.readLink(base)) ?? '';
    const driverLink = await host.readLink(`${base}/device/driver`);
    const type = await host.readInt(`${base}/type`);
    const speed = await host.readInt(`${base}/speed`);
    const carrier = await host.readAttr(`${base}/carrier`);
    const mac = (await host.readAttr(`${base}/address`)) || undefined;
    const loopback = name === 'lo' || type === 772;
    const permMac = loopback ? undefined : await permanentMac(host, name, mac, permaddr);
    nics.push({
      name,
      mac,
      ...(permMac ? { permMac } : {}),
      driver: driverLink ? path.posix.basename(driverLink) : undefined,
      operState: await host.readAttr(`${base}/operstate`),
      // Reading carrier or speed of a down interface fails (EINVAL): unknown, not false.
      carrier: carrier === undefined || carrier === '' ? undefined : carrier === '1',
      speedMbps: speed !== undefined && speed > 0 ? speed : undefined,
      mtu: await host.readInt(`${base}/mtu`),
      virtual: link.includes('/devices/virtual/'),
      loopback,
      ...(ipv4.has(name) ? { ipv4: ipv4.get(name) } : {}),
    });
  }
  return nics;
}
