/**
 * Renders the installed node's files from a validated config: pure and deterministic (facts → file
 * set). The install engine writes the set into /oem and COS_PERSISTENT; `hvinstall render` writes it
 * under a directory; the agent's registries guard calls `renderRegistriesYaml`.
 */
import { createHash, createHmac } from 'node:crypto';
import type { HarvesterConfig } from '../../config/types.js';
import { toHarvesterConfigYaml } from '../../config/serialise.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { cryptSaltFrom, isCryptHash } from './crypt.js';
import { ADMIN_PASSWORD_PATH, renderAdminPasswordDropIn, withHashedAdminPassword } from './admin-password.js';
import { bootstrapFiles, renderBootstrapFile } from './bootstrap-resources.js';
import { HARVESTER_INSTALLER_PATH, missingTemplates } from './harvester-templates.js';
import { renderKubeVipManifest, KUBE_VIP_MANIFEST_PATH } from '../../node/kube-vip.js';
import { defaultHasDataPartition } from '../../node/layout.js';
import { NM_CONNECTIONS_DIR, renderNetworkManagerProfiles } from './network.js';
import { nicPins, withNicPins } from './nic-names.js';
import { RANCHERD_CONFIG_DIR, RANCHERD_CONFIG_PATH, renderRancherdConfig } from './rancherd.js';
import { renderRegistriesFile } from '../../node/registries.js';
import { resolveBootstrapVersions, type BootstrapVersions } from './release.js';
import { renderRke2DropIns } from './rke2.js';
import { NODE_IDENTITY_PATH } from '../../node/identity.js';
import { CANONICAL_CONFIG_PATH, HARVESTER_CONFIG_PATH, REGISTRIES_PATH, SEEDS_PATH } from '../../node/paths.js';
import { renderNodeIdentity } from './identity.js';
import type { ImageFacts, RenderedFile, RenderFacts, RenderReport, RenderSeeds } from './types.js';
import { passwordHash, renderGrubenv, renderYip, thirdPartyKernelArgs, YIP_PATH } from './yip.js';

export type { ImageFacts, RenderedFile, RenderFacts, RenderNic, RenderReport, RenderSeeds } from './types.js';
export { parseReleaseMetadata, mediaRelease, resolveBootstrapVersions, IMAGE_RELEASE_PATH, ISO_RELEASE_PATH } from './release.js';
export { templatesInBinary, HARVESTER_INSTALLER_PATH, ADDONS_TEMPLATE, DASHBOARDS_TEMPLATE, type HarvesterTemplates } from './harvester-templates.js';
export type { BootstrapVersions, MediaRelease, ReleaseMetadata } from './release.js';
export { RANCHERD_CONFIG_PATH, RANCHERD_CONFIG_DIR } from './rancherd.js';
export { renderRegistriesYaml, renderRegistriesFile, parseContainerdRegistry, registriesHoldCredentials, registryCredentials } from '../../node/registries.js';
export type { RegistriesDocument } from '../../node/registries.js';
export { sha512Crypt, isCryptHash } from './crypt.js';
export { placeNodePath, persistentStatePaths, defaultHasDataPartition, bindStateDir } from '../../node/layout.js';
export { managementInterfaceName } from './network.js';
export { nodeIdentity } from './identity.js';
export { NODE_IDENTITY_PATH, type NodeIdentity, type NodeIdentityNic } from '../../node/identity.js';
export { OPERATOR_PROFILE_PATH } from './operator-shell.js';
export { renderKubeVipManifest, KUBE_VIP_MANIFEST_PATH } from '../../node/kube-vip.js';

export { CANONICAL_CONFIG_PATH, HARVESTER_CONFIG_PATH, SEEDS_PATH, REGISTRIES_PATH } from '../../node/paths.js';
export const SSHD_CONFIG_DIR = '/etc/ssh/sshd_config.d';
const HOSTNAME_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const OWNER = 'root:root';

