/**
 * `hvpxe serve`: the HTTP(S) boot server, its admin listener and, with --tftp, its TFTP server.
 * Boot listener (what a booting machine needs, nothing that lists machines):
 *   GET /boot.ipxe, /ipxe/auto?mac=&uuid=&…, /ipxe/<machine>?mac=|uuid=   scripts (routes-boot.ts)
 *   GET /config/<machine>.yaml?credential=…   the config, once per boot credential (routes-config.ts)
 *   POST /attest/<machine>?credential=…       TPM attestation of an enrolled machine (routes-config.ts)
 *   POST /events/<machine>?credential=…       install progress (routes-events.ts)
 *   POST /report-token/<machine>?credential=… a node-report token for the install (routes-node-report.ts)
 *   POST /node-events/<machine>               the installed node's reports, with that token (routes-node-report.ts)
 *   GET /artifacts/<path>                     files under --root (artifacts.ts)
 *   GET /healthz                              {"status": "ok" | "degraded"}
 * Admin listener (127.0.0.1 by default, the operator's bearer token; admin.ts):
 *   GET /machines, /metrics, /healthz (with the problems)
 * TFTP (tftp.ts, tftp-routes.ts): shim, grub and its scripts, kernel, initrd for boot: grub-signed.
 * The machine history (history.ts) decides what a machine boots next (boot-decision.ts).
 */
import http from 'node:http';
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../lib/logger.js';
import { HvError, ExitCode } from '../lib/errors.js';
import { settleWithin } from '../lib/stall-watchdog.js';
import { bootChainOf, type Catalog } from './profiles.js';
import { tftpDevice } from './grub.js';
import { TftpServer } from './tftp.js';
import { FileStore } from './store-file.js';
import type { ArtifactOrigin } from './artifact-origin.js';
import type { MachineStore, StoreHealth } from './store.js';
import { PxeMetrics, type ServerHealth } from './metrics.js';
import { loadState, refuseServedPrivatePaths, type ServedState, type Validator } from './state.js';
import { MachineBook } from './machine-book.js';
import { Attestations } from './tpm/attestation.js';
import { findRoute, JSON_TYPE, LIMITS, routeLabel, send, TEXT, type RequestContext, type RequestNote, type Route } from './http.js';
import { bootRoutes } from './routes-boot.js';
import { configRoutes } from './routes-config.js';
import { eventRoutes } from './routes-events.js';
import { nodeReportRoutes } from './routes-node-report.js';
import { artifactRoutes } from './artifacts.js';
import { artifactSendMode } from './zero-copy-send.js';
import { adminRoutes, authorised, healthReport } from './admin.js';
import { tftpResolver } from './tftp-routes.js';
import type { ServeContext } from './serve-context.js';

/** How long a request's log line waits for its handler after the response closed. */
const LOG_WAIT_MS = 5_000;

export { artifactContentType, parseRange } from './artifacts.js';

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
  /** The admin listener (/machines, /metrics) and the operator's token; without it they are not served. */
  admin?: { host: string; port: number; token: string; tokenFile?: string };
  /** Where machines are kept: the etcd store for a fleet; default the file store in stateDir (store.ts). */
  store?: MachineStore;
  /** This server's name in a shared store (default: the host name and the listening port). */
  serverName?: string;
  /** --artifacts-origin: declared artifacts missing under --root are fetched, verified and cached (artifact-origin.ts). */
  origin?: ArtifactOrigin;
}

type Listener = 'boot' | 'admin';

export class PxeServer implements ServeContext {
  private server?: http.Server;
  private adminServer?: http.Server;
  private state?: ServedState;
  private catalog?: Catalog;
  private reloads = 0;
  private lastReloadError?: string;
  readonly store: MachineStore;
  private tftpServer?: TftpServer;
  readonly metrics = new PxeMetrics();
  readonly book: MachineBook;
  readonly attestations = new Attestations();
  readonly log: Logger;
  readonly origin?: ArtifactOrigin;
  url = '';
  adminUrl = '';
  private readonly routes: Record<Listener, Route[]>;

