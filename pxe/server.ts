/**
 * `hvpxe serve`: the HTTP(S) boot server. Routes:
 *   GET /boot.ipxe                  chain script (identifies the machine)
 *   GET /ipxe/auto?mac=&uuid=&…     the matching machine's script, or a clear no-match script
 *   GET /ipxe/<machine>?mac=|uuid=  a named machine's script (the request must identify it)
 *   GET /config/<machine>.yaml?mac=|uuid=   the machine's config (only to that machine)
 *   GET /artifacts/<path>           files under --root, with Range, ETag, If-None-Match, If-Range
 *   GET /healthz, GET /machines     liveness; who fetched what, how far their install got, what they boot
 *   GET /metrics                    Prometheus text format (pxe/metrics.ts)
 *   POST /events/<machine>          install progress (webhooks) from the installer, ≤ 64 KiB
 * With --tftp, the same over TFTP for the Secure Boot chain (grub.ts): files under --root (shim,
 * grub, kernel, initrd), grub/grub.cfg (identifies the machine) and grub/auto?mac=…&uuid=… (its script).
 * A machine that reported a finished install gets a local-boot script until it is re-armed
 * (boot-decision.ts); with --state-dir the machine history survives a restart (history.ts).
 */
import http from 'node:http';
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../lib/logger.js';
import { HvError, ExitCode } from '../lib/errors.js';
import { bootChainOf, normaliseMac, normaliseUuid, matchMachine, machineByName, requestIdentifies, type Machine, type MatchQuery } from './profiles.js';
import { renderBootScript, renderLocalBootScript, renderMachineScript, renderNoMatchScript, renderUnsupportedArchScript, type Platform } from './ipxe.js';
import {
  GRUB_AUTO,
  GRUB_BOOTSTRAP,
  renderGrubBootstrap,
  renderGrubLocalBootScript,
  renderGrubMachineScript,
  renderGrubNoMatchScript,
  renderGrubUnsupportedArchScript,
  tftpDevice,
} from './grub.js';
import { TftpServer, type TftpSource } from './tftp.js';
import { archServed } from './arch.js';
import { decideBoot, loopOf, reportsSuccess, withLocalBoot, type BootDecision } from './boot-decision.js';
import { HistoryStore, type MachineActivity } from './history.js';
import { renderMachineConfig } from './render-config.js';
import { checkRequestPath, openInsideRoot, type OpenedFile } from './safe-path.js';
import type { FileHandle } from 'node:fs/promises';
import { PROMETHEUS_CONTENT_TYPE } from '../lib/prometheus.js';
import { PxeMetrics } from './metrics.js';
import { loadState, serialiseServedConfig, type ServedState, type Validator } from './state.js';

export interface ServeOptions {
  root: string;
  profilesPath: string;
  host: string;
  port: number;
  /** Base URL machines use; derived from host:port when absent (not allowed for a wildcard host). */
  serverUrl?: string;
  tls?: { certFile: string; keyFile: string };
  log: Logger;
  validate: Validator;
  verifyArtifacts?: boolean;
  /** Where the machine history is kept (machines.json, rearm/); without it the history lives in memory only. */
  stateDir?: string;
  /** Serve TFTP here too (the Secure Boot chain: shim, grub and its scripts, kernel, initrd). */
  tftp?: { host: string; port: number };
}

/** Which boot chain a script is rendered for. */
type Chain = { kind: 'ipxe'; platform?: Platform } | { kind: 'grub' };

export const LIMITS = {
  maxHeaderSize: 16 * 1024,
  maxUrlLength: 4096,
  maxEventBody: 64 * 1024,
  eventsKept: 50,
  machinesTracked: 1000,
  addressesTracked: 4096,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 60_000,
  idleSocketMs: 120_000,
  readChunk: 512 * 1024,
};

const TEXT = 'text/plain; charset=utf-8';

/** What the request log line reports, filled in as the request is handled. */
interface RequestNote {
  status: number;
  bytes: number;
  machine?: string;
  /** The route that answered (its label in /metrics); unset for requests no route took. */
  route?: string;
  /** Set by serveFile before it writes the head (headers given to writeHead are not readable back). */
  fileReply: { status: number; length: number };
}

interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  state: ServedState;
  query: URLSearchParams;
  reply: (code: number, body: string, type?: string, extra?: Record<string, string>) => void;
  note: RequestNote;
}

