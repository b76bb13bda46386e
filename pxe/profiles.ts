/**
 * profiles.yaml: reading, schema and semantic checks, and the machine catalogue it describes.
 * Pure apart from reading the file (parseProfiles takes text).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { parseDocument } from 'yaml';
import { HvError, ExitCode } from '../lib/errors.js';

export interface ArtifactSpec {
  path: string;
  sha256: string;
}
/** A scalar, or a mapping of scalars used as a whole value (a disk rule shared by a rack: docs/pxe.md). */
export type Values = Record<string, string | number | boolean | Record<string, string | number | boolean>>;
export interface ProfileSpec {
  kernel: string;
  initrd: string;
  rootfs: string;
  iso?: string;
  kernel_args?: string[];
  report_events?: boolean;
  /** The network boot chain: iPXE (default) or Secure Boot's shim → signed grub → signed kernel. */
  boot?: BootChain;
  /** What a machine that reported a finished install boots over the network: its disk (default), or the installer again. */
  after_install?: 'local' | 'reinstall';
  config: Record<string, unknown>;
}
/** The boot chains a profile can choose (`boot:`). */
export const BOOT_CHAINS = ['ipxe', 'grub-signed'] as const;
export type BootChain = (typeof BOOT_CHAINS)[number];

/** The chain a profile's machines boot: its `boot:`, else iPXE. */
export function bootChainOf(p: Pick<ProfileSpec, 'boot'>): BootChain {
  return p.boot ?? 'ipxe';
}

export interface MachineSpec {
  name?: string;
  mac?: string;
  uuid?: string;
  hostname?: string;
  ip?: string;
  gateway?: string;
  dns?: string[];
  role?: string;
  /** Enrolls the machine by its TPM: sha256 of its EK's SubjectPublicKeyInfo (DER). */
  tpm_ek_sha256?: string;
  values?: Values;
  config?: Record<string, unknown>;
}
export interface GroupSpec {
  name: string;
  profile: string;
  default?: boolean;
  fleet?: { vip: string; vip_mode?: 'static' | 'dhcp'; vip_hw_addr?: string };
  values?: Values;
  config?: Record<string, unknown>;
  machines?: MachineSpec[];
}
export interface ProfilesFile {
  server_url?: string;
  artifacts: Record<string, ArtifactSpec>;
  profiles: Record<string, ProfileSpec>;
  groups: GroupSpec[];
}

/** One machine hvpxe knows, explicit or synthesised for a default group. */
export interface Machine {
  name: string;
  group: string;
  profile: string;
  mac?: string;
  uuid?: string;
  hostname?: string;
  spec: MachineSpec;
  /** Position in a fleet group (0 creates the cluster), undefined outside fleets. */
  fleetIndex?: number;
  /** True for a machine synthesised for a default group from its MAC. */
  viaDefault?: boolean;
  /** Lowercase sha256 of its TPM's endorsement key, when it is enrolled by its TPM. */
  tpmEkSha256?: string;
}

export interface Catalog {
  file: ProfilesFile;
  machines: Machine[];
  byName: Map<string, Machine>;
  byMac: Map<string, Machine>;
  byUuid: Map<string, Machine>;
  byHostname: Map<string, Machine>;
  defaultGroup?: GroupSpec;
}

export const MAC_RE = /^[0-9a-f]{2}(?:[:-][0-9a-f]{2}){5}$/i;
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * A machine's id in URLs, the history and `hvpxe rearm`: its name, else its hostname (dots allowed),
 * else mac-<hex> or uuid-<uuid>. Never starts with a dot and holds no slash: it is a file name too.
 */
export const MACHINE_NAME_RE = /^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$/;

/**
 * SMBIOS UUIDs that identify no machine: all zeros ("not present") and all ones ("not set", SMBIOS
 * 3.x 7.2.1), and the placeholder many white-box firmwares ship on every board (AMI's default).
 * A machine reporting one of these could be any machine.
 */
export const UNIDENTIFYING_UUIDS: ReadonlySet<string> = new Set([
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '03000200-0400-0500-0006-000700080009',
]);

/** Canonical MAC (lowercase, colons), or undefined when the text is not a MAC. */
export function normaliseMac(mac: string | undefined | null): string | undefined {
  if (!mac) return undefined;
  const m = mac.trim();
  return MAC_RE.test(m) ? m.toLowerCase().replace(/-/g, ':') : undefined;
}

export function normaliseUuid(uuid: string | undefined | null): string | undefined {
  if (!uuid) return undefined;
  const u = uuid.trim().toLowerCase();
  return UUID_RE.test(u) && !UNIDENTIFYING_UUIDS.has(u) ? u : undefined;
}

export function macHex(mac: string): string {
  return mac.replace(/[:-]/g, '').toLowerCase();
}

/** The id a default-group machine gets: `<group>-<mac hex>`. */
export function defaultMachineName(group: string, mac: string): string {
  return `${group}-${macHex(mac)}`;
}