  constructor(private readonly opts: ServeOptions) {
    this.log = opts.log;
    this.origin = opts.origin;
    const server = opts.serverName ?? `${hostname()}:${opts.port}`;
    this.store = opts.store ?? new FileStore(opts.stateDir, opts.log, server);
    this.book = new MachineBook(opts.log, this.metrics, this.store, () => this.catalog, server);
    const bootHealth: Route = { path: '/healthz', handle: (c) => c.reply(200, JSON.stringify({ status: this.healthReport(c.state).status }) + '\n', JSON_TYPE) };
    this.routes = {
      boot: [bootHealth, ...bootRoutes(this), ...configRoutes(this), ...eventRoutes(this), ...nodeReportRoutes(this), ...artifactRoutes(this)],
      admin: adminRoutes(this, { health: () => this.health(), reloads: () => this.reloads }),
    };
  }

  /** Where TFTP is served (with --tftp), once started. */
  get tftpAddress(): { address: string; port: number } | undefined {
    return this.tftpServer?.address;
  }

  get current(): ServedState | undefined {
    return this.state;
  }

  tftpDevice(): string {
    return tftpDevice(this.url, this.tftpServer?.address?.port ?? this.opts.tftp?.port ?? 69);
  }

  async start(): Promise<string> {
    try {
      // Before anything reads a key or listens: nothing secret may sit where it would be served.
      await refuseServedPrivatePaths(this.opts.root, this.notServed());
      this.server = await this.listen('boot', this.opts.host, this.opts.port);
      const addr = this.server.address() as AddressInfo;
      this.url = this.opts.serverUrl?.replace(/\/+$/, '') ?? `${this.opts.tls ? 'https' : 'http'}://${hostOf(addr)}:${addr.port}`;
      const state = await this.build();
      // The history before the first answer (re-arm requests name machines of the catalog).
      this.catalog = state.catalog;
      await this.book.restore();
      this.state = state;
      if (this.opts.admin) {
        this.adminServer = await this.listen('admin', this.opts.admin.host, this.opts.admin.port);
        const a = this.adminServer.address() as AddressInfo;
        this.adminUrl = `${this.opts.tls ? 'https' : 'http'}://${hostOf(a)}:${a.port}`;
      }
      if (this.opts.tftp) await this.startTftp(this.opts.tftp);
    } catch (err) {
      await this.close();
      throw err;
    }
    const s = this.state;
    this.log.info('serving', { url: this.url, admin: this.adminUrl || undefined, tftp: this.tftpServer?.address, machines: s.catalog.machines.length, default: s.catalog.defaultGroup?.name, artifacts: artifactSendMode(this.opts.tls !== undefined) });
    return this.url;
  }

