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
import { DISK_MESSAGES, MIN_PERSISTENT_GIB, MIN_PERSISTENT_MIB, parsePartitionSizeMiB } from './disk-sizes.js';
import { checkFieldTraps, type TrapContext } from './field-traps.js';
import { checkDiskSelectors } from './disk-selector.js';
import { AUTHORIZED_KEY, REMOTE_SSH_KEY } from './ssh-key.js';
import { renderWebhook, unknownTemplateFields, WEBHOOK_TEMPLATE_FIELDS } from './webhook-check.js';
import { isVolumeUrl, parseVolumeUrl } from './config-volume.js';

export interface RuleContext extends TrapContext {
  /** The already-installed path (install mode on an installed system): no iso_url, no device needed. */
  alreadyInstalled?: boolean;
}

export const SCHEME_MESSAGE = (v: number) =>
  `Unsupported Harvester Scheme Version ${v}, please use new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/`;
export const NETWORKS_DEPRECATED =
  'networks is deprecated, please use management_interface for new config and refer https://docs.harvesterhci.io/v1.1/install/harvester-configuration/#installmanagement_interface';
export const BOND_MODES = ['balance-rr', 'active-backup', 'balance-xor', 'broadcast', '802.3ad', 'balance-tlb', 'balance-alb'];
const PLACEHOLDER = /^<[^<>]+>$|<\s*YOUR[_ -][^<>]*>|\bREPLACE[_-]?ME\b|\bCHANGE[_-]?ME\b/i;

type Ptr = string;

/** Every rule, in Harvester's order (commonCheck, then Validate), then what hvinstall adds. */
export function checkRules(cfg: HarvesterConfig, out: FindingList, ctx: RuleContext = {}): void {
  commonCheck(cfg, out, ctx);
  validateStep(cfg, out, ctx);
  checkHvinstallKeys(cfg, out);
  checkDiskSelectors(cfg, out);
  checkPartitionSize(cfg, out);
  checkForceGpt(cfg, out);
  checkUrls(cfg, out);
  checkClusterNetworks(cfg, out);
  checkFieldTraps(cfg, out, ctx);
  checkLists(cfg, out);
}

/** Harvester's commonCheck (pkg/console/validator.go), scheme_version first (automatic/PXE installs do not fill it in). */
function commonCheck(cfg: HarvesterConfig, out: FindingList, ctx: RuleContext): void {
  const install = cfg.install ?? {};
  const os = cfg.os ?? {};
  const mode = install.mode ?? '';
  if (cfg.schemeVersion === undefined) {
    out.error('/schemeVersion', SCHEME_MESSAGE(0), 'add scheme_version: 1 at the top of the file (automatic and PXE installs do not set it for you)');
  }
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
}

