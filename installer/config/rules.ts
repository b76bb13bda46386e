/**
 * Harvester's validation rules that need no hardware (harvester/harvester-installer pkg/console/validator.go commonCheck and Validate,
 * pkg/config GetSystemSettingsAllowList, pkg/console/util.go getFormattedServerURL), with Harvester's messages, plus our own checks where
 * Harvester silently does something surprising. Per-field shape (types, enums, patterns, formats)
 * is the schema's job (schema-findings.ts); these are the cross-field and mode-dependent rules.
 * Checks that need the machine (device exists, disk sizes, NICs) belong to preflight.
 */
import path from 'node:path';
import type { FindingList } from './findings.js';
import type { HarvesterConfig, ManagementInterface, Webhook } from './types.js';
import { cidrContains, isDns1123Subdomain, isIPv4, parseCidr, subnetMaskError } from './net.js';
import { labelValueErrors, qualifiedNameErrors } from './k8s-names.js';
import { closest } from './spellings.js';
import { adminPasswordProblem } from './admin-password.js';
import { containerdRegistryProblem } from './containerd-registry.js';

export interface RuleContext {
  /** The already-installed path (install mode on an installed system): no iso_url, no device needed. */
  alreadyInstalled?: boolean;
}

export const SCHEME_MESSAGE = (v: number) =>
  `Unsupported Harvester Scheme Version ${v}, please use new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/`;
export const NETWORKS_DEPRECATED =
  'networks is deprecated, please use management_interface for new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface';
