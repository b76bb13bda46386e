/**
 * What the operator answered on the console's pages, and the config those answers make. The config
 * starts from what the kernel command line already says (`harvester.*` parameters, as Harvester's
 * console does) and each answer sets its key over it, so an answer always wins and nothing is said
 * twice. Canonical key spellings (Harvester's json tags) throughout. Pure.
 */
import type { HarvesterConfig } from '../../config/types.js';

export type Mode = 'create' | 'join' | 'install';
export type Method = 'dhcp' | 'static';

export interface Answers {
  mode?: Mode;
  role: string;
  password: string;
  passwordConfirm: string;
  device?: string;
  dataDisk?: string;
  persistentSize: string;
  wipeDisks: string[];
  forceMbr: boolean;
  nics: string[];
  vlan: string;
  bondMode: string;
  method: Method;
  address: string;
  mask: string;
  gateway: string;
  mtu: string;
  podCidr: string;
  serviceCidr: string;
  clusterDns: string;
  hostname: string;
  dns: string;
  vipMode: 'dhcp' | 'static';
  vipHwAddr: string;
  vip: string;
  serverUrl: string;
  token: string;
  ntp: string;
  proxy: string;
  sshKeyUrl: string;
  /** The keys fetched from sshKeyUrl (set only when the fetch succeeded). */
  sshKeys: string[];
  passwordAuth: 'enabled' | 'disabled';
  configUrl: string;
}

/** Harvester's console default NTP server (harvester/harvester-installer pkg/console/install_panels.go). */
export const DEFAULT_NTP = '0.suse.pool.ntp.org';
export const DEFAULT_BOND_MODE = 'active-backup';

/** Answers pre-filled from a config (the kernel command line's harvester.* keys). */
export function answersFrom(base: HarvesterConfig): Answers {
  const install = base.install ?? {};
  const os = base.os ?? {};
  const mi = install.managementInterface ?? {};
  const mode = install.mode === 'create' || install.mode === 'join' || install.mode === 'install' ? install.mode : 'create';
  const maskBits = (m?: string): string => m ?? '';
  return {
    mode,
    role: install.role ?? 'default',
    password: os.password ?? '',
    passwordConfirm: os.password ?? '',
    device: install.device,
    dataDisk: install.dataDisk,
    persistentSize: install.persistentPartitionSize ?? '',
    wipeDisks: install.wipeDisksList ?? [],
    forceMbr: install.forceMbr === true,
    nics: (mi.interfaces ?? []).map((i) => i.name ?? i.hwAddr ?? '').filter(Boolean),
    vlan: mi.vlanId ? String(mi.vlanId) : '',
    bondMode: mi.bondOptions?.mode ?? DEFAULT_BOND_MODE,
    method: mi.method === 'static' ? 'static' : 'dhcp',
    address: mi.ip ?? '',
    mask: maskBits(mi.subnetMask),
    gateway: mi.gateway ?? '',
    mtu: mi.mtu ? String(mi.mtu) : '',
    podCidr: install.clusterPodCidr ?? '',
    serviceCidr: install.clusterServiceCidr ?? '',
    clusterDns: install.clusterDns ?? '',
    hostname: os.hostname ?? '',
    dns: (os.dnsNameservers ?? []).join(', '),
    vipMode: install.vipMode === 'static' ? 'static' : 'dhcp',
    vipHwAddr: install.vipHwAddr ?? '',
    vip: install.vip ?? '',
    serverUrl: base.serverUrl ?? '',
    token: base.token ?? '',
    ntp: os.ntpServers?.length ? os.ntpServers.join(', ') : DEFAULT_NTP,
    proxy: os.environment?.http_proxy ?? os.environment?.HTTP_PROXY ?? '',
    sshKeyUrl: '',
    sshKeys: [],
    passwordAuth: os.sshd?.disablePasswordAuth ? 'disabled' : 'enabled',
    configUrl: install.configUrl ?? '',
  };
}