type SchemaCheck = ((v: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string; params?: unknown }> | null };
let schemaCheck: SchemaCheck | undefined;

function compileSchema(): SchemaCheck {
  if (schemaCheck) return schemaCheck;
  const require = createRequire(import.meta.url);
  const Ajv = require('ajv') as typeof import('ajv').default;
  const addFormats = require('ajv-formats') as typeof import('ajv-formats').default;
  // tsconfig copies schemas/*.json into dist/, so the same relative path works from source and build.
  const schema = require('../schemas/pxe-profiles.schema.json') as object;
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  schemaCheck = ajv.compile(schema) as SchemaCheck;
  return schemaCheck;
}

function problem(source: string, messages: string[]): HvError {
  return new HvError(`${source}: ${messages.length} problem${messages.length === 1 ? '' : 's'}:\n${messages.map((m) => `  - ${m}`).join('\n')}`, {
    where: source,
    hint: 'fix profiles.yaml (schema: schemas/pxe-profiles.schema.json, guide: docs/pxe.md)',
    exitCode: ExitCode.checkFailed,
  });
}

/** A JSON pointer's segments as the yaml document addresses them (array indexes as numbers). */
function pointerSegments(pointer: string): Array<string | number> {
  return pointer.split('/').slice(1).map((s) => (/^\d+$/.test(s) ? Number(s) : s.replace(/~1/g, '/').replace(/~0/g, '~')));
}

/** What an error's params add to its message: the unknown key, or the value given and the values allowed. */
function paramsNote(params: unknown, instancePath: string, doc: ReturnType<typeof parseDocument>): string {
  const p = (params ?? {}) as { additionalProperty?: string; allowedValues?: unknown[] };
  if (p.additionalProperty !== undefined) return ` '${p.additionalProperty}'`;
  if (p.allowedValues) {
    return ` (${JSON.stringify(doc.getIn(pointerSegments(instancePath)))} given; one of ${p.allowedValues.map((v) => JSON.stringify(v)).join(', ')})`;
  }
  return '';
}

/** Parses and checks profiles.yaml text; throws HvError listing every problem with its line. */
export async function parseProfiles(text: string, source = 'profiles.yaml'): Promise<ProfilesFile> {
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) throw problem(source, doc.errors.map((e) => `line ${e.linePos?.[0]?.line ?? '?'}: ${e.message.split('\n')[0]}`));
  const raw = doc.toJS() as unknown;
  const check = compileSchema();
  if (!check(raw)) {
    const lineOf = (p: string): string => {
      const node = doc.getIn(pointerSegments(p), true) as { range?: [number, number] } | undefined;
      if (!node?.range) return '';
      return ` (line ${text.slice(0, node.range[0]).split('\n').length})`;
    };
    throw problem(
      source,
      (check.errors ?? []).map((e) => `${e.instancePath || '/'}${lineOf(e.instancePath)}: ${e.message}${paramsNote(e.params, e.instancePath, doc)}`),
    );
  }
  const file = raw as ProfilesFile;
  const errors: string[] = [];
  for (const [name, p] of Object.entries(file.profiles)) {
    for (const ref of ['kernel', 'initrd', 'rootfs', 'iso'] as const) {
      const a = p[ref];
      if (a !== undefined && !file.artifacts[a]) errors.push(`profiles.${name}.${ref}: unknown artifact '${a}' (artifacts: ${Object.keys(file.artifacts).join(', ')})`);
    }
  }
  const defaults = file.groups.filter((g) => g.default);
  if (defaults.length > 1) errors.push(`groups: only one group may be the default (found ${defaults.map((g) => g.name).join(', ')})`);
  const groupNames = new Set<string>();
  for (const g of file.groups) {
    if (groupNames.has(g.name)) errors.push(`groups: duplicate group name '${g.name}'`);
    groupNames.add(g.name);
    if (!file.profiles[g.profile]) errors.push(`groups.${g.name}.profile: unknown profile '${g.profile}'`);
    if (g.fleet && g.default) errors.push(`groups.${g.name}: a fleet group cannot be the default group (the create node must be a known machine)`);
    if (g.fleet && (g.machines ?? []).length === 0) errors.push(`groups.${g.name}.fleet: a fleet needs machines (the first one creates the cluster)`);
  }
  if (errors.length) throw problem(source, errors);
  return file;
}

