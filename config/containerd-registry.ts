/**
 * Harvester's `containerd-registry` system setting: JSON decoded by Go into wharfie's
 * `registries.Registry` (rancher/wharfie pkg/registries), and Go's JSON matching is
 * case-insensitive, so both the docs' spelling (`Mirrors`/`Endpoints`/`Configs`/`Auth`/`TLS`/
 * `InsecureSkipVerify`) and wharfie's tags (`mirrors`/`endpoint`/`rewrite`/`ca_file`/
 * `insecure_skip_verify`) are accepted. Stricter than Go's decoder where accepting would give a
 * node that pulls without its mirror (an unknown key), or a registries.yaml RKE2 refuses.
 */
import { HvError, ExitCode } from '../lib/errors.js';
import { setOwn } from '../lib/own-keys.js';

export interface RegistryMirror {
  endpoint: string[];
  rewrite?: Record<string, string>;
}
export interface RegistryAuth {
  username?: string;
  password?: string;
  auth?: string;
  identity_token?: string;
}
export interface RegistryTls {
  ca_file?: string;
  cert_file?: string;
  key_file?: string;
  insecure_skip_verify?: boolean;
}
/** The RKE2 registries.yaml document (schemas/registries.schema.json). */
export interface RegistriesDocument {
  mirrors: Record<string, RegistryMirror>;
  configs: Record<string, { auth?: RegistryAuth; tls?: RegistryTls }>;
}

const WHERE = 'system_settings.containerd-registry';
/** Harvester's message when its JSON decoder rejects the setting (harvester/harvester-installer pkg/config/validator.go). */
export const CONTAINERD_REGISTRY_DECODE_MESSAGE = 'could not parse containerd-registry as JSON';

/** Why a setting is refused: `decode` when Go's JSON decoder (so Harvester itself) rejects it too. */
class RegistryProblem extends Error {
  constructor(
    readonly detail: string,
    readonly decode: boolean,
    readonly hint?: string,
  ) {
    super(detail);
  }
}

/** What Go's decoder would reject as well (bad JSON, a value of the wrong type). */
function failDecode(detail: string, hint?: string): never {
  throw new RegistryProblem(detail, true, hint);
}

/** Our own checks beyond Harvester's (unknown keys, endpoints, patterns, pairs that go together). */
function fail(detail: string, hint?: string): never {
  throw new RegistryProblem(detail, false, hint);
}

/** Keys compared the way Go's encoding/json does for a field: case-insensitively; `_` ignored too (Endpoints vs endpoint handled by aliases). */
function norm(key: string): string {
  return key.toLowerCase().replace(/_/g, '');
}

function pick(obj: Record<string, unknown>, path: string, ...names: string[]): unknown {
  const wanted = new Set(names.map(norm));
  let found: unknown;
  for (const [k, v] of Object.entries(obj)) {
    if (!wanted.has(norm(k))) continue;
    if (found !== undefined) fail(`${path}: more than one spelling of "${names[0]}" given`);
    found = v;
  }
  return found;
}

function checkKnown(obj: Record<string, unknown>, path: string, known: string[]): void {
  const ok = new Set(known.map(norm));
  for (const k of Object.keys(obj)) {
    if (!ok.has(norm(k))) fail(`${path}: unknown key "${k}"`, `allowed: ${known.join(', ')}`);
  }
}

function asObject(v: unknown, path: string): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) failDecode(`${path} must be an object`);
  return v as Record<string, unknown>;
}

function asString(v: unknown, path: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') failDecode(`${path} must be a string`);
  return v;
}

/** The object under `name` in `parent` with only the `known` keys; undefined when absent or null. */
function section(parent: Record<string, unknown>, path: string, name: string, known: string[]): Record<string, unknown> | undefined {
  const raw = pick(parent, path, name);
  if (raw === undefined || raw === null) return undefined;
  const o = asObject(raw, `${path}.${name}`);
  checkKnown(o, `${path}.${name}`, known);
  return o;
}

/** The string fields of `obj` named in `fields` (setting key -> registries.yaml key), each checked; empty ones left out. */
function stringFields<K extends string>(obj: Record<string, unknown>, path: string, fields: Record<string, K>): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const [from, to] of Object.entries(fields)) {
    const v = asString(pick(obj, path, from), `${path}.${from}`);
    if (v !== undefined) out[to] = v;
  }
  return out;
}

/**
 * Parses the setting (JSON text or an already-decoded object) into the registries.yaml document;
 * throws HvError. The one parser: `hvinstall validate` (containerdRegistryProblem), the renderer and
 * the agent's registries guard all go through it, so a setting validate accepts always renders.
 */
export function parseContainerdRegistry(setting: string | object): RegistriesDocument {
  try {
    return decodeRegistry(setting);
  } catch (err) {
    if (!(err instanceof RegistryProblem)) throw err;
    const message = err.decode ? `${CONTAINERD_REGISTRY_DECODE_MESSAGE}: ${err.detail}` : err.detail;
    throw new HvError(message, { where: WHERE, hint: err.hint, exitCode: ExitCode.checkFailed });
  }
}

/**
 * The finding `hvinstall validate` reports for a setting, or undefined when it renders. Where
 * Harvester's decoder rejects it, Harvester's message with the reason as the hint.
 */