/** Harvester's Validate: the device, the networks, the VIP, the settings and the labels. */
function validateStep(cfg: HarvesterConfig, out: FindingList, ctx: RuleContext): void {
  const install = cfg.install ?? {};
  const mode = install.mode ?? '';
  if (!install.device && !install.deviceSelector && !ctx.alreadyInstalled && mode !== 'upgrade') {
    out.error('/install/device', 'no device specified', 'set install.device, e.g. /dev/sda or /dev/disk/by-id/... (stable across reboots), or install.device_selector (a rule, docs/config.md)');
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
  if (mode !== 'install' && !install.managementInterface?.interfaces?.length) {
    out.error('/install/managementInterface/interfaces', NETWORKS_DEPRECATED, 'add install.management_interface: {interfaces: [{name: ens3}], method: dhcp}');
  }
  if (install.managementInterface) checkNetworks(install.managementInterface, cfg, out);
  if (mode === 'create') checkVip(cfg, out);
  else if (install.vipMode && mode === 'join') out.warn('/install/vipMode', 'vip_mode is used only in create mode');
  checkSystemSettings(cfg, mode, out);
  checkLabels(cfg.os?.labels, out);
}

/** Keys beyond Harvester's installer: cordoned (harvester/harvester HEAD) and admin_password (hvinstall). */
function checkHvinstallKeys(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  const mode = install.mode ?? '';
  if (install.cordoned && mode === 'create') out.error('/install/cordoned', "install.cordoned can't be set in create mode");
  if (install.cordoned && install.role === 'witness') out.error('/install/cordoned', "install.cordoned can't be set for nodes with the witness role");
  // The create node bootstraps the cluster's admin.
  if (install.adminPassword !== undefined) {
    const problem = adminPasswordProblem(install.adminPassword);
    if (problem) out.error('/install/adminPassword', problem, 'give at least 12 characters, or a $pbkdf2-sha3-512$ hash (docs/config.md)');
    else if (mode !== 'create') out.warn('/install/adminPassword', `admin_password is used only in create mode (the cluster's admin is set once, by the node that creates it); ignored in ${mode || 'this'} mode`);
  }
}

/** The lists and what Harvester ignores or reads otherwise than the key suggests. */
function checkLists(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  const os = cfg.os ?? {};
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
    if (d === install.device) out.warn(`/install/wipeDisksList/${i}`, 'wipe_disks_list names the installation device; it is skipped there', 'remove it: the installation device is partitioned anyway');
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

/**
 * Harvester's checkVip (pkg/console/validator.go) in create mode: the address first (checkIP: an
 * empty one is " is not a valid IP address" whatever the mode, except dhcp, where the installer
 * leases one before validating), then the mode (static and none need nothing more, dhcp a MAC,
 * anything else "unknown vip mode: X"). Both are reported, so a config with neither key hears that
 * the VIP is missing, not only that the mode is unknown.
 */
function checkVip(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  const vipMode = install.vipMode ?? '';
  if (!install.vip && vipMode !== 'dhcp') {
    out.error(
      '/install/vip',
      `vip is required in create mode${vipMode ? ` with vip_mode ${vipMode}` : ''}`,
      'set install.vip to a free IPv4 address in the management network, or vip_mode: dhcp to lease one (Harvester reports: " is not a valid IP address")',
    );
  }
  if (!vipMode) {
    out.error('/install/vipMode', 'unknown vip mode: ', 'set install.vip_mode to static, dhcp or none');
    return;
  }
  if (vipMode === 'dhcp' && !install.vip && install.vipHwAddr) {
    out.warn('/install/vipHwAddr', 'vip_hw_addr is replaced when vip is empty: Harvester leases both by DHCP', 'set vip too, or remove vip_hw_addr');
  }
  const ip = install.managementInterface?.ip;
  if (install.vip && ip && install.vip === ip) out.error('/install/vip', "VIP must not be the same as management NIC's IP");
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
  // Harvester writes the setting itself from os.ntp_servers (pkg/console/util.go updateSystemSettings),
  // so its own /oem/harvester.config carries both; only a different value is replaced.
  const built = cfg.os?.ntpServers?.length ? JSON.stringify({ ntpServers: cfg.os.ntpServers }) : undefined;
  if (settings['ntp-servers'] !== undefined && built !== undefined && settings['ntp-servers'] !== built) {
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

function checkPartitionSize(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  if (!install.persistentPartitionSize) return;
  const mib = parsePartitionSizeMiB(install.persistentPartitionSize);
  if (mib === undefined) return; // the schema reports the format
  if (mib < MIN_PERSISTENT_MIB) {
    if (install.skipchecks) out.warn('/install/persistentPartitionSize', DISK_MESSAGES.partitionTooSmall, 'allowed because install.skipchecks is set');
    else out.error('/install/persistentPartitionSize', DISK_MESSAGES.partitionTooSmall, `use at least ${MIN_PERSISTENT_GIB}Gi`);
  }
  if ((install.dataDisk && install.dataDisk !== install.device) || install.dataDiskSelector) {
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
  if (install.configUrl && isVolumeUrl(install.configUrl)) {
    const v = parseVolumeUrl(install.configUrl);
    if (!v.ok) out.error('/install/configUrl', v.message);
  } else if (install.configUrl && !urlOk(install.configUrl, ['http', 'https'])) {
    out.error('/install/configUrl', `config_url must be an http(s) URL or volume:LABEL (got ${JSON.stringify(install.configUrl)})`);
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

/** Template values for checking a webhook's rendered URL (Harvester's context, getWebhookContext). */
const SAMPLE_WEBHOOK_VARS = { Hostname: 'node-1', MACAddr: '52:54:00:12:34:56', IPAddrV4: '192.0.2.10', IPAddrV6: '2001:db8::10' };
const WEBHOOK_DROPPED = "Harvester then sends none of this config's webhooks (it logs the error and installs on)";

/**
 * Webhooks never break an install: Harvester logs a webhook it cannot prepare and installs without
 * any of them (pkg/console/install_panels.go, "Invalid webhook"). So every finding here is a warning,
 * from the same check the sender runs (config/webhook-check.ts).
 */
function checkWebhook(w: Webhook, ptr: string, out: FindingList): void {
  const r = renderWebhook(w, SAMPLE_WEBHOOK_VARS);
  // A wrong event or method that is set is the schema's finding (its enum, Harvester's message).
  if ('problem' in r && !((r.problem.field === 'event' || r.problem.field === 'method') && w[r.problem.field])) {
    const { field } = r.problem;
    const message = field === 'url' && !w.url ? 'is empty, so the request cannot be made' : r.problem.message;
    const prefix = field === 'url' || field === 'payload' ? `webhook ${field}: ` : '';
    const hint = field === 'method' && !w.method ? `set method (e.g. POST); ${WEBHOOK_DROPPED}` : field === 'event' && !w.event ? `set event to STARTED, SUCCEEDED or FAILED; ${WEBHOOK_DROPPED}` : WEBHOOK_DROPPED;
    out.warn(`${ptr}/${field}`, prefix + message, hint);
  }
  for (const field of ['url', 'payload'] as const) {
    for (const name of unknownTemplateFields(w[field] ?? '')) {
      const guess = closest(name, WEBHOOK_TEMPLATE_FIELDS);
      out.warn(`${ptr}/${field}`, `webhook ${field}: .${name} is not a template field and renders as an empty string`, guess ? `did you mean .${guess}?` : `the fields are ${WEBHOOK_TEMPLATE_FIELDS.map((f) => '.' + f).join(', ')}`);
    }
  }
  if (w.basicAuth && !!w.basicAuth.user !== !!w.basicAuth.password) {
    out.warn(`${ptr}/basicAuth`, 'basic_auth is sent only when both user and password are set; this webhook goes without it', 'set both, or remove basic_auth');
  }
  const method = (w.method ?? '').toUpperCase();
  if (w.payload && (method === 'GET' || method === 'HEAD')) out.warn(`${ptr}/payload`, `a payload with method ${method} is usually dropped by servers`, 'use POST or PUT');
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
  const looksFake = (k: string) => PLACEHOLDER.test(k) || /\.\.\.|…/.test(k);
  // A node with a login: a password, a key, or a key source; the placeholders are none of these.
  const login = !!cfg.os?.password || keys.some((k) => !looksFake(k));
  keys.forEach((k, i) => {
    const ptr = `/os/sshAuthorizedKeys/${i}`;
    if (REMOTE_SSH_KEY.test(k.trim())) return;
    if (!login && looksFake(k)) {
      // The one error here: the node would install with no way to log in (no password, no real key).
      out.error(ptr, 'this SSH key is a placeholder and there is no other login: the node would be unreachable', 'paste the whole public key (one line from ~/.ssh/id_*.pub), use github:<user>, or set os.password');
    } else if (PLACEHOLDER.test(k)) {
      return; // checkPlaceholders says so
    } else if (looksFake(k)) {
      out.warn(ptr, 'this SSH key looks like a placeholder ("...")', 'paste the whole public key (one line from ~/.ssh/id_*.pub) or use github:<user>');
    } else if (!AUTHORIZED_KEY.test(k)) {
      out.warn(ptr, 'this does not look like an SSH public key', 'expected "ssh-ed25519 AAAA... comment" (one line from ~/.ssh/id_*.pub) or github:<user>');
    }
  });
}

function checkPlaceholders(v: unknown, ptr: string, out: FindingList): void {
  if (typeof v === 'string') {
    // A warning: Harvester installs with the text as written (docs/config.md); where that breaks the
    // install (a URL, an address) the field's own rule has the error.
    if (PLACEHOLDER.test(v) && !out.hasErrorAt(ptr)) out.warn(ptr, `${JSON.stringify(v.length > 40 ? v.slice(0, 37) + '...' : v)} looks like a placeholder`, 'replace it with the real value', 'placeholder');
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