export const BOND_MODES = ['balance-rr', 'active-backup', 'balance-xor', 'broadcast', '802.3ad', 'balance-tlb', 'balance-alb'];
const PLACEHOLDER = /^<[^<>]+>$|<\s*YOUR[_ -][^<>]*>|\bREPLACE[_-]?ME\b|\bCHANGE[_-]?ME\b/i;
const SSH_KEY = /(^|\s)(ssh-(rsa|dss|ed25519)|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+[A-Za-z0-9+/]{16,}={0,3}(\s|$)/;
const TEMPLATE_FIELDS = new Set(['Hostname', 'MACAddr', 'IPAddrV4', 'IPAddrV6']);

type Ptr = string;

export function checkRules(cfg: HarvesterConfig, out: FindingList, ctx: RuleContext = {}): void {
  const install = cfg.install ?? {};
  const os = cfg.os ?? {};
  const mode = install.mode ?? '';

  // scheme_version (Validate): automatic/PXE installs do not fill it in.
  if (cfg.schemeVersion === undefined) {
    out.error('/schemeVersion', SCHEME_MESSAGE(0), 'add scheme_version: 1 at the top of the file (automatic and PXE installs do not set it for you)');
  }

  // commonCheck, in Harvester's order.
  if (!install.mode) {
    out.error('/install/mode', 'unknown mode: ', 'set install.mode to create, join or install');
  } else if (mode === 'upgrade') {
    out.warn('/install/mode', 'mode upgrade is a legacy mode: Harvester skips its checks for it', 'use create, join or install');
  }
  const clusterMode = mode === 'create' || mode === 'join';
  if (clusterMode) {
    if (mode === 'create' && cfg.serverUrl) {
      out.error('/serverUrl', 'ServerURL need to be empty in create mode', 'remove server_url, or set install.mode: join to join that cluster');
    }
    if (mode === 'join' && !cfg.serverUrl) {
      out.error('/serverUrl', "ServerURL can't empty in join mode", 'set server_url to the cluster VIP, e.g. https://192.168.1.10:443');
    }
    if (install.automatic && !ctx.alreadyInstalled && !install.isoUrl) {
      out.error('/install/isoUrl', 'iso_url is required in automatic installation', "set install.iso_url to the ISO's http(s) URL, or to 'local' to use the boot medium");
    }
    if (!cfg.token) out.error('/token', 'token not specified', 'set token: the cluster secret shared by every node (or a K10... node token to join)');
    if (!os.sshAuthorizedKeys?.length && !os.password) {
      out.error('/os/password', 'no SSH authorized keys or passwords are set', 'set os.password or os.ssh_authorized_keys so you can log in as rancher');
    }
  }
  checkPersistentStatePaths(os.persistentStatePaths, out);
  if (install.automatic && !ctx.alreadyInstalled && out.originOf('/install/automatic')?.cmdline !== true) {
    out.warn(
      '/install/automatic',
      'install.automatic in a config file does not start an automatic install: Harvester reads it only from the kernel command line',
      'boot with harvester.install.automatic=true (the PXE/iPXE kernel line); keep this key or remove it',
    );
  }

  // Validate
  if (!install.device && !ctx.alreadyInstalled && mode !== 'upgrade') {
    out.error('/install/device', 'no device specified', 'set install.device, e.g. /dev/sda or /dev/disk/by-id/... (stable across reboots)');
  }
  for (const [key, ptr] of [
    [install.device, '/install/device'],
    [install.dataDisk, '/install/dataDisk'],
  ] as const) {
    if (key && !key.startsWith('/dev/')) out.error(ptr, `device not found: ${key}`, `use a full device path, e.g. /dev/${key.replace(/^\/+/, '')} or /dev/disk/by-id/...`);
  }
  if (install.dataDisk && install.dataDisk === install.device) {
    out.warn('/install/dataDisk', 'data_disk is the same disk as device and is ignored', 'remove data_disk, or name a second disk for Longhorn');
  }
  if (mode !== 'install') {
    const mi = install.managementInterface;
    if (!mi?.interfaces?.length) {
      out.error('/install/managementInterface/interfaces', NETWORKS_DEPRECATED, 'add install.management_interface: {interfaces: [{name: ens3}], method: dhcp}');
    }
  }
  if (install.managementInterface) checkNetworks(install.managementInterface, cfg, out);

  if (mode === 'create') checkVip(cfg, out);
  else if (install.vipMode && mode === 'join') out.warn('/install/vipMode', 'vip_mode is used only in create mode');

  checkServerUrl(cfg, out);
  checkSystemSettings(cfg, mode, out);
  checkLabels(os.labels, out);

  // cordoned (harvester/harvester HEAD)
  if (install.cordoned && mode === 'create') out.error('/install/cordoned', "install.cordoned can't be set in create mode");
  if (install.cordoned && install.role === 'witness') out.error('/install/cordoned', "install.cordoned can't be set for nodes with the witness role");

  // admin_password (hvinstall, beyond Harvester): the create node bootstraps the cluster's admin.
  if (install.adminPassword !== undefined) {
    const problem = adminPasswordProblem(install.adminPassword);
    if (problem) out.error('/install/adminPassword', problem, 'give at least 12 characters, or a $pbkdf2-sha3-512$ hash (docs/config.md)');
    else if (mode !== 'create') out.warn('/install/adminPassword', `admin_password is used only in create mode (the cluster's admin is set once, by the node that creates it); ignored in ${mode || 'this'} mode`);
  }

  checkPartitionSize(cfg, out);
  checkForceGpt(cfg, out);
  checkUrls(cfg, out);
  checkClusterNetworks(cfg, out);
  install.webhooks?.forEach((w, i) => checkWebhook(w, `/install/webhooks/${i}`, out));
  for (const [name, addon] of Object.entries(install.addons ?? {})) {
    if (addon.valuesContent !== undefined) {
      out.warn(`/install/addons/${name}/valuesContent`, 'values_content is ignored by Harvester: only enabled is used', 'configure the addon after install');
    }
  }
  os.writeFiles?.forEach((f, i) => checkWriteFile(f, `/os/writeFiles/${i}`, out));
  checkSshKeys(cfg, out);
  checkPlaceholders(cfg, '', out);
  checkChartValues(cfg, out);
  if (os.externalStorageConfig?.multiPathConfig && !os.externalStorageConfig.enabled) {
    out.warn('/os/externalStorageConfig/multiPathConfig', 'multi_path_config is ignored unless external_storage_config.enabled is true');
  }
  if (os.password?.startsWith('$') && !/^\$(1|5|6|apr1|y|2[aby]?)\$/.test(os.password)) {
    out.warn('/os/password', 'password starts with $ but is not a known crypt hash ($6$, $5$, $1$, $apr1$); it is used as clear text');
  }
  (install.wipeDisksList ?? []).forEach((d, i) => {
    if (d === install.device) out.error(`/install/wipeDisksList/${i}`, 'wipe_disks_list names the installation device', 'remove it: the installation device is partitioned anyway');
  });
  (cfg.sans ?? []).forEach((s, i) => {
    if (!isIPv4(s) && !isDns1123Subdomain(s.replace(/^\*\./, 'wildcard.'))) out.warn(`/sans/${i}`, `${s} is not an IPv4 address or DNS name`, 'the RKE2 server certificate would not be valid for it');
  });
}

function checkPersistentStatePaths(paths: string[] | undefined, out: FindingList): void {
  paths?.forEach((p, i) => {
    const ptr = `/os/persistentStatePaths/${i}`;
    if (!path.posix.isAbsolute(p)) out.error(ptr, 'Invalid path. PersistentStatePath must be an absolute path', `write it from the root, e.g. /${p}`);
    else {
      const clean = path.posix.normalize(p);
      if (clean === '/tmp' || clean.startsWith('/tmp/')) out.error(ptr, 'Invalid path. Parent dir of PersistentStatePath cannot be /tmp', '/tmp is cleared on boot; choose another directory');
    }
  });
}

function checkNetworks(mi: ManagementInterface, cfg: HarvesterConfig, out: FindingList): void {
  const base: Ptr = '/install/managementInterface';
  if (!mi.interfaces?.length) return;
  if (!mi.method) out.error(`${base}/method`, 'management network must configure with either static or DHCP method', 'set method: dhcp or method: static');
  const seen = new Set<string>();
  mi.interfaces.forEach((nic, i) => {
    if (!nic.name && !nic.hwAddr) out.error(`${base}/interfaces/${i}`, 'no interface specified', 'give the NIC by name (name: ens3) or by MAC (hwAddr: 52:54:00:12:34:56)');
    if (nic.name === 'lo') out.error(`${base}/interfaces/${i}/name`, 'interface is a loopback interface: lo', 'name the physical NIC(s) of the management network');
    const id = (nic.hwAddr ?? nic.name ?? '').toLowerCase();
    if (id && seen.has(id)) out.warn(`${base}/interfaces/${i}`, `interface ${nic.hwAddr ?? nic.name} is listed twice`);
    seen.add(id);
  });
  if (mi.method === 'static') {
    if (!cfg.os?.dnsNameservers?.length) out.error('/os/dnsNameservers', 'DNS servers are required for static IP address', 'set os.dns_nameservers: [ ... ]');
    if (!mi.ip) out.error(`${base}/ip`, 'must specify ip in static method');
    if (!mi.subnetMask) out.error(`${base}/subnetMask`, 'must specify subnetMask in static method', 'e.g. subnet_mask: 255.255.255.0');
    if (!mi.gateway) out.error(`${base}/gateway`, 'must specify gateway in static method');
    if (mi.mtu && (mi.mtu < 576 || mi.mtu > 9000)) out.error(`${base}/mtu`, `${mi.mtu} is not a valid MTU value`, 'use 576 to 9000, or 0 for the default 1500');
  } else if (mi.mtu && (mi.mtu < 576 || mi.mtu > 9000)) {
    out.warn(`${base}/mtu`, `${mi.mtu} is not a valid MTU value`, 'Harvester checks it only with the static method, but the link would not come up with it');
  }
  if (mi.subnetMask) {
    const err = subnetMaskError(mi.subnetMask);
    if (err) out.error(`${base}/subnetMask`, err, 'write the mask in dotted form, e.g. 255.255.255.0 (not /24)');
  }
  if (mi.bondOptions?.mode !== undefined && !BOND_MODES.includes(mi.bondOptions.mode)) {
    const guess = closest(mi.bondOptions.mode, BOND_MODES);
    out.error(`${base}/bondOptions/mode`, `unknown bond mode ${JSON.stringify(mi.bondOptions.mode)}`, guess ? `did you mean "${guess}"?` : `use one of ${BOND_MODES.join(', ')}`);
  }
  if (mi.bondOptions?.miimon !== undefined && !/^\d+$/.test(mi.bondOptions.miimon)) {
    out.error(`${base}/bondOptions/miimon`, `miimon must be a number of milliseconds (got ${JSON.stringify(mi.bondOptions.miimon)})`);
  }
  if (mi.method === 'static' && mi.ip && mi.gateway && mi.subnetMask && isIPv4(mi.ip) && isIPv4(mi.gateway) && !subnetMaskError(mi.subnetMask)) {
    const prefix = mi.subnetMask.split('.').reduce((n, o) => n + Number(o).toString(2).replace(/0/g, '').length, 0);
    if (!cidrContains({ base: ipToNum(mi.ip), prefix }, mi.gateway)) {
      out.warn(`${base}/gateway`, `gateway ${mi.gateway} is outside ${mi.ip}/${prefix}`, 'check ip, subnet_mask and gateway');
    }
  }
}

function ipToNum(ip: string): number {
  return ip.split('.').reduce((a, o) => a * 256 + Number(o), 0);
}

function checkVip(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  const vipMode = install.vipMode ?? '';
  if (!vipMode) {
    out.error('/install/vipMode', 'unknown vip mode: ', 'set install.vip_mode to static, dhcp or none');
    return;
  }
  if (vipMode === 'static' && !install.vip) {
    out.error('/install/vip', 'vip is required in create mode with vip_mode static', 'set install.vip to a free IPv4 address in the management network (Harvester reports: " is not a valid IP address")');
  }
  if (vipMode === 'dhcp' && !install.vip && install.vipHwAddr) {
    out.warn('/install/vipHwAddr', 'vip_hw_addr is replaced when vip is empty: Harvester leases both by DHCP', 'set vip too, or remove vip_hw_addr');
  }
  const ip = install.managementInterface?.ip;
  if (install.vip && ip && install.vip === ip) out.error('/install/vip', "VIP must not be the same as management NIC's IP");
}

/** getFormattedServerURL (pkg/console/util.go): trims, adds https://, requires an IPv4 or DNS host, no path, port 443. */
export function formatServerUrl(raw: string): { url?: string; error?: string } {
  let s = raw.trim();
  // Harvester would prepend https:// and then trip over the path; say what is actually wrong.
  if (/^http:\/\//i.test(s)) return { error: 'server url invalid: http:// is not supported, the management address is https://<vip>:443' };
  if (!s.startsWith('https://')) s = 'https://' + s;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return { error: `server url invalid: ${raw.trim()} is not a valid ip/domain` };
  }
  const host = u.hostname;
  if (!isIPv4(host) && !isDns1123Subdomain(host)) return { error: `server url invalid: ${host || raw.trim()} is not a valid ip/domain` };
  if (u.pathname && u.pathname !== '/') return { error: `server url invalid: path is not allowed in management address: ${u.pathname}` };
  if (u.port && u.port !== '443') return { error: 'server url invalid: currently non-443 port are not allowed' };
  return { url: `https://${host}:443` };
}

function checkServerUrl(cfg: HarvesterConfig, out: FindingList): void {
  if (!cfg.serverUrl || cfg.install?.mode === 'create') return;
  const r = formatServerUrl(cfg.serverUrl);
  if (r.error) out.error('/serverUrl', r.error, 'write the cluster VIP as https://<vip>:443 (or just the VIP)');
  else cfg.serverUrl = r.url;
}

function checkSystemSettings(cfg: HarvesterConfig, mode: string, out: FindingList): void {
  const settings = cfg.systemSettings;
  if (!settings || Object.keys(settings).length === 0) return;
  if (mode !== 'create') out.warn('/systemSettings', 'system_settings are applied only in create mode and are ignored here');
  const registry = settings['containerd-registry'];
  if (registry !== undefined) {
    const problem = containerdRegistryProblem(registry);
    if (problem) out.error('/systemSettings/containerd-registry', problem.message, problem.hint);
  }
  if (settings['ntp-servers'] !== undefined && cfg.os?.ntpServers?.length) {
    out.warn('/systemSettings/ntp-servers', 'ntp-servers is replaced by the value built from os.ntp_servers', 'set the servers in one place only');
  }
}

function checkLabels(labels: Record<string, string> | undefined, out: FindingList): void {
  for (const [k, v] of Object.entries(labels ?? {})) {
    const ptr = `/os/labels/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    const kErrs = qualifiedNameErrors(k);
    if (kErrs.length) out.error(ptr, `invalid label name '${k}': ${kErrs.join('; ')}`);
    const vErrs = labelValueErrors(v);
    if (vErrs.length) out.error(ptr, `invalid label value '${v}': ${vErrs.join('; ')}`);
  }
}

/** `ParsePartitionSize`: the size in MiB, or undefined when the format is wrong (the schema reports it). */
export function parsePartitionSizeMiB(size: string): number | undefined {
  const m = /^(\d+)(Mi|Gi)$/.exec(size);
  if (!m) return undefined;
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

function checkPartitionSize(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  if (!install.persistentPartitionSize) return;
  const mib = parsePartitionSizeMiB(install.persistentPartitionSize);
  if (mib === undefined) return;
  if (mib < 150 * 1024) {
    if (install.skipchecks) out.warn('/install/persistentPartitionSize', 'partition size is too small. Minimum 150Gi is required', 'allowed because install.skipchecks is set');
    else out.error('/install/persistentPartitionSize', 'partition size is too small. Minimum 150Gi is required', 'use at least 150Gi');
  }
  if (install.dataDisk && install.dataDisk !== install.device) {
    out.warn('/install/persistentPartitionSize', 'persistent_partition_size is used only when the data partition shares the installation disk', 'with a separate data_disk the persistent partition takes the rest of the installation disk');
  }
}

function checkForceGpt(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  if (install.forceGpt === undefined) return;
  if (install.forceGpt === !install.forceMbr) return;
  out.warn('/install/forceGpt', `force_gpt: ${install.forceGpt} is overwritten: the partition table is ${install.forceMbr ? 'msdos (force_mbr)' : 'GPT'}`, 'remove force_gpt; set force_mbr: true for an msdos table');
}

function urlOk(s: string, schemes: string[]): boolean {
  try {
    const u = new URL(s);
    return schemes.includes(u.protocol.replace(/:$/, '')) && (u.protocol === 'file:' || u.hostname !== '');
  } catch {
    return false;
  }
}

function checkUrls(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  if (install.isoUrl && install.isoUrl !== 'local' && !urlOk(install.isoUrl, ['http', 'https', 'ftp', 'file'])) {
    out.error('/install/isoUrl', `iso_url must be an http(s), ftp or file URL, or 'local' (got ${JSON.stringify(install.isoUrl)})`);
  }
  if (install.configUrl && !urlOk(install.configUrl, ['http', 'https'])) {
    out.error('/install/configUrl', `config_url must be an http(s) URL (got ${JSON.stringify(install.configUrl)})`);
  }
  if (install.rawDiskImagePath) {
    if (!urlOk(install.rawDiskImagePath, ['http', 'https', 'ftp', 'file'])) {
      out.error('/install/rawDiskImagePath', `raw_disk_image_path must be a URL curl can fetch (got ${JSON.stringify(install.rawDiskImagePath)})`);
    }
    if (install.mode !== 'install' || !install.automatic) {
      out.warn('/install/rawDiskImagePath', 'raw_disk_image_path is used only with install.mode: install and install.automatic: true');
    }
  }
}

function checkClusterNetworks(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  if (install.clusterPodCidr && !parseCidr(install.clusterPodCidr)) out.error('/install/clusterPodCidr', `Invalid pod CIDR: ${install.clusterPodCidr}`, 'e.g. 10.52.0.0/16');
  const svc = install.clusterServiceCidr ? parseCidr(install.clusterServiceCidr) : parseCidr('10.53.0.0/16');
  if (install.clusterServiceCidr && !svc) out.error('/install/clusterServiceCidr', `Invalid service CIDR: ${install.clusterServiceCidr}`, 'e.g. 10.53.0.0/16');
  if (install.clusterDns && svc && isIPv4(install.clusterDns) && !cidrContains(svc, install.clusterDns)) {
    out.error('/install/clusterDns', `invalid cluster DNS IP: ${install.clusterDns} is not in the service CIDR ${install.clusterServiceCidr ?? '10.53.0.0/16'}`);
  }
}

/** Checks a Go template's {{ .Field }} references; returns the first problem. */
function templateError(text: string): string | undefined {
  const opens = (text.match(/\{\{/g) ?? []).length;
  const closes = (text.match(/\}\}/g) ?? []).length;
  if (opens !== closes) return 'unbalanced {{ }} in the template';
  for (const m of text.matchAll(/\{\{-?\s*([^}]*?)\s*-?\}\}/g)) {
    const expr = m[1];
    const field = /^\.(\w+)$/.exec(expr);
    if (field && !TEMPLATE_FIELDS.has(field[1])) return `unknown template field .${field[1]} (known: ${[...TEMPLATE_FIELDS].map((f) => '.' + f).join(', ')})`;
  }
  return undefined;
}

function checkWebhook(w: Webhook, ptr: string, out: FindingList): void {
  if (w.url) {
    const terr = templateError(w.url);
    if (terr) out.error(`${ptr}/url`, `webhook url: ${terr}`);
    else {
      const sample = w.url.replace(/\{\{[^}]*\}\}/g, 'x');
      if (!urlOk(sample, ['http', 'https'])) out.error(`${ptr}/url`, `webhook url must be an http(s) URL (got ${JSON.stringify(w.url)})`);
    }
  }
  if (w.payload) {
    const terr = templateError(w.payload);
    if (terr) out.error(`${ptr}/payload`, `webhook payload: ${terr}`);
  }
  if (w.basicAuth && (w.basicAuth.user || w.basicAuth.password) && !w.basicAuth.user) out.error(`${ptr}/basicAuth/user`, 'basic_auth needs a user');
  if (w.payload && (w.method === 'GET' || w.method === 'HEAD')) out.warn(`${ptr}/payload`, `a payload with method ${w.method} is usually dropped by servers`, 'use POST or PUT');
}

function checkWriteFile(f: { encoding?: string; content?: string; path: string; permissions?: string }, ptr: string, out: FindingList): void {
  if (f.permissions !== undefined && !/^0?[0-7]{3,4}$/.test(f.permissions)) {
    out.warn(`${ptr}/permissions`, `permissions ${JSON.stringify(f.permissions)} is not an octal mode; Harvester uses 0600`, 'write it quoted, e.g. "0644"');
  }
  const enc = f.encoding ?? '';
  const content = f.content ?? '';
  if (enc.includes('b64') || enc.includes('base64')) {
    const compact = content.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) {
      out.error(`${ptr}/content`, `content is not valid base64 (encoding ${enc})`);
      return;
    }
    if (enc.startsWith('gz')) {
      const bytes = Buffer.from(compact, 'base64');
      if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) out.error(`${ptr}/content`, `content is not gzip data (encoding ${enc})`);
    }
  } else if (enc.startsWith('gz')) {
    if (content.charCodeAt(0) !== 0x1f || content.charCodeAt(1) !== 0x8b) {
      out.error(`${ptr}/content`, `content is not gzip data (encoding ${enc})`, 'YAML cannot carry raw gzip bytes: use encoding gz+b64 with base64 content');
    }
  }
}

function checkSshKeys(cfg: HarvesterConfig, out: FindingList): void {
  const keys = cfg.os?.sshAuthorizedKeys ?? [];
  keys.forEach((k, i) => {
    const ptr = `/os/sshAuthorizedKeys/${i}`;
    if (/^github:\S+$/.test(k.trim())) return;
    if (PLACEHOLDER.test(k)) return; // reported by checkPlaceholders
    if (/\.\.\.|…/.test(k)) {
      const others = keys.length > 1 || !!cfg.os?.password;
      out.add(others ? 'warning' : 'error', ptr, 'this SSH key looks like a placeholder ("...")', 'paste the whole public key (one line from ~/.ssh/id_*.pub) or use github:<user>');
    } else if (!SSH_KEY.test(k)) {
      out.warn(ptr, 'this does not look like an SSH public key', 'expected "ssh-ed25519 AAAA... comment" (one line from ~/.ssh/id_*.pub) or github:<user>');
    }
  });
}

function checkPlaceholders(v: unknown, ptr: string, out: FindingList): void {
  if (typeof v === 'string') {
    if (PLACEHOLDER.test(v) && !out.hasErrorAt(ptr)) out.error(ptr, `${JSON.stringify(v.length > 40 ? v.slice(0, 37) + '...' : v)} looks like a placeholder`, 'replace it with the real value');
    return;
  }
  if (Array.isArray(v)) v.forEach((x, i) => checkPlaceholders(x, `${ptr}/${i}`, out));
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) checkPlaceholders(x, `${ptr}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, out);
  }
}

