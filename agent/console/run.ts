/**
 * `hvagent console`: the dashboard on the installed node's tty1 (agent/hvagent-console.service).
 * Re-reads the status document and the node's addresses every few seconds; F12 opens a shell as
 * Harvester's console does, and the dashboard comes back when it exits.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { App, type Screen } from '../../lib/tui/app.js';
import type { Line } from '../../lib/tui/form.js';
import type { Key } from '../../lib/tui/keys.js';
import { ATTR_BOLD } from '../../lib/tui/screen.js';
import { Terminal } from '../../lib/tui/terminal.js';
import { padTo, wrap } from '../../lib/tui/text.js';
import type { HarvesterConfig } from '../../config/types.js';
import { configCandidates, loadNodeConfig } from '../node-config.js';
import type { AgentSettings } from '../settings.js';
import { isProcessAlive, readStatus, statusFile } from '../status.js';
import { notableAssessment, readAssessmentView } from '../assessment/command.js';
import { dashboard, type DashboardInput, type DashboardView } from './dashboard.js';

export interface DashboardOptions {
  rootDir: string;
  settings: AgentSettings;
  refreshMs: number;
  /** The shell F12 opens. */
  shell: string;
}

function addresses(): string[] {
  const out: string[] = [];
  for (const [name, list] of Object.entries(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) out.push(`${name} ${a.cidr ?? a.address}`);
  }
  return out;
}

class DashboardScreen implements Screen {
  readonly title = 'Node status';
  readonly help = 'F12: shell  Ctrl-L: redraw  (refreshed every few seconds)';
  view?: DashboardView;
  hostname = os.hostname();
  addresses: string[] = [];
  updated?: Date;

  constructor(private readonly onShell: () => Promise<void>) {}

  get progress(): string {
    return this.updated ? `updated ${this.updated.toISOString().slice(11, 19)}` : '';
  }

  body(width: number): Line[] {
    const v = this.view;
    if (!v) return [{ segs: [{ text: 'Reading the node status...' }] }];
    const out: Line[] = [];
    const kv = (k: string, val: string, attr = 0): void => {
      const key = padTo(`${k}:`, 18);
      wrap(val, Math.max(10, width - 18)).forEach((w, i) => out.push({ segs: [{ text: i === 0 ? key : ' '.repeat(18) }, { text: w, attr }] }));
    };
    kv('Management URL', v.managementUrl, ATTR_BOLD);
    kv('Hostname', this.hostname);
    kv('Addresses', this.addresses.join(', ') || 'none');
    kv('Role', v.role);
    kv('Node', v.nodeState, ATTR_BOLD);
    kv('Cluster', v.clusterState);
    out.push({ segs: [] });
    if (v.guards.length) out.push({ segs: [{ text: 'hvagent guards:', attr: ATTR_BOLD }] });
    for (const g of v.guards) {
      const head = `  ${padTo(g.name, 15)} ${padTo(g.phase, 10)}`;
      const text = [g.text, g.retry ? `(next try ${g.retry})` : ''].filter(Boolean).join(' ');
      const lines = wrap(text || '-', Math.max(10, width - head.length - 1));
      lines.forEach((w, i) => out.push({ segs: [{ text: i === 0 ? head : ' '.repeat(head.length) }, { text: ' ' + w, attr: g.phase === 'failed' ? ATTR_BOLD : 0 }] }));
      if (g.hint) for (const w of wrap(`what to do: ${g.hint}`, Math.max(10, width - head.length - 1))) out.push({ segs: [{ text: ' '.repeat(head.length + 1) + w }] });
    }
    for (const n of v.notes) for (const w of wrap(n, width)) out.push({ segs: [{ text: w }] });
    return out;
  }

  async key(k: Key): Promise<void> {
    if (k.kind === 'key' && k.name === 'f12') await this.onShell();
  }
}

export async function runDashboard(opts: DashboardOptions): Promise<number> {
  const term = new Terminal({ input: process.stdin, output: process.stdout }, { refreshMs: 60_000 });
  let app: App;
  const screen = new DashboardScreen(() =>
    app.suspend(async () => {
      process.stdout.write('\x1b[H\x1b[2JShell on the node; exit returns to the status screen.\n');
      await new Promise<void>((resolve) => {
        const child = spawn(opts.shell, ['-l'], { stdio: 'inherit' });
        child.on('exit', () => resolve());
        child.on('error', (err) => {
          process.stdout.write(`cannot start ${opts.shell}: ${err.message}\n`);
          setTimeout(resolve, 2000);
        });
      });
    }),
  );
  app = new App(term, { name: 'Harvester node (hvagent console)', quitQuestion: () => 'Leave the status screen? (systemd starts it again on tty1)' });
  const root = (p: string): string => (opts.rootDir === '/' ? p : `${opts.rootDir}${p}`);
  let config: HarvesterConfig | undefined;
  let configProblem: string | undefined;
  const refresh = async (): Promise<void> => {
    if (!config) {
      const node = await loadNodeConfig(root, configCandidates(opts.settings.common));
      config = node.config;
      configProblem = node.config ? undefined : node.problems.join('; ');
    }
    const input: DashboardInput = { config, configProblem, alive: false, hostname: os.hostname(), addresses: addresses(), now: Date.now() };
    try {
      input.status = await readStatus(statusFile(opts.rootDir));
      input.alive = isProcessAlive(input.status.pid);
    } catch (err) {
      input.statusProblem = (err as Error).message;
    }
    input.assessment = notableAssessment(await readAssessmentView(opts.rootDir).catch(() => undefined));
    screen.view = dashboard(input);
    screen.addresses = input.addresses;
    screen.hostname = input.hostname;
    screen.updated = new Date();
    app.redraw();
  };
  const timer = setInterval(() => void refresh().catch(() => undefined), opts.refreshMs);
  process.on('uncaughtException', (err) => app.flash(`internal error: ${err.message}`, 15_000));
  const done = app.start(screen);
  await refresh();
  const code = await done;
  clearInterval(timer);
  return code === 130 ? 0 : code;
}