  private async listen(which: Listener, host: string, port: number): Promise<http.Server> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(which, req, res).catch((err: unknown) => {
        this.log.error('request failed', { path: (req.url ?? '').split('?')[0], error: (err as Error).message });
        if (!res.headersSent) send(res, 500, 'internal error\n');
        else res.destroy();
      });
    };
    const common = { maxHeaderSize: LIMITS.maxHeaderSize, requestTimeout: LIMITS.requestTimeoutMs, headersTimeout: LIMITS.headersTimeoutMs };
    let server: http.Server;
    if (this.opts.tls) {
      const [cert, key] = await Promise.all([readFile(this.opts.tls.certFile), readFile(this.opts.tls.keyFile)]);
      server = https.createServer({ ...common, cert, key }, handler);
    } else {
      server = http.createServer(common, handler);
    }
    server.keepAliveTimeout = 5_000;
    server.timeout = LIMITS.idleSocketMs;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return server;
  }

  private async startTftp(at: { host: string; port: number }): Promise<void> {
    this.tftpServer = new TftpServer({
      ...at,
      log: this.log,
      resolve: tftpResolver(this, () => this.state),
      done: (e) => {
        this.metrics.tftpTransfer(e.refused ? 'refused' : e.ok ? 'ok' : 'failed');
        this.log.info('tftp', { ...e, filename: e.filename.replace(/^\/+/, '').slice(0, 200), machine: this.book.machineAt(e.client) });
      },
    });
    try {
      await this.tftpServer.start();
    } catch (err) {
      throw new HvError(`cannot serve TFTP on ${at.host}:${at.port}: ${(err as Error).message}`, {
        where: '--tftp',
        hint: 'port 69 needs root or CAP_NET_BIND_SERVICE, and nothing else (another TFTP server, dnsmasq with enable-tftp) may hold it on that address',
        exitCode: ExitCode.usage,
      });
    }
  }

  private async build(): Promise<ServedState> {
    await this.store.checkReadable();
    const state = await loadState({
      root: this.opts.root,
      profilesPath: this.opts.profilesPath,
      serverUrl: this.url,
      validate: this.opts.validate,
      verifyArtifacts: this.opts.verifyArtifacts,
      notServed: this.notServed(),
      origin: !!this.opts.origin,
    });
    this.prefetch(state);
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

  /** Fetches the artifacts the origin serves in the background, so that the first machine finds them here. */
  private prefetch(state: ServedState): void {
    const fromOrigin = [...state.artifactsByPath].filter(([, a]) => a.origin).map(([p, a]) => ({ path: p, sha256: a.sha256 }));
    if (this.origin && fromOrigin.length) void this.origin.prefetch(fromOrigin);
  }

  /** What must never be under --root: it would be served to anyone. */
  private notServed(): Array<{ what: string; path: string }> {
    return [
      { what: 'profiles.yaml (every machine\'s secrets)', path: this.opts.profilesPath },
      ...(this.opts.tls ? [{ what: 'the TLS key', path: this.opts.tls.keyFile }] : []),
      ...(this.opts.stateDir ? [{ what: 'the state directory (the machine history)', path: this.opts.stateDir }] : []),
      ...(this.opts.admin?.tokenFile ? [{ what: 'the admin token', path: this.opts.admin.tokenFile }] : []),
    ];
  }

  /** Re-reads profiles.yaml and the artifacts; keeps serving the old state when the new one is invalid. */
  async reload(): Promise<boolean> {
    try {
      const next = await this.build();
      this.state = next;
      this.catalog = next.catalog;
      this.reloads++;
      this.lastReloadError = undefined;
      this.metrics.reload(true);
      this.log.info('reloaded', { machines: next.catalog.machines.length });
      return true;
    } catch (err) {
      this.lastReloadError = (err as Error).message;
      this.metrics.reload(false);
      this.log.error('reload refused; still serving the previous profiles', { error: (err as Error).message });
      return false;
    }
  }

  private health(): ServerHealth & { lastReloadError?: string; historyFailingSince?: string; historyLastError?: string; historyFile?: string; lostAt?: string; lostKeptAs?: string; store: StoreHealth } {
    const store = this.store.health();
    const h = store.kind === 'file' ? store : undefined;
    const lost = this.book.historyLost;
    return {
      store,
      reloadRefused: this.lastReloadError !== undefined,
      lastReloadError: this.lastReloadError,
      historyLost: !!lost,
      lostAt: lost?.at,
      lostKeptAs: lost?.keptAs,
      historyWritable: h?.writable,
      historyWriteFailures: h?.failures,
      historyFailingSince: h?.failingSince,
      historyLastError: h?.lastError,
      historyFile: h?.where,
      tftpActive: this.tftpServer?.active,
    };
  }

  private healthReport(state: ServedState): ReturnType<typeof healthReport> {
    return healthReport(this.health(), this.book.all(state.catalog).filter((a) => a.hold).length);
  }

  /** Stops within seconds whatever happened before: TFTP transfers end, the history gets one bounded last write. */
  async close(): Promise<void> {
    await this.tftpServer?.close();
    this.tftpServer = undefined;
    await this.store.close();
    await Promise.all([closeServer(this.server), closeServer(this.adminServer)]);
    this.server = undefined;
    this.adminServer = undefined;
  }

  private async handle(which: Listener, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const note: RequestNote = { status: 0, bytes: 0, fileReply: { status: 0, length: 0 } };
    let handled!: () => void;
    this.logWhenDone(which, req, res, note, new Promise<void>((r) => (handled = r)));
    try {
      await this.dispatch(which, req, res, note);
    } finally {
      handled();
    }
  }

  private async dispatch(which: Listener, req: http.IncomingMessage, res: http.ServerResponse, note: RequestNote): Promise<void> {
    const reply = (code: number, body: string, type?: string, extra?: Record<string, string>): void => {
      note.status = code;
      note.bytes = send(res, code, body, type, extra);
    };
    const rawUrl = req.url ?? '/';
    if (rawUrl.length > LIMITS.maxUrlLength) return reply(414, 'request URI too long\n');
    if (!rawUrl.startsWith('/')) return reply(400, 'bad request\n');
    const state = this.state;
    if (!state) return reply(503, 'hvpxe is starting\n', TEXT, { 'Retry-After': '1' });
    if (which === 'admin' && !authorised(req, this.opts.admin!.token)) {
      req.resume();
      return reply(401, 'the operator token is required (Authorization: Bearer <token from the admin token file>)\n', TEXT, { 'WWW-Authenticate': 'Bearer realm="hvpxe"' });
    }
    const qIndex = rawUrl.indexOf('?');
    const pathname = qIndex < 0 ? rawUrl : rawUrl.slice(0, qIndex);
    const found = findRoute(this.routes[which], pathname);
    if (!found) {
      req.resume();
      return reply(404, 'not found\n');
    }
    note.route = routeLabel(found.route);
    const method = req.method ?? 'GET';
    const wanted = found.route.method ?? 'GET';
    if (wanted === 'POST' ? method !== 'POST' : method !== 'GET' && method !== 'HEAD') {
      req.resume();
      return reply(405, `${wanted === 'POST' ? 'POST' : 'GET or HEAD'} only\n`, TEXT, { Allow: wanted === 'POST' ? 'POST' : 'GET, HEAD' });
    }
    if (wanted === 'GET') req.resume();
    const c: RequestContext = { req, res, state, query: new URLSearchParams(qIndex < 0 ? '' : rawUrl.slice(qIndex + 1)), client: req.socket.remoteAddress ?? '', reply, note };
    return found.route.handle(c, found.param);
  }

  /**
   * The request log line and the request metric, once the response is finished or cut off and its
   * handler has said what it sent (never the query: it may hold a credential). A client that closes
   * the moment it has the last byte can close the response before the handler's send has returned:
   * the line waits for the handler (5 s at most), and a body sent whole counts as complete.
   */
  private logWhenDone(which: Listener, req: http.IncomingMessage, res: http.ServerResponse, note: RequestNote, handled: Promise<void>): void {
    const started = Date.now();
    const path = (req.url ?? '/').split('?')[0].slice(0, 200);
    res.on('close', () => void settleWithin(handled, LOG_WAIT_MS, { unref: true }).then(() => {
      const complete = res.writableFinished || (note.fileReply.length > 0 && note.bytes === note.fileReply.length);
      const status = note.status || note.fileReply.status || res.statusCode;
      const bytes = note.bytes || (complete && req.method !== 'HEAD' ? note.fileReply.length : 0);
      if (which === 'boot') this.metrics.request(note.route ?? 'other', status, bytes, note.fileReply.via);
      this.log.info('request', {
        method: req.method,
        path,
        status,
        bytes,
        via: note.fileReply.via,
        ...(complete ? {} : { aborted: true }),
        ms: Date.now() - started,
        machine: note.machine,
        client: req.socket.remoteAddress,
        ...(which === 'admin' ? { listener: 'admin' } : {}),
      });
    }));
  }
}

function hostOf(addr: AddressInfo): string {
  return addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
}

async function closeServer(s: http.Server | undefined): Promise<void> {
  if (!s) return;
  await new Promise<void>((r) => {
    s.close(() => r());
    s.closeIdleConnections();
    setTimeout(() => s.closeAllConnections(), 2_000).unref();
  });
}
