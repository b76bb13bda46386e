/**
 * /oem/90_custom.yaml, the yip document Harvester's ConvertToCOS produces (harvester/harvester-installer pkg/config/cos.go ConvertToCOS,
 * pkg/config/templates; yip format: rancher/yip pkg/schema/schema.go): the rootfs layout, the initramfs stage (rancher user,
 * modules, sysctls, environment, files, multipath, hostname, timesyncd, the operators' shell profile), the network stage
 * (hostname, SSH keys incl. github:) and after-install-chroot commands.
 */
import { gunzipSync } from 'node:zlib';
import { stringify } from 'yaml';
import type { HarvesterConfig, MultipathBlacklistConfig, MultipathDevice } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { DEFAULT_CLUSTER_POD_CIDR, DEFAULT_CLUSTER_SERVICE_CIDR } from '../../config/defaults.js';
import { isCryptHash, sha512Crypt } from './crypt.js';
import { OVERLAY, RW_PATHS, persistentStatePaths, volumes } from '../../node/layout.js';
import { OPERATOR_PROFILE_PATH, operatorProfile } from './operator-shell.js';

export const YIP_PATH = '/oem/90_custom.yaml';
export const LOGIN_USER = 'rancher';
export const NOT_RECOVERY = '[ ! -f "/run/cos/recovery_mode" ]';
export const DEFAULT_MODULES = ['kvm', 'vhost_net'];
export const IPV6_SYSCTLS: Record<string, string> = {
  'net.ipv6.conf.all.disable_ipv6': '0',
  'net.ipv6.conf.default.disable_ipv6': '0',
  'net.ipv6.conf.lo.disable_ipv6': '0',
};
/**
 * Harvester patches multipathd.service so the `multipath=off` it boots with does not stop a person (or a
 * third-party CSI driver) from starting multipathd later. A drop-in does the same: an empty Condition
 * resets the unit's conditions, then the ones worth keeping are set again.
 */
export const MULTIPATHD_DROPIN_PATH = '/etc/systemd/system/multipathd.service.d/90-hvinstall-allow-manual-start.conf';
export const MULTIPATHD_DROPIN = '[Unit]\nConditionKernelCommandLine=\nConditionKernelCommandLine=!nompath\nConditionVirtualization=!container\n';
export const LONGHORN_MULTIPATH_CONF = 'blacklist {\n    device {\n        vendor "IET"\n        product "VIRTUAL-DISK"\n    }\n}\n';

/** yip's encodings (cloud-init names), mapped to how to check them at render time. */
const ENCODINGS: Record<string, 'plain' | 'b64' | 'gz' | 'gz+b64'> = {
  '': 'plain', 'text/plain': 'plain',
  b64: 'b64', base64: 'b64',
  gz: 'gz', gzip: 'gz',
  'gz+base64': 'gz+b64', 'gzip+base64': 'gz+b64', 'gz+b64': 'gz+b64', 'gzip+b64': 'gz+b64',
};

export interface YipInputs {
  config: HarvesterConfig;
  hostname: string;
  hasDataPartition: boolean;
  passwordSalt: string;
  warnings: string[];
  /** Files the initramfs stage writes at every boot besides its own (rancherd's config and bootstrap resources). */
  bootFiles?: ReadonlyArray<{ path: string; mode: number; content: string }>;
}

/**
 * yip renders every file's content as a Go template before writing it (rancher/yip pkg/plugins
 * files.go templateSysData), so a literal `{{` in content hvinstall generates must come out of that
 * rendering unchanged: `{{"{{"}}` prints `{{`, and a lone `}}` is plain text to Go templates.
 * (Harvester masks its Grafana dashboards the same way: harvester-installer pkg/config/templates.go
 * escapeMustaches.) Users' own write_files are left as they are: they may use yip's templating.
 */
function escapeGoTemplate(text: string): string {
  return text.split('{{').join('{{"{{"}}');
}

/** os.password as yip's passwd: hashed with SHA-512 crypt when clear text, kept when already a crypt hash. */
export function passwordHash(password: string, salt: string): string {
  return isCryptHash(password) ? password : sha512Crypt(password, salt);
}

/** Harvester parses write_files permissions as octal; anything else becomes 0600 with a warning. */
export function filePermissions(raw: string | undefined, where: string, warnings: string[]): number {
  const s = (raw ?? '').trim();
  if (s === '') return 0o600;
  if (/^0?o?[0-7]{1,4}$/.test(s)) return parseInt(s.replace(/^0?o/, ''), 8);
  warnings.push(`${where}: permissions "${s}" is not octal; using 0600 as Harvester does`);
  return 0o600;
}