/** JSON with sorted keys, so the derived seed does not depend on key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().filter((k) => (value as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function resolveSeeds(config: HarvesterConfig, facts: RenderFacts, seeds: RenderSeeds = {}): RenderReport['seeds'] {
  const seed = seeds.seed ?? createHash('sha256').update('hvinstall/render-seed\0').update(canonicalJson({ config, facts })).digest('hex');
  const derive = (label: string) => createHmac('sha256', seed).update(label).digest();
  let hostnameSuffix = seeds.hostnameSuffix;
  if (hostnameSuffix === undefined) {
    const b = derive('hostname');
    hostnameSuffix = Array.from(b.subarray(0, 5), (x) => HOSTNAME_ALPHABET[x % HOSTNAME_ALPHABET.length]).join('');
  } else if (!/^[a-z0-9]{5}$/.test(hostnameSuffix)) {
    throw new HvError(`hostname suffix "${hostnameSuffix}" must be 5 lowercase letters or digits`, { where: 'seeds.hostnameSuffix', exitCode: ExitCode.usage });
  }
  let passwordSalt = seeds.passwordSalt;
  if (passwordSalt === undefined) passwordSalt = cryptSaltFrom(derive('password-salt'));
  else if (!/^[./0-9A-Za-z]{1,16}$/.test(passwordSalt)) {
    throw new HvError(`password salt "${passwordSalt}" must be 1-16 characters of ./0-9A-Za-z`, { where: 'seeds.passwordSalt', exitCode: ExitCode.usage });
  }
  return { seed, hostnameSuffix, passwordSalt };
}

export function resolveHostname(config: HarvesterConfig, facts: RenderFacts, suffix: string): RenderReport['hostname'] {
  const given = config.os?.hostname?.trim();
  if (given) return { name: given, source: 'config' };
  const method = String(config.install?.managementInterface?.method ?? 'dhcp').toLowerCase();
  const dhcp = facts.dhcpHostname?.trim();
  // The live ISO's own hostname `rancher` is what an unanswered DHCP leaves behind: it counts as none.
  if (method === 'dhcp' && dhcp && dhcp !== 'rancher') return { name: dhcp, source: 'dhcp' };
  return { name: `harvester-${suffix}`, source: 'generated' };
}

function sshdFiles(config: HarvesterConfig): RenderedFile[] {
  const out: RenderedFile[] = [];
  if (config.os?.sshd?.sftp) {
    out.push({ path: `${SSHD_CONFIG_DIR}/sftp.conf`, mode: 0o644, owner: OWNER, secret: false, content: 'Subsystem\tsftp\t/usr/libexec/ssh/sftp-server\n' });
  }
  if (config.os?.sshd?.disablePasswordAuth) {
    out.push({ path: `${SSHD_CONFIG_DIR}/99-disable-password-auth.conf`, mode: 0o644, owner: OWNER, secret: false, content: 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n' });
  }
  return out;
}

/** The config as it is stored on the node: os.password replaced by its SHA-512 crypt hash. */
export function withHashedPassword(config: HarvesterConfig, salt: string): HarvesterConfig {
  if (!config.os?.password || isCryptHash(config.os.password)) return config;
  return { ...config, os: { ...config.os, password: passwordHash(config.os.password, salt) } };
}

function withHostname(config: HarvesterConfig, name: string): HarvesterConfig {
  return config.os?.hostname === name ? config : { ...config, os: { ...config.os, hostname: name } };
}

/** Without image facts the node is rendered as for an image without rancherd. */
const NO_IMAGE: ImageFacts = { bootstrapper: 'hvagent', why: 'the OS image was not inspected: rendered for hvagent driving RKE2' };

function byPath(a: RenderedFile, b: RenderedFile): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/**
 * rancherd's files, written by the initramfs stage of 90_custom.yaml at every boot as Harvester
 * writes them: the config (every cluster node) and, on the create node, the bootstrap resources
 * and the admin-password drop-in.
 */
function rancherdFiles(config: HarvesterConfig, mode: string, hostname: string, versions: BootstrapVersions, facts: RenderFacts, seed: string, warnings: string[]): RenderedFile[] {
  const files: RenderedFile[] = [{ path: RANCHERD_CONFIG_PATH, mode: 0o600, owner: OWNER, secret: true, content: renderRancherdConfig(config, hostname, versions) }];
  if (mode !== 'create') return files;
  if (!facts.image?.templates) throw missingTemplates(`the OS image's ${HARVESTER_INSTALLER_PATH}`);
  for (const f of bootstrapFiles(config, versions, facts.arch ?? 'amd64', facts.image.templates, warnings)) {
    // Settings may carry credentials (containerd-registry, backup-target, http-proxy).
    files.push({ path: `${RANCHERD_CONFIG_DIR}/${f.name}`, mode: 0o600, owner: OWNER, secret: f.name === '20-harvester-settings.yaml' && f.resources.length > 0, content: renderBootstrapFile(f) });
  }
  const admin = config.install?.adminPassword;
  if (admin) files.push({ path: ADMIN_PASSWORD_PATH, mode: 0o600, owner: OWNER, secret: true, content: renderAdminPasswordDropIn(admin, seed, versions.rancher) });
  return files.sort(byPath);
}

