/**
 * Renders a machine's Harvester config from its profile's template, its group (fleet shorthand,
 * values) and its own entry (hostname, static IP, role, config overrides). Pure.
 *
 * Templates are written in the user's spelling (snake_case as in Harvester's docs, or camelCase);
 * every key we set replaces all spellings of that key, so the fuzzy-name loader never sees two.
 */
import { ownValue, setOwn } from '../lib/own-keys.js';
import { withBootCredential } from '../config/hvpxe-protocol.js';
import type { Catalog, Machine, ProfilesFile } from './profiles.js';

export class RenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RenderError';
  }
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function snake(camel: string): string {
  return camel.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** Every spelling Harvester's loader accepts for a canonical camelCase key. */
function spellings(camel: string): string[] {
  return [...new Set([camel, snake(camel), camel.toLowerCase()])];
}

function findKey(o: Obj, camel: string): string | undefined {
  return spellings(camel).find((k) => Object.hasOwn(o, k));
}

function getIn(o: Obj, path: string[]): unknown {
  let cur: unknown = o;
  for (const p of path) {
    if (!isObj(cur)) return undefined;
    const k = findKey(cur, p);
    if (k === undefined) return undefined;
    cur = cur[k];
  }
  return cur;
}

/** Sets a value at a canonical path, using the spelling already present or snake_case. */
function setIn(o: Obj, path: string[], value: unknown): void {
  let cur = o;
  for (const [i, p] of path.entries()) {
    const k = findKey(cur, p) ?? snake(p);
    for (const other of spellings(p)) if (other !== k) delete cur[other];
    if (i === path.length - 1) {
      if (value === undefined) delete cur[k];
      else setOwn(cur, k, value);
      return;
    }
    if (!isObj(ownValue(cur, k))) setOwn(cur, k, {});
    cur = cur[k] as Obj;
  }
}

/** Keys of profiles.yaml are data: own properties only, so `__proto__` is a key (the validator reports it), never a prototype. */
function deepMerge(base: Obj, over: Obj): Obj {
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const cur = ownValue(out, k);
    setOwn(out, k, isObj(v) && isObj(cur) ? deepMerge(cur, v) : v);
  }
  return out;
}

const PLACEHOLDER = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

type Vars = Record<string, string | Obj>;
const WHOLE_PLACEHOLDER = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

function substitute(value: unknown, vars: Vars, where: string): unknown {
  if (typeof value === 'string') {
    // A mapping value (a disk rule) stands for the whole value it is written as.
    const whole = WHOLE_PLACEHOLDER.exec(value)?.[1];
    if (whole !== undefined && isObj(ownValue(vars, whole))) return structuredClone(vars[whole]);
    return value.replace(PLACEHOLDER, (all, name: string | undefined) => {
      if (name === undefined) return '$';
      if (!Object.hasOwn(vars, name)) throw new RenderError(`${where}: unknown placeholder \${${name}} (known: ${Object.keys(vars).sort().join(', ')})`);
      const v = vars[name]!;
      if (isObj(v)) throw new RenderError(`${where}: \${${name}} is a mapping (a disk rule): write it as the whole value, e.g. device_selector: \${${name}}`);
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substitute(v, vars, `${where}[${i}]`));
  if (isObj(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars, where ? `${where}.${k}` : k)]));
  return value;
}

function prefixToMask(prefix: number): string {
  const bits = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return [24, 16, 8, 0].map((s) => (bits >>> s) & 0xff).join('.');
}

export function artifactUrl(serverUrl: string, file: ProfilesFile, name: string): string {
  const a = file.artifacts[name];
  return `${serverUrl}/artifacts/${a.path.split('/').map(encodeURIComponent).join('/')}`;
}

/** The per-machine query that identifies the machine to a static server (its MAC, else its UUID, else its hostname). */
export function identityQuery(m: Machine): string {
  if (m.mac) return `mac=${m.mac}`;
  if (m.uuid) return `uuid=${m.uuid}`;
  if (m.hostname) return `hostname=${encodeURIComponent(m.hostname)}`;
  return '';
}

/**
 * The machine's config URL: with the boot credential of the script that carries it (hvpxe serve), or
 * the machine's identity for a static server (render-ipxe).
 */
export function configUrl(serverUrl: string, m: Machine, credential?: string): string {
  const base = `${serverUrl}/config/${m.name}.yaml`;
  if (credential) return withBootCredential(base, credential);
  const q = identityQuery(m);
  return `${base}${q ? `?${q}` : ''}`;
}

/** Where the machine's install events go: hvpxe's /events/<machine>, with the boot credential when there is one. */
export function eventsUrl(serverUrl: string, m: Machine, credential?: string): string {
  const base = `${serverUrl}/events/${m.name}`;
  return credential ? withBootCredential(base, credential) : base;
}

/** Where an enrolled machine proves its TPM for this boot (hvpxe's /attest/<machine>). */
export function attestUrl(serverUrl: string, m: Machine, credential: string): string {
  return withBootCredential(`${serverUrl}/attest/${m.name}`, credential);
}