function checkChartValues(cfg: HarvesterConfig, out: FindingList): void {
  const h = cfg.install?.harvester;
  if (!h) return;
  const clamp = (v: number | undefined, max: number, ptr: string, name: string) => {
    if (v !== undefined && v > max) out.warn(ptr, `${name} ${v} is above ${max} and becomes ${max}`);
  };
  clamp(h.storageClass?.replicaCount, 3, '/install/harvester/storageClass/replicaCount', 'replica_count');
  const d = h.longhorn?.defaultSettings;
  clamp(d?.guaranteedEngineManagerCPU, 12, '/install/harvester/longhorn/defaultSettings/guaranteedEngineManagerCPU', 'guaranteedEngineManagerCPU');
  clamp(d?.guaranteedReplicaManagerCPU, 12, '/install/harvester/longhorn/defaultSettings/guaranteedReplicaManagerCPU', 'guaranteedReplicaManagerCPU');
  clamp(d?.guaranteedInstanceManagerCPU, 12, '/install/harvester/longhorn/defaultSettings/guaranteedInstanceManagerCPU', 'guaranteedInstanceManagerCPU');
  clamp(d?.storageReservedPercentageForDefaultDisk, 30, '/install/harvester/longhorn/defaultSettings/storageReservedPercentageForDefaultDisk', 'storageReservedPercentageForDefaultDisk');
}