/** Renders the node's files plus what was decided (seeds, hostname, warnings, who bootstraps). */
export function renderNode(config: HarvesterConfig, facts: RenderFacts, seeds?: RenderSeeds): RenderReport {
  const mode = String(config.install?.mode ?? '').toLowerCase();
  if (mode !== 'create' && mode !== 'join' && mode !== 'install') {
    throw new HvError(`cannot render a node for install mode "${mode || '(empty)'}"`, { where: 'install.mode', hint: 'render covers create, join and install (binaries only) nodes', exitCode: ExitCode.checkFailed });
  }
  // mode install ("binaries only"): the OS part only; the network and cluster are configured when the node is set up later, as in Harvester.
  const clusterNode = mode !== 'install';
  const image = facts.image ?? NO_IMAGE;
  const rancherd = image.bootstrapper === 'rancherd';
  const warnings: string[] = [];
  const used = resolveSeeds(config, facts, seeds);
  const hostname = resolveHostname(config, facts, used.hostnameSuffix);
  const hasDataPartition = facts.hasDataPartition ?? defaultHasDataPartition(config);
  const files: RenderedFile[] = [];
  const add = (path: string, content: string | Uint8Array, mode: number, secret: boolean) => files.push({ path, content, mode: secret ? 0o600 : mode, owner: OWNER, secret });

  // Versions first: an image with rancherd but no versions fails here, before anything else is decided.
  const versions = rancherd && clusterNode ? resolveBootstrapVersions(config, image.release) : undefined;
  const yipFiles = versions ? rancherdFiles(config, mode, hostname.name, versions, facts, used.seed, warnings) : [];
  if (config.install?.adminPassword && mode === 'create' && !rancherd) warnings.push('install.admin_password is ignored: this image has no rancherd, so no Rancher UI is bootstrapped');

  const yip = renderYip({ config, hostname: hostname.name, hasDataPartition, passwordSalt: used.passwordSalt, warnings, bootFiles: yipFiles.map((f) => ({ path: f.path, mode: f.mode, content: String(f.content) })) });
  // Always 0600: besides the password hash it may carry proxy credentials, the user's write_files and rancherd's token.
  add(YIP_PATH, yip, 0o600, true);
  // A node without a management network (mode install) has no interface to pin.
  const pinning = clusterNode ? nicPins(config, facts) : { pins: [], warnings: [] };
  warnings.push(...pinning.warnings);
  const kargs = withNicPins(thirdPartyKernelArgs(config), pinning.pins);
  add('/oem/grubenv', renderGrubenv(kargs ? { third_party_kernel_args: kargs } : {}), 0o644, false);
  add('/oem/grubcustom', '', 0o644, false);
  // The persisted copies carry the passwords' hashes, never the clear text, and the hostname the node got
  // (Harvester saves the DHCP or generated name too), so re-rendering from them gives the same files.
  const persisted = withHostname(withHashedAdminPassword(withHashedPassword(config, used.passwordSalt), used.seed), hostname.name);
  add(HARVESTER_CONFIG_PATH, toHarvesterConfigYaml(persisted), 0o600, true);
  add(CANONICAL_CONFIG_PATH, JSON.stringify(persisted, null, 2) + '\n', 0o600, true);
  add(SEEDS_PATH, JSON.stringify({ ...used, hostname: hostname.name, hostnameSource: hostname.source }, null, 2) + '\n', 0o600, true);

  if (clusterNode) {
    for (const p of renderNetworkManagerProfiles(config, facts)) add(`${NM_CONNECTIONS_DIR}/${p.fileName}`, p.content, 0o600, false);
    for (const d of renderRke2DropIns(config, facts.cpuCount, { rancherd, nodeName: hostname.name })) add(d.path, d.content, d.mode, d.secret);
    add(NODE_IDENTITY_PATH, renderNodeIdentity(config, facts, hostname.name), 0o644, false);
  }

  const registry = config.systemSettings?.['containerd-registry'];
  if (clusterNode && registry && registry.trim() !== '') {
    const r = renderRegistriesFile(registry);
    add(REGISTRIES_PATH, r.content, r.mode, r.secret);
  }
  // With rancherd the harvester chart's kube-vip DaemonSet owns the VIP: a second announcer of the same address must not run.
  if (mode === 'create' && !rancherd) {
    const manifest = renderKubeVipManifest(config);
    if (manifest) add(KUBE_VIP_MANIFEST_PATH, manifest, 0o644, false);
  }
  for (const f of sshdFiles(config)) files.push(f);

  files.sort(byPath);
  for (let i = 1; i < files.length; i++) {
    if (files[i]!.path === files[i - 1]!.path) throw new HvError(`two rendered files share the path ${files[i]!.path}`, { where: 'installer/render', exitCode: ExitCode.installFailed });
  }
  return { files, seeds: used, hostname, warnings, yipFiles, bootstrap: { bootstrapper: image.bootstrapper, why: image.why, ...(versions ? { versions } : {}) }, nicPins: pinning.pins };
}

/** The public contract: the node's file set, sorted by path. */
export function renderNodeFiles(config: HarvesterConfig, facts: RenderFacts, seeds?: RenderSeeds): RenderedFile[] {
  return renderNode(config, facts, seeds).files;
}