export function containerdRegistryProblem(setting: string): { message: string; hint?: string } | undefined {
  try {
    decodeRegistry(setting);
    return undefined;
  } catch (err) {
    if (!(err instanceof RegistryProblem)) throw err;
    return err.decode ? { message: CONTAINERD_REGISTRY_DECODE_MESSAGE, hint: err.detail } : { message: err.detail, hint: err.hint };
  }
}

const JSON_EXAMPLE = 'the setting is a JSON string, e.g. {"Mirrors":{"docker.io":{"Endpoints":["https://mirror.example"]}}}';

function decodeRegistry(setting: string | object): RegistriesDocument {
  let raw: unknown = setting;
  if (typeof setting === 'string') {
    try {
      raw = JSON.parse(setting);
    } catch (err) {
      failDecode(`not JSON: ${(err as Error).message}`, JSON_EXAMPLE);
    }
  }
  const top = asObject(raw, 'containerd-registry');
  checkKnown(top, 'containerd-registry', ['Mirrors', 'Configs']);
  const doc: RegistriesDocument = { mirrors: {}, configs: {} };

  const mirrors = asObject(pick(top, 'containerd-registry', 'Mirrors'), 'Mirrors');
  for (const host of Object.keys(mirrors).sort()) {
    const p = `Mirrors.${host}`;
    const m = asObject(mirrors[host], p);
    checkKnown(m, p, ['Endpoints', 'Endpoint', 'Rewrites', 'Rewrite']);
    const endpoints = pick(m, p, 'Endpoints', 'Endpoint') ?? [];
    if (!Array.isArray(endpoints) || endpoints.some((e) => typeof e !== 'string')) failDecode(`${p}.Endpoints must be a list of URLs`);
    for (const e of endpoints as string[]) {
      if (!/^https?:\/\/[^\s/]+/.test(e)) fail(`${p}.Endpoints: "${e}" is not an http(s) URL`, 'write endpoints as https://host[:port][/path]');
    }
    const mirror: RegistryMirror = { endpoint: [...(endpoints as string[])] };
    const rewrites = asObject(pick(m, p, 'Rewrites', 'Rewrite'), `${p}.Rewrites`);
    const rewriteKeys = Object.keys(rewrites).sort();
    if (rewriteKeys.length) {
      mirror.rewrite = {};
      for (const k of rewriteKeys) {
        const v = rewrites[k];
        if (typeof v !== 'string') failDecode(`${p}.Rewrites["${k}"] must be a string`);
        try {
          new RegExp(k);
        } catch {
          fail(`${p}.Rewrites: "${k}" is not a valid regular expression`);
        }
        setOwn(mirror.rewrite, k, v);
      }
    }
    setOwn(doc.mirrors, host, mirror);
  }

  const configs = asObject(pick(top, 'containerd-registry', 'Configs'), 'Configs');
  for (const host of Object.keys(configs).sort()) {
    const p = `Configs.${host}`;
    const c = asObject(configs[host], p);
    checkKnown(c, p, ['Auth', 'TLS']);
    const out: RegistriesDocument['configs'][string] = {};
    const a = section(c, p, 'Auth', ['Username', 'Password', 'Auth', 'IdentityToken']);
    if (a) {
      const auth: RegistryAuth = stringFields(a, `${p}.Auth`, { Username: 'username', Password: 'password', Auth: 'auth', IdentityToken: 'identity_token' });
      if (auth.password !== undefined && auth.username === undefined) fail(`${p}.Auth: a Password needs a Username`);
      if (Object.keys(auth).length) out.auth = auth;
    }
    const t = section(c, p, 'TLS', ['CAFile', 'CertFile', 'KeyFile', 'InsecureSkipVerify']);
    if (t) {
      const tls: RegistryTls = stringFields(t, `${p}.TLS`, { CAFile: 'ca_file', CertFile: 'cert_file', KeyFile: 'key_file' });
      if ((tls.cert_file === undefined) !== (tls.key_file === undefined)) fail(`${p}.TLS: CertFile and KeyFile go together`, 'give both for a client certificate, or neither');
      const insecure = pick(t, `${p}.TLS`, 'InsecureSkipVerify');
      if (insecure !== undefined && insecure !== null) {
        if (typeof insecure !== 'boolean') failDecode(`${p}.TLS.InsecureSkipVerify must be true or false`);
        if (insecure) tls.insecure_skip_verify = true;
      }
      if (Object.keys(tls).length) out.tls = tls;
    }
    setOwn(doc.configs, host, out);
  }
  return doc;
}

/** True when the setting carries credentials (so registries.yaml must be 0600). */
export function registriesHoldCredentials(doc: RegistriesDocument): boolean {
  return Object.values(doc.configs).some((c) => c.auth && Object.keys(c.auth).length > 0);
}

/** Every credential string in the document (for redaction and leak tests). */
export function registryCredentials(doc: RegistriesDocument): string[] {
  const out: string[] = [];
  for (const c of Object.values(doc.configs)) {
    for (const v of [c.auth?.password, c.auth?.auth, c.auth?.identity_token]) if (v) out.push(v);
  }
  return out;
}
