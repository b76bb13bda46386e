/**
 * registries: renders /etc/rancher/rke2/registries.yaml from the declared source (the
 * containerd-registry setting the installer saved in /oem/harvester.config, or the file named by the
 * `source` setting), and in `run` mode watches it: truncated, deleted or edited, it is restored
 * within moments and the drift is logged; a changed source (configs only, too: harvester#4530) is
 * applied.
 */
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { mkdir, open, readFile, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { HvError } from '../../lib/errors.js';
import { sleep } from '../../lib/wait.js';
import type { Guard, GuardContext, GuardResult } from '../guard.js';
import { configCandidates, loadNodeConfig } from '../node-config.js';
import { parseContainerdRegistry } from '../../config/containerd-registry.js';
import { registryCredentials } from '../../node/registries.js';
import { applyRegistries, classifyDrift, desiredRegistries, readCurrent, REGISTRIES_PATH, type DesiredRegistries } from '../registries/registries-file.js';
import { explainClusterFile, readOwnershipFacts, registriesOwner, type Ownership } from '../registries/ownership.js';

interface Declared {
  /** The setting's JSON text; undefined when nothing is declared. */
  setting?: string;
  from: string;
}

/** Reads the declared containerd-registry setting afresh (it may have changed since the agent started). */
export async function readDeclaredSource(ctx: GuardContext): Promise<Declared> {
  const s = ctx.settings;
  if (typeof s.source === 'string') {
    const text = await readFile(ctx.root(s.source), 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    return { setting: text?.trim() ? text.trim() : undefined, from: s.source };
  }
  const loaded = await loadNodeConfig(ctx.root, configCandidates(s));
  const config = loaded.config ?? ctx.config;
  const from = loaded.config
    ? `${loaded.source} system_settings.containerd-registry`
    : ctx.config
      ? 'the node config the agent started with'
      : `no node config: ${loaded.problems.join('; ')}`;
  return { setting: config?.systemSettings?.['containerd-registry'] || undefined, from };
}

function target(ctx: GuardContext): string {
  return ctx.root(typeof ctx.settings.file === 'string' ? ctx.settings.file : REGISTRIES_PATH);
}

/** Renders the declared source, registering its credentials for redaction first. */
function render(ctx: GuardContext, setting: string): DesiredRegistries {
  try {
    ctx.log.redactor.add(...registryCredentials(parseContainerdRegistry(setting)));
  } catch {
    // renderRegistries below reports the parse error with its hint.
  }
  return desiredRegistries(setting);
}

interface EnforceResult {
  changed: boolean;
  detail: string;
}

/** The content last put in place, per file: tells a changed source from a drifted file. */
const lastApplied = new Map<string, string>();

/** One comparison and, if needed, one atomic write. */
async function enforce(ctx: GuardContext, declared: Declared): Promise<EnforceResult> {
  const file = target(ctx);
  const shown = path.posix.join('/', path.relative(ctx.root('/'), file));
  if (!declared.setting) return { changed: false, detail: `no containerd-registry declared (${declared.from}); ${shown} left alone` };
  const desired = render(ctx, declared.setting);
  const current = await readCurrent(file);
  const drift = classifyDrift(current, desired);
  const before = lastApplied.get(file);
  const sourceChanged = before !== undefined && before !== desired.content;
  lastApplied.set(file, desired.content);
  if (drift !== 'none') {
    await applyRegistries(file, desired, drift);
    if (sourceChanged) ctx.log.info('declared containerd-registry changed; registries.yaml rewritten', { file: shown, source: declared.from });
    else ctx.log.warn(`registries.yaml drift: ${drift}; restored`, { file: shown, drift, source: declared.from });
  }
  const hosts = Object.keys(parseContainerdRegistry(declared.setting).mirrors);
  return { changed: drift !== 'none', detail: `${shown} from ${declared.from}: ${hosts.length ? `mirrors for ${hosts.join(', ')}` : 'no mirrors'}${desired.secret ? ' (credentials; mode 0600)' : ''}` };
}

async function ownership(ctx: GuardContext): Promise<Ownership> {
  return registriesOwner(await readOwnershipFacts(ctx.root, ctx.bootstrapper ?? 'hvagent', ctx.settings.owner));
}

/** Per file: the size last seen and the drift last logged, so changes are reported once. */
const seen = new Map<string, { size?: number; drift?: string }>();

/** The cluster owns the file: never write it; say what it holds and how it differs from the install. */
async function follow(ctx: GuardContext, declared: Declared, own: Ownership): Promise<EnforceResult> {
  const file = target(ctx);
  const shown = path.posix.join('/', path.relative(ctx.root('/'), file));
  const current = await readCurrent(file);
  let installTime: DesiredRegistries | undefined;
  if (declared.setting) {
    try {
      installTime = render(ctx, declared.setting);
    } catch {
      // An install-time setting that no longer renders says nothing about the cluster's file.
    }
  }
  const was = seen.get(file) ?? {};
  const size = Buffer.byteLength(current.content ?? '');
  const report = explainClusterFile({ current, installTime, previousSize: was.size !== undefined && was.size !== size ? was.size : undefined, shown });
  if (report.drift && report.drift !== was.drift) ctx.log.warn('registries.yaml drift; owned by the cluster, left alone', { file: shown, drift: report.drift, owner: own.why });
  const changed = was.size !== size || report.drift !== was.drift;
  seen.set(file, { size, drift: report.drift });
  return { changed, detail: `owner: cluster (${own.why}). ${report.detail}` };
}

async function reconcile(ctx: GuardContext): Promise<GuardResult> {
  let declared: Declared;
  try {
    declared = await readDeclaredSource(ctx);
  } catch (err) {
    return { status: 'retry', reason: `cannot read the declared source: ${(err as Error).message}` };
  }
  const own = await ownership(ctx);
  if (own.owner === 'cluster') return { status: 'ok', detail: (await follow(ctx, declared, own)).detail };
  try {
    const r = await enforce(ctx, declared);
    return { status: 'ok', detail: r.detail };
  } catch (err) {
    if (err instanceof HvError && err.where) {
      return { status: 'fail', diagnosis: `${err.where} (${declared.from}): ${err.message}`, hint: err.hint };
    }
    throw err;
  }
}

/**
 * Watches the file's directory for the whole watch, so that no event is lost between two checks
 * (an event during a check marks the next check due at once). A directory deleted whole is
 * recreated and watched again (its inode changes).
 */
class DirectoryWatch {
  private watcher: FSWatcher | undefined;
  /** Held open so the watched directory's inode is not reused while we watch it. */
  private dirHandle: FileHandle | undefined;
  private due = false;
  private wake: (() => void) | undefined;

  constructor(private readonly dir: string) {}

  private poke = (): void => {
    this.due = true;
    this.wake?.();
  };

  /** True while the watcher is on the directory that is at the path now (not a deleted one). */
  private async current(): Promise<boolean> {
    if (!this.watcher || !this.dirHandle) return false;
    const [held, now] = await Promise.all([this.dirHandle.stat(), stat(this.dir).catch(() => undefined)]);
    return held.nlink > 0 && now !== undefined && now.ino === held.ino && now.dev === held.dev;
  }

  private async ensure(): Promise<void> {
    if (await this.current()) return;
    // A new directory (deleted and recreated, maybe by our own write): changes made before this
    // watcher existed were not seen, so check once more.
    if (this.dirHandle) this.due = true;
    await this.close();
    await mkdir(this.dir, { recursive: true });
    this.dirHandle = await open(this.dir, 'r');
    try {
      this.watcher = fsWatch(this.dir, { persistent: false }, this.poke);
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
        this.poke();
      });
    } catch {
      // Watching failed (inotify limits): the periodic check still runs.
    }
  }

  /** Resolves when something changed since the last call, after intervalMs, or on abort. */
  async next(intervalMs: number, signal: AbortSignal): Promise<void> {
    await this.ensure();
    if (!this.due) {
      const woken = new AbortController();
      this.wake = () => woken.abort();
      await sleep(intervalMs, AbortSignal.any([signal, woken.signal])).catch(() => undefined);
    }
    this.wake = undefined;
    this.due = false;
  }

  async close(): Promise<void> {
    this.watcher?.close();
    this.watcher = undefined;
    await this.dirHandle?.close().catch(() => undefined);
    this.dirHandle = undefined;
  }
}