/** A path, a prefix (ends with `/`: the rest is the parameter) or a pattern (its first group is). */
interface Route {
  path: string | RegExp;
  /** The route's name in /metrics (default: the path). */
  label?: string;
  handle: (c: RequestContext, param: string) => void | Promise<void>;
}

function findRoute(routes: Route[], pathname: string): { route: Route; param: string } | undefined {
  for (const route of routes) {
    const p = route.path;
    if (typeof p !== 'string') {
      const m = p.exec(pathname);
      if (m) return { route, param: m[1] ?? '' };
    } else if (p.endsWith('/') ? pathname.startsWith(p) : pathname === p) {
      return { route, param: pathname.slice(p.length) };
    }
  }
  return undefined;
}

function routeLabel(r: Route): string {
  return r.label ?? String(r.path);
}

function matchQuery(query: URLSearchParams): MatchQuery {
  return { mac: query.get('mac') ?? undefined, uuid: query.get('uuid') ?? undefined, hostname: query.get('hostname') ?? undefined };
}

function platformOf(query: URLSearchParams): Platform | undefined {
  const p = query.get('platform');
  return p === 'pcbios' || p === 'efi' ? p : undefined;
}

function send(res: http.ServerResponse, status: number, body: string, type = TEXT, extra: Record<string, string> = {}): number {
  const buf = Buffer.from(body);
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': String(buf.length), ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : buf);
  return buf.length;
}

/**
 * The Content-Type of a file under /artifacts/: the media types UEFI defines for HTTP Boot where
 * the name says what the file is (an EFI binary, an ISO the firmware mounts as a RAM disk; edk2's
 * NetworkPkg HttpBootDxe reads these first, the name's extension only when they are absent), else
 * application/octet-stream. `.img` stays octet-stream: initrds are named so too.
 */
export function artifactContentType(name: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  if (ext === 'efi') return 'application/efi';
  if (ext === 'iso') return 'application/vnd.efi-iso';
  return 'application/octet-stream';
}

function etagOf(st: { mtimeMs: number; size: number; ino: number }): string {
  return `"${Math.floor(st.mtimeMs).toString(16)}-${st.size.toString(16)}-${st.ino.toString(16)}"`;
}

function etagMatches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