export async function readProfiles(file: string): Promise<ProfilesFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new HvError(`cannot read profiles file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, {
      where: file,
      hint: "create one with 'hvpxe init DIR'",
    });
  }
  return parseProfiles(text, file);
}

/** Builds the machine catalogue; throws HvError on duplicate names, MACs, UUIDs or hostnames. */
export function buildCatalog(file: ProfilesFile, source = 'profiles.yaml'): Catalog {
  const cat: Catalog = { file, machines: [], byName: new Map(), byMac: new Map(), byUuid: new Map(), byHostname: new Map() };
  const byEk = new Map<string, Machine>();
  const errors: string[] = [];
  for (const g of file.groups) {
    if (g.default) cat.defaultGroup = g;
    (g.machines ?? []).forEach((spec, i) => {
      const mac = normaliseMac(spec.mac);
      const uuid = normaliseUuid(spec.uuid);
      const name = spec.name ?? spec.hostname ?? (mac ? `mac-${macHex(mac)}` : `uuid-${uuid}`);
      const tpmEkSha256 = spec.tpm_ek_sha256?.toLowerCase();
      const m: Machine = { name, group: g.name, profile: g.profile, mac, uuid, hostname: spec.hostname, spec, fleetIndex: g.fleet ? i : undefined, ...(tpmEkSha256 ? { tpmEkSha256 } : {}) };
      const where = `groups.${g.name}.machines[${i}]`;
      if (spec.uuid && !uuid) errors.push(`${where}.uuid: ${spec.uuid} identifies no machine (firmware reports it when no UUID is set, or on every board of a model): use mac:`);
      const claim = <K>(map: Map<K, Machine>, key: K | undefined, what: string): void => {
        if (key === undefined) return;
        const other = map.get(key);
        if (other) errors.push(`${where}: machines '${other.name}' (group ${other.group}) and '${name}' (group ${g.name}) have the same ${what} ${String(key)}`);
        else map.set(key, m);
      };
      claim(cat.byName, name, 'name');
      claim(cat.byMac, mac, 'MAC');
      claim(cat.byUuid, uuid, 'UUID');
      claim(cat.byHostname, spec.hostname, 'hostname');
      claim(byEk, tpmEkSha256, 'TPM endorsement key');
      if (spec.ip && !(spec.gateway && spec.dns?.length)) errors.push(`${where}: a static ip needs gateway and dns`);
      cat.machines.push(m);
    });
  }
  if (cat.defaultGroup) {
    for (const m of cat.machines) {
      if (m.name.startsWith(`${cat.defaultGroup.name}-`)) errors.push(`machine name '${m.name}' collides with the default group's generated names (${cat.defaultGroup.name}-<mac>)`);
    }
  }
  if (errors.length) throw problem(source, errors);
  return cat;
}

export interface MatchQuery {
  mac?: string;
  uuid?: string;
  hostname?: string;
}
export type MatchResult = { machine: Machine; by: 'mac' | 'uuid' | 'hostname' | 'default' } | undefined;

/** Finds the machine for a booting client: MAC, then SMBIOS UUID, then hostname, then the default group. Pure. */
export function matchMachine(cat: Catalog, q: MatchQuery): MatchResult {
  const mac = normaliseMac(q.mac);
  const uuid = normaliseUuid(q.uuid);
  if (mac && cat.byMac.has(mac)) return { machine: cat.byMac.get(mac)!, by: 'mac' };
  if (uuid && cat.byUuid.has(uuid)) return { machine: cat.byUuid.get(uuid)!, by: 'uuid' };
  // Only machines declared by hostname alone match by hostname: anyone can claim a DHCP hostname,
  // and a hostname must not hand out the script (and so the config URL) of a MAC- or UUID-bound machine.
  const host = q.hostname?.trim().toLowerCase();
  const byHost = host ? cat.byHostname.get(host) : undefined;
  if (byHost && !byHost.mac && !byHost.uuid) return { machine: byHost, by: 'hostname' };
  if (cat.defaultGroup && mac) return { machine: defaultMachine(cat.defaultGroup, mac), by: 'default' };
  return undefined;
}

export function defaultMachine(g: GroupSpec, mac: string): Machine {
  return { name: defaultMachineName(g.name, mac), group: g.name, profile: g.profile, mac, spec: { mac }, viaDefault: true };
}

/** Looks a machine up by the id used in /ipxe/<machine> and /config/<machine>.yaml. */
export function machineByName(cat: Catalog, name: string): Machine | undefined {
  const m = cat.byName.get(name);
  if (m) return m;
  const g = cat.defaultGroup;
  if (g && name.startsWith(`${g.name}-`)) {
    const hex = name.slice(g.name.length + 1);
    if (/^[0-9a-f]{12}$/.test(hex)) return defaultMachine(g, hex.match(/../g)!.join(':'));
  }
  return undefined;
}

/**
 * Whether a request proves it comes from `m`: its MAC or SMBIOS UUID must be the machine's (for a
 * machine declared by hostname alone, its DHCP hostname). A machine's config (token, password) is
 * only served to a request that names it this way.
 */
export function requestIdentifies(m: Machine, q: MatchQuery): boolean {
  const mac = normaliseMac(q.mac);
  const uuid = normaliseUuid(q.uuid);
  if (!m.mac && !m.uuid) return !!m.hostname && q.hostname?.trim().toLowerCase() === m.hostname;
  return (mac !== undefined && mac === m.mac) || (uuid !== undefined && uuid === m.uuid);
}