function checkEncoded(content: string, encoding: string, where: string): void {
  const kind = ENCODINGS[encoding.toLowerCase()];
  if (kind === undefined) {
    throw new HvError(`unknown encoding "${encoding}"`, { where, hint: `use one of: ${Object.keys(ENCODINGS).filter(Boolean).join(', ')}`, exitCode: ExitCode.checkFailed });
  }
  if (kind === 'plain') return;
  const compact = content.replace(/\s+/g, '');
  if (kind !== 'gz' && (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0)) {
    throw new HvError('content is not valid base64', { where, hint: `encoding "${encoding}" needs base64 content`, exitCode: ExitCode.checkFailed });
  }
  if (kind === 'gz' || kind === 'gz+b64') {
    const bytes = kind === 'gz' ? Buffer.from(content, 'latin1') : Buffer.from(compact, 'base64');
    try {
      gunzipSync(bytes);
    } catch (err) {
      throw new HvError(`content does not gunzip: ${(err as Error).message}`, { where, hint: kind === 'gz' ? 'gzip data in YAML is usually wanted as gz+b64' : undefined, exitCode: ExitCode.checkFailed });
    }
  }
}

function deviceBlock(d: MultipathDevice, negate: boolean): string {
  const lines = ['    device {'];
  if (d.vendor) lines.push(`        vendor "${negate ? '!' : ''}${d.vendor}"`);
  if (d.product) lines.push(`        product "${negate ? '!' : ''}${d.product}"`);
  lines.push('    }');
  return lines.join('\n');
}

/**
 * /etc/multipath.conf from externalStorageConfig.multiPathConfig, in Harvester's two shapes: option 1
 * (a device list: everything else is blacklisted, written as negated entries) and option 2 (blacklist
 * and blacklist_exceptions, both sections always present).
 */
export function renderMultipathConf(cfg: MultipathDevice[] | MultipathBlacklistConfig): string {
  if (Array.isArray(cfg)) return `blacklist {\n${cfg.map((d) => deviceBlock(d, true)).join('\n')}\n}\n`;
  const section = (name: string, wwids: string[] | undefined, devices: MultipathDevice[] | undefined) => {
    const lines = [...(wwids ?? []).map((w) => `    wwid "${w}"`), ...(devices ?? []).map((d) => deviceBlock(d, false))];
    return `${name} {\n${lines.map((l) => `${l}\n`).join('')}}\n`;
  };
  return section('blacklist', cfg.blacklistWwids, cfg.blacklist) + section('blacklist_exceptions', cfg.blacklistExceptionWwids, cfg.blacklistExceptions);
}

export function multipathEnabled(config: HarvesterConfig): boolean {
  return config.os?.externalStorageConfig?.enabled === true;
}

/**
 * `/etc/default/rke2-*` content when os.environment sets a proxy: HTTP_PROXY, HTTPS_PROXY and NO_PROXY,
 * with the cluster's pod and service CIDRs and in-cluster names added to NO_PROXY as RKE2's docs ask.
 */