/** Parses one `bytes=` range against a size. undefined: ignore the header (serve 200); 'unsatisfiable': 416. */
export function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) return undefined; // multiple ranges or another unit: a 200 with the whole body is allowed
  const [, a, b] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Number(b);
    if (n === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (b !== '' && Number(b) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

export class PxeServer {
  private server?: http.Server;
  private state?: ServedState;
  private readonly activity = new Map<string, MachineActivity>();
  private readonly byAddress = new Map<string, string>();
  private reloads = 0;
  readonly metrics = new PxeMetrics();
  private lastReloadError?: string;
  private readonly history?: HistoryStore;
  private historyWarning?: string;
  private tftpServer?: TftpServer;
  url = '';

  constructor(private readonly opts: ServeOptions) {
    if (opts.stateDir) this.history = new HistoryStore(opts.stateDir, opts.log);
  }

  /** Where TFTP is served (with --tftp), once started. */
  get tftpAddress(): { address: string; port: number } | undefined {
    return this.tftpServer?.address;
  }

  get current(): ServedState | undefined {
    return this.state;
  }

  async start(): Promise<string> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => {
        this.opts.log.error('request failed', { path: (req.url ?? '').split('?')[0], error: (err as Error).message });
        if (!res.headersSent) send(res, 500, 'internal error\n');
        else res.destroy();
      });
    };
    const common = { maxHeaderSize: LIMITS.maxHeaderSize, requestTimeout: LIMITS.requestTimeoutMs, headersTimeout: LIMITS.headersTimeoutMs };
    if (this.opts.tls) {
      const [cert, key] = await Promise.all([readFile(this.opts.tls.certFile), readFile(this.opts.tls.keyFile)]);
      this.server = https.createServer({ ...common, cert, key }, handler);
    } else {
      this.server = http.createServer(common, handler);
    }
    this.server.keepAliveTimeout = 5_000;
    this.server.timeout = LIMITS.idleSocketMs;
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    try {
      await this.restoreHistory();
    } catch (err) {
      await this.close();
      throw err;
    }
    const addr = server.address() as AddressInfo;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    this.url = this.opts.serverUrl?.replace(/\/+$/, '') ?? `${this.opts.tls ? 'https' : 'http'}://${host}:${addr.port}`;
    try {
      this.state = await this.build();
    } catch (err) {
      await this.close();
      throw err;
    }
    if (this.opts.tftp) {
      this.tftpServer = new TftpServer({
        ...this.opts.tftp,
        log: this.opts.log,
        resolve: (name, client) => this.tftpResolve(name, client),
        done: (e) => this.opts.log.info('tftp', { ...e, filename: e.filename.replace(/^\/+/, '').slice(0, 200), machine: this.byAddress.get(e.client) }),
      });
      try {
        await this.tftpServer.start();
      } catch (err) {
        await this.close();
        throw new HvError(`cannot serve TFTP on ${this.opts.tftp.host}:${this.opts.tftp.port}: ${(err as Error).message}`, {
          where: '--tftp',
          hint: 'port 69 needs root or CAP_NET_BIND_SERVICE, and nothing else (another TFTP server, dnsmasq with enable-tftp) may hold it on that address',
          exitCode: ExitCode.usage,
        });
      }
    }
    this.opts.log.info('serving', { url: this.url, tftp: this.tftpServer?.address, machines: this.state.catalog.machines.length, default: this.state.catalog.defaultGroup?.name });
    return this.url;
  }

  private async build(): Promise<ServedState> {
    const state = await loadState({
      root: this.opts.root,
      profilesPath: this.opts.profilesPath,
      serverUrl: this.url,
      validate: this.opts.validate,
      verifyArtifacts: this.opts.verifyArtifacts,
    });
    const grub = Object.entries(state.catalog.file.profiles).filter(([, p]) => bootChainOf(p) === 'grub-signed').map(([n]) => n);
    if (grub.length > 0 && !this.opts.tftp) {
      throw new HvError(`profile${grub.length === 1 ? '' : 's'} ${grub.join(', ')} select${grub.length === 1 ? 's' : ''} boot: grub-signed, whose signed grub fetches everything over TFTP: hvpxe serve needs --tftp ADDR[:PORT]`, {
        where: this.opts.profilesPath,
        hint: 'pass --tftp 0.0.0.0:69 (docs/pxe.md, Secure Boot)',
        exitCode: ExitCode.usage,
      });
    }
    return state;
  }

  /** Re-reads profiles.yaml and the artifacts; keeps serving the old state when the new one is invalid. */
  async reload(): Promise<boolean> {
    try {
      const next = await this.build();
      this.state = next;
      this.reloads++;
      this.lastReloadError = undefined;
      this.metrics.reload(true);
      this.opts.log.info('reloaded', { machines: next.catalog.machines.length });
      return true;
    } catch (err) {
      this.lastReloadError = (err as Error).message;
      this.metrics.reload(false);
      this.opts.log.error('reload refused; still serving the previous profiles', { error: (err as Error).message });
      return false;
    }
  }

  /** Loads the machine history kept in the state directory (a broken file is set aside, with a warning). */
  private async restoreHistory(): Promise<void> {
    if (!this.history) return;
    const loaded = await this.history.load();
    for (const a of loaded.machines) this.activity.set(a.name, a);
    this.historyWarning = loaded.warning;
    this.history.track(() => [...this.activity.values()]);
    const installed = loaded.machines.filter((a) => a.installed).map((a) => a.name);
    this.opts.log.info('machine history restored', { file: this.history.file, machines: loaded.machines.length, installed });
    await this.applyRearms();
  }

  /** Consumes `hvpxe rearm` requests: those machines get the installer again on their next network boot. */
  private async applyRearms(): Promise<void> {
    if (!this.history) return;
    for (const [name, at] of await this.history.rearmRequests()) {
      const a = this.activity.get(name);
      if (a) {
        this.opts.log.warn('machine re-armed: its next network boot installs it again', { machine: name, installedAt: a.installed?.at, requestedAt: at.toISOString() });
        a.installed = undefined;
        a.localBoots = undefined;
        a.rearmedAt = at.toISOString();
        this.history.save();
      } else {
        this.opts.log.warn('re-arm request for a machine with no history: nothing to re-arm', { machine: name });
      }
      await this.history.clearRearm(name);
    }
  }

  private persist(): void {
    this.history?.save();
  }

  /** The machine's script: its disk when it reported a finished install, else the installer. */
  private async bootScript(state: ServedState, m: Machine, a: MachineActivity, chain: Chain, matchedBy?: string): Promise<string> {
    await this.applyRearms();
    const afterInstall = state.catalog.file.profiles[m.profile]?.after_install ?? 'local';
    const d: BootDecision = decideBoot(a, afterInstall, Date.now());
    if (d.kind === 'install') {
      return chain.kind === 'grub' ? renderGrubMachineScript(state.catalog, m, this.url, this.tftpDev(), { matchedBy }) : renderMachineScript(state.catalog, m, this.url, { platform: chain.platform, matchedBy });
    }
    a.localBoots = withLocalBoot(a.localBoots, new Date().toISOString());
    if (d.loop) this.opts.log.warn('machine loops back to the network after a local boot', { machine: m.name, detail: d.loop });
    else this.opts.log.info('serving a local boot to an installed machine', { machine: m.name, installedAt: d.installedAt });
    this.persist();
    return chain.kind === 'grub' ? renderGrubLocalBootScript(m, d) : renderLocalBootScript(m, d, { platform: chain.platform });
  }

  /** What /machines says the machine boots next, and whether it has been looping. */
  private bootOf(a: MachineActivity, state: ServedState): { next: 'install' | 'local'; why: string; localBoots?: number; loop?: string } {
    const d = decideBoot(a, state.catalog.file.profiles[a.profile]?.after_install ?? 'local', Date.now());
    if (d.kind === 'install') return { next: 'install', why: d.why };
    const loop = loopOf(a.localBoots, Date.now());
    return { next: 'local', why: `installed ${d.installedAt} (${d.via}); \`hvpxe rearm ${a.name}\` installs it again`, localBoots: a.localBoots?.length ?? 0, ...(loop ? { loop } : {}) };
  }

  async close(): Promise<void> {
    await this.tftpServer?.close();
    this.tftpServer = undefined;
    await this.history?.flush();
    const s = this.server;
    if (!s) return;
    this.server = undefined;
    await new Promise<void>((r) => {
      s.close(() => r());
      s.closeIdleConnections();
      setTimeout(() => s.closeAllConnections(), 2_000).unref();
    });
  }

  private activityOf(m: Machine): MachineActivity {
    let a = this.activity.get(m.name);
    if (!a) {
      a = { name: m.name, group: m.group, profile: m.profile, mac: m.mac, uuid: m.uuid, hostname: m.hostname, fetched: { artifacts: {} }, events: [] };
      // Default-group machines are made up from any MAC a client sends: keep only the newest.
      if (m.viaDefault && this.activity.size >= LIMITS.machinesTracked) {
        const oldest = [...this.activity.values()].find((x) => x.name !== m.name && !this.state?.catalog.byName.has(x.name));
        if (oldest) this.activity.delete(oldest.name);
      }
      this.activity.set(m.name, a);
    }
    return a;
  }

  private seen(m: Machine, address: string | undefined): MachineActivity {
    const a = this.activityOf(m);
    a.lastSeen = new Date().toISOString();
    a.lastAddress = address;
    if (address) {
      this.byAddress.delete(address);
      this.byAddress.set(address, m.name);
      if (this.byAddress.size > LIMITS.addressesTracked) this.byAddress.delete(this.byAddress.keys().next().value!);
    }
    this.persist();
    return a;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const started = Date.now();
    const rawUrl = req.url ?? '/';
    const note: RequestNote = { status: 0, bytes: 0, fileReply: { status: 0, length: 0 } };
    // 'close' comes for every response, finished or cut off; artifact bytes are known only afterwards.
    res.on('close', () => {
      const complete = res.writableFinished;
      const status = note.status || note.fileReply.status || res.statusCode;
      const bytes = note.bytes || (complete && req.method !== 'HEAD' ? note.fileReply.length : undefined);
      this.metrics.request(note.route ?? 'other', status, bytes ?? 0);
      this.opts.log.info('request', {
        method: req.method,
        path: rawUrl.split('?')[0].slice(0, 200),
        status,
        bytes,
        ...(complete ? {} : { aborted: true }),
        ms: Date.now() - started,
        machine: note.machine,
        client: req.socket.remoteAddress,
      });
    });
    const reply = (code: number, body: string, type?: string, extra?: Record<string, string>): void => {
      note.status = code;
      note.bytes = send(res, code, body, type, extra);
    };
    if (rawUrl.length > LIMITS.maxUrlLength) return reply(414, 'request URI too long\n');
    if (!rawUrl.startsWith('/')) return reply(400, 'bad request\n');
    const qIndex = rawUrl.indexOf('?');
    const pathname = qIndex < 0 ? rawUrl : rawUrl.slice(0, qIndex);
    const query = new URLSearchParams(qIndex < 0 ? '' : rawUrl.slice(qIndex + 1));
    const method = req.method ?? 'GET';
    const state = this.state;
    if (!state) return reply(503, 'hvpxe is starting\n', TEXT, { 'Retry-After': '1' });
    const c: RequestContext = { req, res, state, query, reply, note };

    const post = findRoute(this.postRoutes, pathname);
    if (post) {
      note.route = routeLabel(post.route);
      if (method !== 'POST') return reply(405, 'POST only\n', TEXT, { Allow: 'POST' });
      return post.route.handle(c, post.param);
    }
    if (method !== 'GET' && method !== 'HEAD') {
      req.resume();
      return reply(405, 'method not allowed\n', TEXT, { Allow: 'GET, HEAD' });
    }
    req.resume();
    const get = findRoute(this.getRoutes, pathname);
    if (!get) return reply(404, 'not found\n');
    note.route = routeLabel(get.route);
    return get.route.handle(c, get.param);
  }

  /** POST routes (the module header lists every route). */
  private readonly postRoutes: Route[] = [{ path: '/events/', handle: (c, name) => this.events(c, name) }];

  /** GET and HEAD routes, first match wins. */
  private readonly getRoutes: Route[] = [
    { path: '/healthz', handle: (c) => this.healthz(c) },
    { path: '/machines', handle: (c) => this.machines(c) },
    { path: '/metrics', handle: (c) => c.reply(200, this.metrics.render(this.allActivity(c.state)), PROMETHEUS_CONTENT_TYPE) },
    { path: '/boot.ipxe', handle: (c) => c.reply(200, renderBootScript(this.url), TEXT) },
    { path: '/ipxe/auto', handle: (c) => this.ipxeAuto(c) },
    { path: '/ipxe/', handle: (c, name) => this.ipxeNamed(c, name) },
    { path: /^\/config\/([a-z0-9-]{1,100})\.yaml$/, label: '/config/', handle: (c, name) => this.config(c, name) },
    { path: '/artifacts/', handle: (c, rel) => this.artifact(c, rel) },
  ];

  private async events(c: RequestContext, name: string): Promise<void> {
    const m = /^[a-z0-9-]{1,100}$/.test(name) ? machineByName(c.state.catalog, name) : undefined;
    if (!m) {
      c.req.resume();
      return c.reply(404, 'unknown machine\n');
    }
    c.note.machine = m.name;
    const body = await readBounded(c.req, LIMITS.maxEventBody);
    if (body === undefined) {
      c.res.setHeader('Connection', 'close');
      return c.reply(413, `event body larger than ${LIMITS.maxEventBody} bytes\n`);
    }
    this.recordEvent(m, c.req, body, c.state);
    return c.reply(204, '');
  }

  private healthz(c: RequestContext): void {
    const { state } = c;
    const history = this.history ? { file: this.history.file, ...(this.historyWarning ? { warning: this.historyWarning } : {}) } : undefined;
    c.reply(200, JSON.stringify({ status: 'ok', loadedAt: state.loadedAt, reloads: this.reloads, lastReloadError: this.lastReloadError, machines: state.catalog.machines.length, history }) + '\n', 'application/json');
  }

  private async machines(c: RequestContext): Promise<void> {
    await this.applyRearms();
    const machines = this.allActivity(c.state).map((a) => ({ ...a, boot: this.bootOf(a, c.state) }));
    c.reply(200, JSON.stringify({ machines, ...(this.historyWarning ? { historyWarning: this.historyWarning } : {}) }, null, 2) + '\n', 'application/json');
  }

  /** The catalog's machines (seen or not) and any others the history still holds. */
  private allActivity(state: ServedState): MachineActivity[] {
    const known = state.catalog.machines.map((m) => this.activityOf(m));
    return [...known, ...[...this.activity.values()].filter((a) => !known.includes(a))];
  }

  private async ipxeAuto(c: RequestContext): Promise<void> {
    const q = matchQuery(c.query);
    const match = matchMachine(c.state.catalog, q);
    if (!match) {
      this.opts.log.warn('no profile matches a booting machine', { mac: normaliseMac(q.mac), uuid: normaliseUuid(q.uuid), client: c.req.socket.remoteAddress });
      return c.reply(200, renderNoMatchScript(q), TEXT);
    }
    c.note.machine = match.machine.name;
    const a = this.seen(match.machine, c.req.socket.remoteAddress);
    a.matchedBy = match.by;
    a.fetched.ipxe = a.lastSeen;
    const arch = c.query.get('buildarch') ?? undefined;
    const platform = platformOf(c.query);
    if (!archServed(arch, platform)) return c.reply(200, renderUnsupportedArchScript(match.machine, this.refuseArch(match.machine, a, arch!, 'ipxe')), TEXT, { 'Cache-Control': 'no-store' });
    c.reply(200, await this.bootScript(c.state, match.machine, a, { kind: 'ipxe', platform }, match.by), TEXT, { 'Cache-Control': 'no-store' });
  }

  /** A named machine's script or config: only to a request that identifies that machine. */
  private identified(c: RequestContext, name: string): Machine | undefined {
    const m = machineByName(c.state.catalog, name);
    // The same answer for "unknown" and "not yours", so scripts and configs cannot be probed.
    if (!m || !requestIdentifies(m, matchQuery(c.query))) {
      c.reply(404, "no such machine (the request must carry the machine's mac= or uuid=)\n");
      return undefined;
    }
    c.note.machine = m.name;
    return m;
  }

  private async ipxeNamed(c: RequestContext, name: string): Promise<void> {
    const m = this.identified(c, name);
    if (!m) return;
    const a = this.seen(m, c.req.socket.remoteAddress);
    a.fetched.ipxe = a.lastSeen;
    c.reply(200, await this.bootScript(c.state, m, a, { kind: 'ipxe', platform: platformOf(c.query) }), TEXT, { 'Cache-Control': 'no-store' });
  }

  private config(c: RequestContext, name: string): void {
    const m = this.identified(c, name);
    if (!m) return;
    const yaml = m.viaDefault ? serialiseServedConfig(m, renderMachineConfig(c.state.catalog, m, this.url)) : c.state.configs.get(m.name)!;
    const a = this.seen(m, c.req.socket.remoteAddress);
    a.fetched.config = a.lastSeen;
    c.reply(200, yaml, 'application/yaml', { 'Cache-Control': 'no-store' });
  }

  private async artifact(c: RequestContext, encoded: string): Promise<void> {
    const { state } = c;
    const check = checkRequestPath(encoded);
    if (!check.ok) return c.reply(404, 'not found\n');
    const file = await openInsideRoot(state.rootReal, check.segments);
    if (!file) {
      // `<artifact>.sha256` (sha256sum format) for every declared artifact, so the installer can verify an ISO.
      const rel = check.segments.join('/');
      const declared = rel.endsWith('.sha256') ? state.artifactsByPath.get(rel.slice(0, -'.sha256'.length)) : undefined;
      if (declared) return c.reply(200, `${declared.sha256}  ${check.segments.at(-1)!.slice(0, -'.sha256'.length)}\n`, TEXT);
      return c.reply(404, 'not found\n');
    }
    const who = this.byAddress.get(c.req.socket.remoteAddress ?? '');
    c.note.machine = who;
    const r = await this.serveFile(c.req, c.res, file, artifactContentType(check.segments.at(-1)!), c.note.fileReply);
    c.note.status = r.status;
    c.note.bytes = r.bytes;
    const m = who ? machineByName(state.catalog, who) : undefined;
    if (m) {
      this.activityOf(m).fetched.artifacts[check.segments.join('/')] = { at: new Date().toISOString(), bytes: r.bytes, status: r.status };
      this.persist();
    }
  }

  /** A machine booted as an architecture no profile serves: an event in /machines, a warning, and the arch (cleaned) for its console. */
  private refuseArch(m: Machine, a: MachineActivity, arch: string, via: 'ipxe' | 'grub'): string {
    const shown = /^[A-Za-z0-9_-]{1,32}$/.test(arch) ? arch : 'an unknown architecture';
    const at = new Date().toISOString();
    a.events.push({ at, event: 'unsupported-arch', data: { arch: shown, via } });
    if (a.events.length > LIMITS.eventsKept) a.events.splice(0, a.events.length - LIMITS.eventsKept);
    a.progress = { event: 'unsupported-arch', at, summary: `booted as ${shown} (${via}); profile ${m.profile} serves x86_64 only` };
    this.opts.log.warn('a machine booted as an architecture no profile serves', { machine: m.name, arch: shown, via });
    this.persist();
    return shown;
  }

  /** grub's device for hvpxe's own TFTP server, as machines reach it (the server URL's host). */
  private tftpDev(): string {
    return tftpDevice(this.url, this.tftpServer?.address?.port ?? this.opts.tftp?.port ?? 69);
  }

  /** What a TFTP name means: grub's bootstrap, a machine's grub script, or a file under --root. */
  private async tftpResolve(filename: string, client: string): Promise<TftpSource | undefined> {
    const state = this.state;
    if (!state) return undefined;
    const name = filename.replace(/^\/+/, '');
    if (name === GRUB_BOOTSTRAP) return { data: Buffer.from(renderGrubBootstrap(this.tftpDev())) };
    if (name === GRUB_AUTO || name.startsWith(`${GRUB_AUTO}?`)) return { data: Buffer.from(await this.grubAuto(state, new URLSearchParams(name.slice(GRUB_AUTO.length + 1)), client)) };
    const check = checkRequestPath(name);
    if (!check.ok) return undefined;
    const file = await openInsideRoot(state.rootReal, check.segments);
    if (!file) return undefined;
    const who = this.byAddress.get(client);
    const m = who ? machineByName(state.catalog, who) : undefined;
    if (m) {
      this.activityOf(m).fetched.artifacts[check.segments.join('/')] = { at: new Date().toISOString(), bytes: file.stat.size, status: 200 };
      this.persist();
    }
    return { fh: file.fh, size: file.stat.size };
  }

  private async grubAuto(state: ServedState, query: URLSearchParams, client: string): Promise<string> {
    const q = matchQuery(query);
    const match = matchMachine(state.catalog, q);
    if (!match) {
      this.opts.log.warn('no profile matches a booting machine', { mac: normaliseMac(q.mac), uuid: normaliseUuid(q.uuid), client, via: 'grub' });
      return renderGrubNoMatchScript(q);
    }
    const a = this.seen(match.machine, client);
    a.matchedBy = match.by;
    a.fetched.grub = a.lastSeen;
    const arch = query.get('arch') ?? undefined;
    if (!archServed(arch, query.get('platform') === 'pc' ? 'pcbios' : 'efi')) return renderGrubUnsupportedArchScript(match.machine, this.refuseArch(match.machine, a, arch!, 'grub'));
    return this.bootScript(state, match.machine, a, { kind: 'grub' }, match.by);
  }

  private recordEvent(m: Machine, req: http.IncomingMessage, body: Buffer, state: ServedState): void {
    let data: unknown = body.toString('utf8');
    try {
      data = JSON.parse(data as string);
    } catch {
      // plain-text payloads are kept as text
    }
    data = state.redactor.redact(data);
    const obj = data && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : undefined;
    const named = typeof obj?.event === 'string' ? obj.event : typeof obj?.type === 'string' ? obj.type : 'event';
    const event = named.slice(0, 64);
    const summary = obj ? summariseEvent(obj)?.slice(0, 200) : undefined;
    const a = this.seen(m, req.socket.remoteAddress);
    const at = new Date().toISOString();
    // Byte progress replaces the previous byte progress of the same step instead of filling the history.
    const last = a.events.at(-1);
    const lastData = last?.data as Record<string, unknown> | undefined;
    if (event === 'bytes' && last?.event === 'bytes' && lastData?.step === obj?.step) a.events.pop();
    a.events.push({ at, event, data });
    if (a.events.length > LIMITS.eventsKept) a.events.splice(0, a.events.length - LIMITS.eventsKept);
    a.progress = { event, at, ...(summary ? { summary } : {}) };
    if (reportsSuccess(data)) {
      a.installed = { at, via: obj?.type === 'install' ? 'hvinstall events' : 'SUCCEEDED webhook' };
      a.localBoots = undefined;
      this.opts.log.info('machine reported a finished install: it boots from its disk from now on', { machine: m.name, via: a.installed.via });
    }
    this.persist();
  }

  private async serveFile(req: http.IncomingMessage, res: http.ServerResponse, file: OpenedFile, contentType: string, reply: { status: number; length: number }): Promise<{ status: number; bytes: number }> {
    const { fh, stat } = file;
    let closed = false;
    const closeFh = async (): Promise<void> => {
      if (!closed) {
        closed = true;
        await fh.close().catch(() => undefined);
      }
    };
    try {
      const etag = etagOf(stat);
      const lastModified = new Date(Math.floor(stat.mtimeMs / 1000) * 1000).toUTCString();
      const headers: Record<string, string> = { ETag: etag, 'Last-Modified': lastModified, 'Accept-Ranges': 'bytes', 'Content-Type': contentType };
      const inm = req.headers['if-none-match'];
      const ims = req.headers['if-modified-since'];
      if ((inm !== undefined && etagMatches(inm, etag)) || (inm === undefined && ims !== undefined && Date.parse(ims) >= Math.floor(stat.mtimeMs / 1000) * 1000)) {
        res.writeHead(304, headers);
        res.end();
        return { status: 304, bytes: 0 };
      }
      let start = 0;
      let end = stat.size - 1;
      let status = 200;
      const rangeHeader = req.headers.range;
      const ifRange = req.headers['if-range'];
      const rangeApplies = rangeHeader !== undefined && (ifRange === undefined || ifRange === etag || ifRange === lastModified);
      if (rangeApplies) {
        const r = parseRange(rangeHeader, stat.size);
        if (r === 'unsatisfiable') {
          const body = 'requested range not satisfiable\n';
          res.writeHead(416, { ...headers, 'Content-Range': `bytes */${stat.size}`, 'Content-Type': TEXT, 'Content-Length': String(body.length) });
          res.end(req.method === 'HEAD' ? undefined : body);
          return { status: 416, bytes: 0 };
        }
        if (r) {
          ({ start, end } = r);
          status = 206;
          headers['Content-Range'] = `bytes ${start}-${end}/${stat.size}`;
        }
      }
      const length = stat.size === 0 ? 0 : end - start + 1;
      headers['Content-Length'] = String(length);
      reply.status = status;
      reply.length = length;
      res.writeHead(status, headers);
      if (req.method === 'HEAD' || length === 0) {
        res.end();
        return { status, bytes: 0 };
      }
      const sent = await sendFileRange(fh, res, start, end);
      return { status, bytes: sent };
    } finally {
      await closeFh();
    }
  }
}