async function watch(ctx: GuardContext): Promise<void> {
  const intervalMs = typeof ctx.settings.checkIntervalMs === 'number' ? ctx.settings.checkIntervalMs : 5000;
  const dirWatch = new DirectoryWatch(path.dirname(target(ctx)));
  let lastProblem: string | undefined;
  try {
    while (!ctx.signal.aborted) {
      await dirWatch.next(intervalMs, ctx.signal);
      if (ctx.signal.aborted) break;
      lastProblem = await check(ctx, lastProblem);
    }
  } finally {
    await dirWatch.close();
  }
}

/** One watch check; returns the current problem (undefined when the file is as declared). */
async function check(ctx: GuardContext, lastProblem: string | undefined): Promise<string | undefined> {
  try {
    const declared = await readDeclaredSource(ctx);
    const own = await ownership(ctx);
    // The controller took the file over since the last check: from now on follow, never restore.
    const r = own.owner === 'cluster' ? await follow(ctx, declared, own) : await enforce(ctx, declared);
    if (r.changed || lastProblem) ctx.progress(r.detail);
    return undefined;
  } catch (err) {
    const msg = err instanceof HvError && err.where ? `${err.where}: ${err.message}` : (err as Error).message;
    if (msg !== lastProblem) ctx.log.error('cannot keep registries.yaml; the last good file stays', { error: msg });
    ctx.progress(`problem: ${msg}`);
    return msg;
  }
}

const guard: Guard = {
  name: 'registries',
  // Rendering is local: it must not wait for the network, only be in place before RKE2 starts.
  dependsOn: [],
  deadlineMs: 60_000,
  reconcile,
  watch,
};
export default guard;