/** The webhooks that report install progress back to hvpxe's /events/<machine>. */
export function progressWebhooks(serverUrl: string, m: Machine, credential?: string): Obj[] {
  return (['STARTED', 'SUCCEEDED', 'FAILED'] as const).map((event) => ({
    event,
    method: 'POST',
    url: eventsUrl(serverUrl, m, credential),
    headers: { 'Content-Type': ['application/json'] },
    payload: `{"event":"${event}","hostname":"{{.Hostname}}","mac":"{{.MACAddr}}","ipv4":"{{.IPAddrV4}}","ipv6":"{{.IPAddrV6}}"}`,
  }));
}

/**
 * The config a machine gets from /config/<machine>.yaml (throws RenderError on a bad template).
 * `credential`: the boot credential its webhooks report with.
 */
export function renderMachineConfig(cat: Catalog, m: Machine, serverUrl: string, credential?: string): Obj {
  const file = cat.file;
  const profile = file.profiles[m.profile];
  const group = file.groups.find((g) => g.name === m.group)!;
  const spec = m.spec;
  const ip = spec.ip?.split('/')[0];
  const vars: Vars = {};
  for (const [k, v] of Object.entries({ ...group.values, ...spec.values })) setOwn(vars, k, isObj(v) ? v : String(v));
  Object.assign(vars, {
    machine: m.name,
    hostname: spec.hostname ?? '',
    mac: m.mac ?? '',
    uuid: m.uuid ?? '',
    ip: ip ?? '',
    vip: group.fleet?.vip ?? '',
    server_url: serverUrl,
  });
  const where = `profiles.${m.profile}.config`;
  const cfg = substitute(structuredClone(profile.config), vars, '') as Obj;

  if (getIn(cfg, ['schemeVersion']) === undefined) setIn(cfg, ['schemeVersion'], 1);
  if (spec.hostname) setIn(cfg, ['os', 'hostname'], spec.hostname);
  if (spec.role) setIn(cfg, ['install', 'role'], spec.role);
  if (group.fleet && m.fleetIndex !== undefined) {
    if (m.fleetIndex === 0) {
      setIn(cfg, ['install', 'mode'], 'create');
      setIn(cfg, ['serverUrl'], undefined);
      setIn(cfg, ['install', 'vip'], group.fleet.vip);
      setIn(cfg, ['install', 'vipMode'], group.fleet.vip_mode ?? 'static');
      if (group.fleet.vip_hw_addr) setIn(cfg, ['install', 'vipHwAddr'], group.fleet.vip_hw_addr);
    } else {
      setIn(cfg, ['install', 'mode'], 'join');
      setIn(cfg, ['serverUrl'], `https://${group.fleet.vip}:443`);
      for (const k of ['vip', 'vipMode', 'vipHwAddr']) setIn(cfg, ['install', k], undefined);
    }
  }
  const ifaces = getIn(cfg, ['install', 'managementInterface', 'interfaces']);
  if (m.mac && (!Array.isArray(ifaces) || ifaces.length === 0)) {
    setIn(cfg, ['install', 'managementInterface', 'interfaces'], [{ hwAddr: m.mac }]);
  }
  if (spec.ip) {
    const prefix = Number(spec.ip.split('/')[1]);
    if (!(prefix >= 1 && prefix <= 32)) throw new RenderError(`machine ${m.name}: ip ${spec.ip} has an invalid prefix length`);
    setIn(cfg, ['install', 'managementInterface', 'method'], 'static');
    setIn(cfg, ['install', 'managementInterface', 'ip'], ip);
    setIn(cfg, ['install', 'managementInterface', 'subnetMask'], prefixToMask(prefix));
    setIn(cfg, ['install', 'managementInterface', 'gateway'], spec.gateway);
    setIn(cfg, ['os', 'dnsNameservers'], spec.dns);
  } else if (getIn(cfg, ['install', 'managementInterface', 'method']) === undefined) {
    setIn(cfg, ['install', 'managementInterface', 'method'], 'dhcp');
  }
  if (profile.iso && getIn(cfg, ['install', 'isoUrl']) === undefined) setIn(cfg, ['install', 'isoUrl'], artifactUrl(serverUrl, file, profile.iso));
  if (profile.report_events !== false) {
    const existing = getIn(cfg, ['install', 'webhooks']);
    if (existing !== undefined && !Array.isArray(existing)) throw new RenderError(`${where}.install.webhooks: must be a list`);
    setIn(cfg, ['install', 'webhooks'], [...((existing as unknown[] | undefined) ?? []), ...progressWebhooks(serverUrl, m, credential)]);
  }
  const withGroup = group.config ? deepMerge(cfg, substitute(group.config, vars, '') as Obj) : cfg;
  return spec.config ? deepMerge(withGroup, substitute(spec.config, vars, '') as Obj) : withGroup;
}

/** The config as the installer will see it: automatic mode comes from the kernel command line. */
export function asInstallSees(cfg: Obj): Obj {
  const copy = structuredClone(cfg);
  setIn(copy, ['install', 'automatic'], true);
  return copy;
}