/** One line for /machines from an installer event (ours or a Harvester webhook payload). */
export function summariseEvent(e: Record<string, unknown>): string | undefined {
  const s = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  switch (e.type) {
    case 'install':
      return `install ${s(e.phase)}${e.device ? ` on ${s(e.device)}` : ''}${e.message ? `: ${s(e.message)}` : ''}`;
    case 'step':
      return `step ${s(e.index)}/${s(e.total)} ${s(e.step)} ${s(e.phase)}${e.message ? `: ${s(e.message)}` : ''}`;
    case 'bytes': {
      const done = Number(e.done);
      const total = Number(e.total);
      return `${s(e.step)}: ${total > 0 ? Math.floor((done * 100) / total) : 0}% of ${Math.round(total / 1048576)} MiB`;
    }
    case 'message':
      return `${s(e.level)}: ${s(e.message)}`;
    default:
      return typeof e.event === 'string' ? `webhook ${e.event}` : undefined;
  }
}

/** Reads a request body up to `max` bytes; undefined (and the rest discarded) when it is larger. */
function readBounded(req: http.IncomingMessage, max: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > max) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        over = true;
        chunks.length = 0;
        return;
      }
      if (!over) chunks.push(c);
    });
    req.on('end', () => resolve(over ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * Streams bytes [start, end] of a file to the response with two reused buffers: the next chunk is
 * read while the previous one is being written, nothing is allocated per chunk (flat memory, little
 * GC), and a slow client holds at most two chunks. Returns the bytes written.
 */
async function sendFileRange(fh: FileHandle, res: http.ServerResponse, start: number, end: number): Promise<number> {
  const bufs = [Buffer.allocUnsafeSlow(LIMITS.readChunk), Buffer.allocUnsafeSlow(LIMITS.readChunk)];
  let closed = false;
  let onClose = (): void => undefined;
  // A write callback may never come once the socket is gone: every wait also ends on 'close'.
  const gone = new Promise<Error>((resolve) => {
    onClose = (): void => {
      closed = true;
      resolve(new Error('client closed the connection'));
    };
  });
  res.on('close', onClose);
  let pos = start;
  let sent = 0;
  let which = 0;
  // Resolves with the write error instead of rejecting, so a failure is never an unhandled rejection.
  let pending: Promise<Error | null | undefined> | undefined;
  try {
    while (pos <= end && !closed) {
      const buf = bufs[which];
      which ^= 1;
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, end - pos + 1), pos);
      if (bytesRead === 0) break; // the file shrank under us; the client sees a short body
      if (pending && (await Promise.race([pending, gone]))) break;
      if (closed) break;
      const chunk = bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
      pending = new Promise((resolve) => {
        res.write(chunk, resolve);
      });
      pos += bytesRead;
      sent += bytesRead;
    }
    const failed = pending ? await Promise.race([pending, gone]) : undefined;
    if (failed || closed || pos <= end) res.destroy();
    else await Promise.race([new Promise<void>((resolve) => res.end(resolve)), gone]);
  } catch {
    // the client went away mid-download
    res.destroy();
  } finally {
    res.off('close', onClose);
  }
  return sent;
}