/** A comma (or space) separated list as typed, without empty entries. */
export function listOf(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** "192.168.1.10/24" as Harvester's console accepts it: the address and its dotted mask. */
export function splitCidr(address: string): { ip: string; mask?: string } {
  const m = /^\s*([^/\s]+)\/(\d{1,2})\s*$/.exec(address);
  if (!m) return { ip: address.trim() };
  const bits = Number(m[2]);
  if (bits > 32) return { ip: address.trim() };
  const n = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { ip: m[1]!, mask: [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.') };
}

function setOrDelete(o: Record<string, unknown>, key: string, v: unknown): void {
  if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0)) delete o[key];
  else o[key] = v;
}

export interface ApplyOptions {
  /** The hardware address of each NIC name (the config records both, as Harvester's console does). */
  macOf?: (nic: string) => string | undefined;
  /** os.password as it is written: a crypt hash of the typed password (Harvester's console stores one). */
  passwordAs?: (clear: string) => string;
}

/**
 * The config the answers make: `base` (the command line's keys) with every answered key set over
 * it. Keys a page does not ask in the chosen mode are left out (a join node has no VIP).
 */
export function applyAnswers(base: HarvesterConfig, a: Answers, opts: ApplyOptions = {}): Record<string, unknown> {
  const cfg = structuredClone(base) as Record<string, unknown> & HarvesterConfig;
  const install = (cfg.install ??= {}) as Record<string, unknown>;
  const os = (cfg.os ??= {}) as Record<string, unknown>;
  cfg.schemeVersion = 1;
  setOrDelete(install, 'mode', a.mode);
  const clusterMode = a.mode === 'create' || a.mode === 'join';
  setOrDelete(install, 'role', a.mode === 'join' ? a.role : a.mode === 'create' ? 'default' : undefined);
  setOrDelete(os, 'password', a.password ? (opts.passwordAs ? opts.passwordAs(a.password) : a.password) : undefined);
  // The disks are answered by path: a command-line rule that pre-selected them has done its work.
  delete install.deviceSelector;
  delete install.dataDiskSelector;
  setOrDelete(install, 'device', a.device);
  setOrDelete(install, 'dataDisk', a.dataDisk && a.dataDisk !== a.device ? a.dataDisk : undefined);
  setOrDelete(install, 'persistentPartitionSize', !a.dataDisk || a.dataDisk === a.device ? a.persistentSize.trim() : undefined);
  setOrDelete(install, 'wipeDisksList', a.wipeDisks.filter((d) => d !== a.device && d !== a.dataDisk));
  setOrDelete(install, 'forceMbr', a.forceMbr || undefined);

  if (a.mode !== 'install') {
    const mi: Record<string, unknown> = { ...((install.managementInterface as Record<string, unknown>) ?? {}) };
    mi.interfaces = a.nics.map((name) => {
      const mac = opts.macOf?.(name);
      return mac ? { name, hwAddr: mac } : { name };
    });
    mi.method = a.method;
    mi.bondOptions = { ...((mi.bondOptions as Record<string, string>) ?? {}), mode: a.bondMode, miimon: (mi.bondOptions as Record<string, string> | undefined)?.miimon ?? '100' };
    setOrDelete(mi, 'vlanId', /^\d+$/.test(a.vlan.trim()) ? Number(a.vlan.trim()) : a.vlan.trim() || undefined);
    if (a.method === 'static') {
      const { ip, mask } = splitCidr(a.address);
      setOrDelete(mi, 'ip', ip);
      setOrDelete(mi, 'subnetMask', a.mask.trim() || mask);
      setOrDelete(mi, 'gateway', a.gateway.trim());
      setOrDelete(mi, 'mtu', /^\d+$/.test(a.mtu.trim()) ? Number(a.mtu.trim()) : undefined);
    } else {
      // The page asks the MTU with the static fields only: with DHCP a config's own MTU stays.
      for (const k of ['ip', 'subnetMask', 'gateway']) delete mi[k];
    }
    install.managementInterface = mi;
    setOrDelete(os, 'hostname', a.hostname.trim());
    setOrDelete(os, 'dnsNameservers', listOf(a.dns));
    setOrDelete(os, 'ntpServers', listOf(a.ntp));
    const env = { ...((os.environment as Record<string, string>) ?? {}) };
    for (const k of ['http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY']) delete env[k];
    if (a.proxy.trim()) Object.assign(env, { http_proxy: a.proxy.trim(), https_proxy: a.proxy.trim() });
    setOrDelete(os, 'environment', Object.keys(env).length ? env : undefined);
  } else {
    delete install.managementInterface;
  }
  if (a.mode === 'create') {
    setOrDelete(install, 'clusterPodCidr', a.podCidr.trim());
    setOrDelete(install, 'clusterServiceCidr', a.serviceCidr.trim());
    setOrDelete(install, 'clusterDns', a.clusterDns.trim());
    install.vipMode = a.vipMode;
    setOrDelete(install, 'vip', a.vip.trim());
    setOrDelete(install, 'vipHwAddr', a.vipHwAddr.trim());
    delete cfg.serverUrl;
  } else {
    for (const k of ['clusterPodCidr', 'clusterServiceCidr', 'clusterDns', 'vip', 'vipMode', 'vipHwAddr']) delete install[k];
  }
  if (a.mode === 'join') setOrDelete(cfg, 'serverUrl', a.serverUrl.trim());
  if (clusterMode) setOrDelete(cfg, 'token', a.token);
  else delete cfg.token;
  if (a.sshKeys.length) os.sshAuthorizedKeys = [...a.sshKeys];
  if (a.sshKeys.length) os.sshd = { ...((os.sshd as Record<string, unknown>) ?? {}), disablePasswordAuth: a.passwordAuth === 'disabled' };
  setOrDelete(install, 'configUrl', a.configUrl.trim());
  return cfg;
}