export function rke2ProxyEnvironment(config: HarvesterConfig): string | undefined {
  const env = config.os?.environment ?? {};
  const get = (name: string) => env[name.toUpperCase()] ?? env[name.toLowerCase()];
  const http = get('http_proxy');
  const https = get('https_proxy');
  if (!http && !https) return undefined;
  const noProxy = (get('no_proxy') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const extra of ['127.0.0.1', 'localhost', config.install?.clusterPodCidr || DEFAULT_CLUSTER_POD_CIDR, config.install?.clusterServiceCidr || DEFAULT_CLUSTER_SERVICE_CIDR, '.svc', '.cluster.local']) {
    if (!noProxy.includes(extra)) noProxy.push(extra);
  }
  const lines: string[] = [];
  if (http) lines.push(`HTTP_PROXY=${http}`);
  if (https) lines.push(`HTTPS_PROXY=${https}`);
  lines.push(`NO_PROXY=${noProxy.join(',')}`);
  for (const l of lines) {
    if (/[\n"'$`\\]/.test(l)) throw new HvError(`proxy setting "${l.split('=')[0]}" contains a quote, $, backslash or newline`, { where: 'os.environment', exitCode: ExitCode.checkFailed });
  }
  return lines.join('\n') + '\n';
}

function sortedRecord(r: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(r).sort().map((k) => [k, String(r[k])]));
}

/** cOS's layout: which paths persist (the rootfs stage). */
function layoutStage(config: HarvesterConfig, hasDataPartition: boolean): Record<string, unknown> {
  return {
    name: 'Layout configuration',
    if: NOT_RECOVERY,
    environment_file: '/run/cos/cos-layout.env',
    environment: {
      VOLUMES: volumes(hasDataPartition).join(' '),
      OVERLAY,
      RW_PATHS: RW_PATHS.join(' '),
      PERSISTENT_STATE_PATHS: persistentStatePaths(config, hasDataPartition).join(' '),
      PERSISTENT_STATE_BIND: 'true',
    },
  };
}

/** Harvester's modules and os.modules, once each, every name checked (it becomes a modprobe command). */
function kernelModules(os: NonNullable<HarvesterConfig['os']>): string[] {
  const modules: string[] = [];
  for (const m of [...DEFAULT_MODULES, ...(os.modules ?? [])]) if (m && !modules.includes(m)) modules.push(m);
  for (const m of modules) {
    if (!/^[A-Za-z0-9_-]+$/.test(m)) throw new HvError(`module name "${m}" is not a kernel module name`, { where: 'os.modules', exitCode: ExitCode.checkFailed });
  }
  return modules;
}

/** os.write_files, each path, encoding and mode checked. */
function userFiles(os: NonNullable<HarvesterConfig['os']>, warnings: string[]): Array<Record<string, unknown>> {
  return (os.writeFiles ?? []).map((f, i) => {
    const where = `os.write_files[${i}]`;
    if (!f.path || !f.path.startsWith('/')) throw new HvError(`path "${f.path ?? ''}" is not absolute`, { where: `${where}.path`, exitCode: ExitCode.checkFailed });
    const encoding = (f.encoding ?? '').trim();
    checkEncoded(f.content ?? '', encoding, `${where}.content`);
    const file: Record<string, unknown> = { path: f.path, permissions: filePermissions(f.permissions, `${where}.permissions`, warnings), content: f.content ?? '' };
    if (encoding && ENCODINGS[encoding.toLowerCase()] !== 'plain') file.encoding = encoding.toLowerCase();
    // yip's File has no yaml tags, so Go's YAML decoder expects the lowercased field name `ownerstring`.
    if (f.owner) file.ownerstring = f.owner;
    return file;
  });
}

/** Every file the initramfs stage writes, and the units that external storage needs enabled. */
function nodeFiles(inp: YipInputs): { files: Array<Record<string, unknown>>; enable: string[] } {
  const { config, warnings } = inp;
  const os = config.os ?? {};
  const files = userFiles(os, warnings);
  files.push({ path: '/etc/sysctl.d/zz-harvester-enable-ipv6.conf', permissions: 0o644, content: '# Written by hvinstall: overrides /etc/sysctl.d/ipv6.conf\n' + Object.entries(IPV6_SYSCTLS).map(([k, v]) => `${k} = ${v}\n`).join('') });
  files.push({ path: '/etc/multipath/conf.d/99-longhorn.conf', permissions: 0o644, content: LONGHORN_MULTIPATH_CONF });
  files.push({ path: MULTIPATHD_DROPIN_PATH, permissions: 0o644, content: MULTIPATHD_DROPIN });
  files.push({ path: OPERATOR_PROFILE_PATH, permissions: 0o644, content: operatorProfile() });
  const proxy = rke2ProxyEnvironment(config);
  if (proxy) {
    // systemd services do not read /etc/environment: RKE2 (and its containerd) take the proxy from these files.
    // 0600: a proxy URL may carry user:password.
    for (const unit of ['rke2-server', 'rke2-agent']) files.push({ path: `/etc/default/${unit}`, permissions: 0o600, content: proxy });
  }
  const enable: string[] = [];
  if (multipathEnabled(config)) {
    // Without a multiPathConfig Harvester only enables multipathd and leaves multipath.conf alone.
    const mp = os.externalStorageConfig?.multiPathConfig;
    if (mp) files.push({ path: '/etc/multipath.conf', permissions: 0o644, content: renderMultipathConf(mp) });
    enable.push('multipathd');
  }
  for (const f of inp.bootFiles ?? []) files.push({ path: f.path, permissions: f.mode, content: escapeGoTemplate(f.content) });
  return { files, enable };
}

/** The initramfs stage: modules, sysctls, environment, files, hostname, the login's password, NTP and units. */
function initramfsStage(inp: YipInputs): Record<string, unknown> {
  const { config, hostname, passwordSalt, warnings } = inp;
  const os = config.os ?? {};
  const modules = kernelModules(os);
  const { files, enable } = nodeFiles(inp);
  const initramfs: Record<string, unknown> = { name: 'Harvester node configuration' };
  initramfs.commands = [...modules.map((m) => `modprobe ${m}`), 'rm -f /var/lib/kubelet/cpu_manager_state'];
  for (const [k, v] of Object.entries(os.sysctls ?? {})) {
    if (k in IPV6_SYSCTLS && String(v) !== IPV6_SYSCTLS[k]) warnings.push(`os.sysctls.${k}: Harvester forces ${k}=${IPV6_SYSCTLS[k]}; "${v}" is ignored`);
  }
  initramfs.sysctl = sortedRecord({ ...(os.sysctls ?? {}), ...IPV6_SYSCTLS });
  if (os.environment && Object.keys(os.environment).length) initramfs.environment = sortedRecord(os.environment);
  initramfs.files = files;
  initramfs.hostname = hostname;
  if (os.password) initramfs.users = { [LOGIN_USER]: { passwd: passwordHash(os.password, passwordSalt) } };
  const ntp = (os.ntpServers ?? []).filter(Boolean);
  if (ntp.length) {
    initramfs.timesyncd = { NTP: ntp.join(' ') };
    enable.push('systemd-timesyncd', 'systemd-time-wait-sync');
  }
  if (enable.length) initramfs.systemctl = { enable };
  return initramfs;
}

export function yipDocument(inp: YipInputs): Record<string, unknown> {
  const { config, hostname, hasDataPartition } = inp;
  const os = config.os ?? {};
  const rootfs = layoutStage(config, hasDataPartition);
  const initramfs = initramfsStage(inp);
  const network: Record<string, unknown> = { name: 'Harvester network stage', hostname };
  const keys = (os.sshAuthorizedKeys ?? []).map((k) => k.trim()).filter(Boolean);
  if (keys.length) network.authorized_keys = { [LOGIN_USER]: keys };

  const stages: Record<string, unknown[]> = { rootfs: [rootfs], initramfs: [initramfs], network: [network] };
  const chroot = (os.afterInstallChrootCommands ?? []).filter((c) => c.trim() !== '');
  if (chroot.length) stages['after-install-chroot'] = [{ name: 'After install chroot commands', if: NOT_RECOVERY, commands: chroot }];
  return { name: 'Harvester Configuration', stages };
}

export function renderYip(inp: YipInputs): string {
  return stringify(yipDocument(inp), { lineWidth: 0 });
}

/** `third_party_kernel_args` for /oem/grubenv: multipath=off unless external storage is on, then the user's extra arguments. */
export function thirdPartyKernelArgs(config: HarvesterConfig): string {
  const args: string[] = [];
  // Harvester sets the variable twice so the extra arguments silently replace multipath=off; we keep both.
  if (!multipathEnabled(config)) args.push('multipath=off');
  const extra = (config.os?.additionalKernelArguments ?? '').trim().replace(/\s+/g, ' ');
  if (extra) args.push(extra);
  return args.join(' ');
}

const GRUBENV_SIZE = 1024;
// Current grub-editenv (2.06+) writes the warning line too; GRUB itself checks only the first line.
const GRUBENV_HEADER = '# GRUB Environment Block\n# WARNING: Do not edit this file by tools other than grub-editenv!!!\n';

/** A GRUB environment block exactly as grub2-editenv writes it: header, `key=value` lines, `#` padding to 1024 bytes. */
export function renderGrubenv(vars: Record<string, string>): Buffer {
  let body = GRUBENV_HEADER;
  for (const [k, v] of Object.entries(vars)) {
    if (/[\n\\]/.test(v)) throw new HvError(`grub environment value for ${k} contains a newline or backslash`, { where: 'os.additionalKernelArguments', exitCode: ExitCode.checkFailed });
    body += `${k}=${v}\n`;
  }
  const bytes = Buffer.from(body, 'utf8');
  if (bytes.length > GRUBENV_SIZE) throw new HvError(`grub environment is ${bytes.length} bytes, more than the ${GRUBENV_SIZE} of a GRUB environment block`, { where: 'os.additionalKernelArguments', hint: 'shorten the extra kernel arguments', exitCode: ExitCode.checkFailed });
  return Buffer.concat([bytes, Buffer.alloc(GRUBENV_SIZE - bytes.length, '#')]);
}
