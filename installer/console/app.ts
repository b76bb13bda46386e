/**
 * `hvinstall console`: the pages (pages.ts) walked in order, each field checked as it is left
 * (checks.ts), the network probed where Harvester's console probes it (probes.ts), the whole config
 * confirmed (summary.ts), then the install through the pipeline (install-run.ts) with its step list
 * and byte progress, a failure screen that resumes, and the reboot.
 */
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { App, type Screen } from '../../lib/tui/app.js';
import { Form, type Field, type FieldMessage, type Line } from '../../lib/tui/form.js';
import type { Key } from '../../lib/tui/keys.js';
import { ATTR_BOLD, ATTR_REVERSE } from '../../lib/tui/screen.js';
import type { Terminal } from '../../lib/tui/terminal.js';
import { ellipsis, wrap } from '../../lib/tui/text.js';
import { describeError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { Redactor } from '../../lib/redact.js';
import { formatFinding, readConfigText } from '../../config/index.js';
import type { Finding } from '../../config/types.js';
import { formatBytes } from '../../config/disk-sizes.js';
import type { MachineFacts } from '../preflight/types.js';
import { runPreflightChecks, selectDisks } from '../preflight/index.js';
import { describeFailedInstall } from '../steps/failed-install.js';
import type { StampedEvent } from '../steps/progress.js';
import { listOf, splitCidr, type Answers } from './answers.js';
import { fieldMessages, validateAnswers, type FieldId } from './checks.js';
import type { ConsoleInstallResult } from './install-run.js';
import { defaultDisk, defaultPersistentSize, findListedDisk, linkUp } from './machine.js';
import { MACHINE_CHECKS, PAGES, type ConsoleState, type PageDef, type SubmitResult } from './pages.js';
import type { ProbeResult } from './probes.js';

export interface ConsoleOptions {
  facts: MachineFacts;
  /** hvinstall.legacy_bios on the kernel command line (docs/preflight.md). */
  allowLegacyBios?: boolean;
  /** Re-reads the machine (F5 on the disk and network pages). */
  rescan: () => Promise<MachineFacts>;
  base: ConsoleState['base'];
  answers: Answers;
  log: Logger;
  logFile?: string;
  dryRun: boolean;
  /** Where the config is written (--write-config; default under runDir). */
  configFile: string;
  runDir: string;
  stateDir: string;
  source?: string;
  bundle?: string;
  agent?: string;
  systemSizeMiB?: number;
  noReboot: boolean;
  /**
   * DHCP on the management NIC and for the VIP runs (false with captured facts: those NICs are not
   * this machine's). URL fetches, /ping and NTP run either way, from this machine.
   */
  probeLinks: boolean;
  dhcp: { client: string[]; script?: string; timeoutMs: number };
  /** The crypt hash of a password (SHA-512 crypt with this run's salt, as Harvester's console stores it). */
  hashPassword: (clear: string, salt: string) => string;
}

const DEFAULT_HELP = 'Enter: next  Tab/Shift-Tab: field  Esc: back  Ctrl-C: quit';

interface Waiting {
  text: string;
  since: number;
  deadlineMs: number;
  cancelled: boolean;
  /** The wait is over (before a question about its outcome). */
  end(): void;
}

export class ConsoleApp {
  readonly state: ConsoleState;
  private readonly app: App;
  private readonly salt = randomBytes(12).toString('base64').replace(/\+/g, '.').replace(/=/g, '').slice(0, 16);
  private page = 0;
  private installing?: AbortController;
  /** The last probe warning that a second Enter accepts, keyed by page and value. */
  private confirmable?: string;
  private redactor = new Redactor();

  constructor(
    term: Terminal,
    private readonly opts: ConsoleOptions,
  ) {
    const hardware = runPreflightChecks(opts.facts, { profile: 'testing' }).checks.filter((c) => MACHINE_CHECKS.has(c.id) && c.result !== 'pass');
    this.state = { answers: opts.answers, facts: opts.facts, base: opts.base, skipchecks: opts.base.install?.skipchecks === true, allowLegacyBios: opts.allowLegacyBios === true, hardware };
    this.applyDiskRules();
    this.state.answers.device ??= defaultDisk(opts.facts);
    this.app = new App(term, {
      name: 'Harvester installer (hvinstall console)',
      quitQuestion: () =>
        this.installing
          ? 'Stop the install? The disk is invalidated so it cannot boot half-installed; the journal is kept and a retry resumes it.'
          : 'Quit the installer? Nothing has been written to any disk.',
      onQuit: () => {
        if (!this.installing) return true;
        this.installing.abort(new Error('stopped from the console (Ctrl-C)'));
        return false;
      },
    });
  }

  /** The command line's disk rules pre-select the disks the page offers (the operator may pick others). */
  private applyDiskRules(): void {
    const { choices } = selectDisks(this.state.base, this.state.facts, (n) => findListedDisk(this.state.facts, n));
    if (!choices.length) return;
    this.state.diskChoices = choices;
    for (const c of choices) if (c.recorded) this.state.answers[c.role] = c.recorded;
    this.opts.log.info('disk rules', { choices: choices.map((c) => ({ rule: c.key, chose: c.path ?? null, problem: c.problem })) });
  }

  async run(): Promise<number> {
    this.opts.log.info('console started', { dryRun: this.opts.dryRun, disks: this.opts.facts.disks.length, nics: this.opts.facts.nics.length });
    const first = this.applicable()[0]!;
    this.page = PAGES.indexOf(first);
    return this.app.start(this.pageScreen(first));
  }

  /** Shows an error that escaped a handler (it is in the log with its stack). */
  internalError(err: unknown): void {
    this.app.flash(`internal error (logged): ${(err as Error)?.message ?? String(err)}`, 15_000);
  }

  private applicable(): PageDef[] {
    return PAGES.filter((p) => p.applies(this.state) && (this.state.answers.mode !== 'install' || ['hardware', 'mode', 'password', 'disk', 'summary'].includes(p.id)));
  }

  private goto(p: PageDef): void {
    this.page = PAGES.indexOf(p);
    this.confirmable = undefined;
    this.opts.log.info('page', { page: p.id });
    if (p.id === 'summary') {
      this.state.summary = undefined;
      this.app.show(this.pageScreen(p));
      void this.refreshSummary();
      return;
    }
    this.app.show(this.pageScreen(p));
  }

  private next(): void {
    const list = this.applicable();
    const i = list.findIndex((p) => p === PAGES[this.page]);
    const n = list[i + 1];
    if (n) this.goto(n);
  }

  private back(): void {
    const list = this.applicable();
    const i = list.findIndex((p) => p === PAGES[this.page]);
    const p = list[i - 1];
    // The Hardware Checks page is answered once; going back stops at the mode page.
    if (p && p.id !== 'hardware') this.goto(p);
  }

  private async refreshSummary(): Promise<void> {
    const { summarise } = await import('./summary.js');
    this.state.summary = await summarise({ ...this.state }, (clear) => this.opts.hashPassword(clear, this.salt));
    const s = this.state.summary;
    this.opts.log.info('summary', { canInstall: s.canInstall, errors: s.errors.map((e) => `${e.path}: ${e.message}`), blocking: s.blocking.map((c) => c.message), planProblems: s.planProblems });
    const scr = this.app.current() as PageScreen | undefined;
    if (scr instanceof PageScreen && scr.def.id === 'summary') scr.relayout();
    this.app.redraw();
  }

  // ---- pages -------------------------------------------------------------------------------

  private pageScreen(def: PageDef): PageScreen {
    const list = this.applicable();
    const progress = `${list.indexOf(def) + 1}/${list.length}`;
    return new PageScreen(def, this.state, progress, {
      redraw: () => this.app.redraw(),
      store: (f) => this.store(f),
      check: (f) => this.checkField(f),
      submit: (w) => this.submit(def, w),
      back: () => this.back(),
      next: () => this.next(),
      rescan: () => this.rescan(),
      ask: (t, x, c) => this.app.ask(t, x, c),
      flash: (t) => this.app.flash(t),
    });
  }

  private store(f: Field): void {
    const a = this.state.answers as unknown as Record<string, unknown>;
    if (f.id === 'proceed' || f.id === 'confirm') return;
    const previousDevice = this.state.answers.device;
    if (f.id === 'forceMbr' && f.kind === 'select') this.state.answers.forceMbr = f.value === 'yes';
    else if (f.kind === 'text') a[f.id] = f.value;
    else if (f.kind === 'select') a[f.id] = f.value;
    else a[f.id] = [...f.values];
    if (f.id === 'device' && this.state.answers.device !== previousDevice) {
      // A new disk gets its own default persistent size, and is no longer offered as the data disk.
      const a2 = this.state.answers;
      const d = findListedDisk(this.state.facts, a2.device);
      if (!a2.dataDisk || a2.dataDisk === previousDevice || findListedDisk(this.state.facts, a2.dataDisk)?.path === d?.path) a2.dataDisk = undefined;
      a2.persistentSize = defaultPersistentSize(d);
    }
    if (f.id === 'sshKeyUrl') this.state.answers.sshKeys = [];
    // Harvester's console takes "address/prefix" and fills the mask from it.
    if (f.id === 'address' && f.kind === 'text') {
      const mask = splitCidr(f.value).mask;
      if (mask) this.state.answers.mask = mask;
    }
    if (f.id === 'configUrl') this.state.remote = undefined;
  }

  private async checkField(f: Field): Promise<FieldMessage[]> {
    if (f.id === 'proceed' || f.id === 'confirm') return [];
    return fieldMessages(f.id as FieldId, { ...this.state });
  }

  private async rescan(): Promise<void> {
    this.state.facts = await this.opts.rescan();
    this.state.answers.device = findListedDisk(this.state.facts, this.state.answers.device) ? this.state.answers.device : defaultDisk(this.state.facts);
    this.state.answers.nics = this.state.answers.nics.filter((n) => this.state.facts.nics.some((x) => x.name === n));
    this.opts.log.info('rescanned the machine', { disks: this.state.facts.disks.map((d) => d.path), nics: this.state.facts.nics.map((n) => `${n.name}:${n.operState}`) });
  }

  /** The page's own step once every field passed: probes, and the pages that are questions. */
  private async submit(def: PageDef, wait: (text: string, deadlineMs: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    switch (def.id) {
      case 'hardware': {
        const f = (this.app.current() as PageScreen).form.field('proceed');
        if (!f) {
          await this.halt('This machine cannot take a Harvester install: nothing can override the failed checks.');
          return 'handled';
        }
        if (f.kind === 'select' && f.value === 'no') {
          await this.halt('Installation halted.');
          return 'handled';
        }
        this.opts.log.warn('hardware checks acknowledged by the operator', { checks: this.state.hardware.map((c) => c.message) });
        return { ok: true };
      }
      case 'network':
        return this.probeNetwork(wait);
      case 'vip':
        return a.vipMode === 'dhcp' && !a.vip.trim() ? this.leaseVip(wait) : { ok: true };
      case 'server-url':
        return this.probeOnce('serverUrl', a.serverUrl, wait, async () => {
          const url = /^https:\/\//.test(a.serverUrl.trim()) ? a.serverUrl.trim() : `https://${a.serverUrl.trim()}`;
          const r = await (await probes()).pingServer(url.replace(/(:\d+)?\/?$/, ':443'), 15_000);
          return r.ok ? undefined : `Failed to reach ${r.detail}. Press Enter again to use it anyway, or change the value to check again.`;
        }, 'Checking the management address', 20_000);
      case 'ntp': {
        const servers = listOf(a.ntp);
        if (servers.length === 0) {
          return this.confirmOnce('ntp', a.ntp, 'Empty NTP Server is not recommended. Press Enter again to use current configuration anyway.');
        }
        return this.probeOnce('ntp', a.ntp, wait, async () => {
          const { ntpReachable } = await probes();
          const rs = await Promise.all(servers.map((s) => ntpReachable(s)));
          const bad = rs.filter((r) => !r.ok);
          return bad.length ? `Failed to reach NTP servers: ${bad.map((r) => r.detail).join('; ')}. Press Enter again to use current configuration anyway, or change the value to revalidate.` : undefined;
        }, 'Checking the NTP servers', 6000);
      }
      case 'proxy':
        for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) {
          if (a.proxy.trim()) process.env[k] = a.proxy.trim();
          else delete process.env[k];
        }
        return { ok: true };
      case 'ssh': {
        if (!a.sshKeyUrl.trim()) {
          a.sshKeys = [];
          return { ok: true };
        }
        if (a.sshKeys.length) return { ok: true };
        const w = wait(`Fetching ${a.sshKeyUrl.trim()}`, 32_000);
        const r = await (await probes()).fetchSshKeys(a.sshKeyUrl.trim());
        if (w.cancelled) return 'handled';
        if (r.error) return { ok: false, field: 'sshKeyUrl', messages: [{ level: 'error', text: `fail to fetch SSH keys: ${r.error}` }] };
        a.sshKeys = r.keys;
        this.opts.log.info('ssh keys imported', { url: a.sshKeyUrl, count: r.keys.length });
        // The page grows a "Password auth" choice (and says how many keys came): stay on it once more.
        return { ok: false, field: 'passwordAuth', messages: [] };
      }
      case 'config-url':
        return this.fetchRemote(wait);
      case 'summary':
        return this.confirm();
      default:
        return { ok: true };
    }
  }

  private confirmOnce(field: string, value: string, text: string): SubmitResult {
    const key = `${field}=${value}`;
    if (this.confirmable === key) return { ok: true };
    this.confirmable = key;
    return { ok: false, field, messages: [{ level: 'warning', text }], confirmable: true };
  }

  private async probeOnce(field: string, value: string, wait: (t: string, d: number) => Waiting, probe: () => Promise<string | undefined>, what: string, deadlineMs: number): Promise<SubmitResult | 'handled'> {
    const key = `${field}=${value}`;
    if (this.confirmable === key) return { ok: true };
    const w = wait(what, deadlineMs);
    const problem = await probe();
    if (w.cancelled) return 'handled';
    if (!problem) return { ok: true };
    this.confirmable = key;
    this.opts.log.warn('probe failed', { field, problem });
    return { ok: false, field, messages: [{ level: 'warning', text: problem }], confirmable: true };
  }

  private async probeNetwork(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    if (a.method !== 'dhcp' || !this.opts.probeLinks) return { ok: true };
    const nic = a.nics.find((n) => this.state.facts.nics.some((x) => x.name === n && linkUp(x))) ?? a.nics[0]!;
    const secs = Math.round(this.opts.dhcp.timeoutMs / 1000);
    const w = wait(`Requesting an address by DHCP on ${nic}`, this.opts.dhcp.timeoutMs + 2000);
    const { dhcpLease, hasDefaultRoute } = await probes();
    const r = await dhcpLease(nic, { ...this.opts.dhcp, runDir: this.opts.runDir });
    if (w.cancelled) return 'handled';
    this.opts.log.info('dhcp test', { nic, ok: r.ok, detail: r.detail });
    if (r.ok) {
      if (!(await hasDefaultRoute())) return { ok: false, field: 'method', messages: [{ level: 'error', text: 'No default route found. Please check the router setting on the DHCP server.' }] };
      return { ok: true };
    }
    const text = `Requesting IP through DHCP failed: ${r.detail}`;
    w.end();
    const choice = await this.app.ask('No DHCP answer', `${text}. Waited ${secs} s (--dhcp-timeout). Try again, give a static address, or stay on this page.`, ['Try again', 'Use static', 'Stay here'], 0);
    if (choice === 0) return this.probeNetwork(wait);
    if (choice === 1) {
      a.method = 'static';
      return { ok: false, field: 'address', messages: [{ level: 'info', text: 'DHCP did not answer: give the address by hand.' }] };
    }
    return { ok: false, field: 'method', messages: [{ level: 'error', text }] };
  }

  private async leaseVip(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    if (!this.opts.probeLinks) return { ok: true };
    const nic = a.nics[0];
    if (!nic) return { ok: false, field: 'vipMode', messages: [{ level: 'error', text: 'choose a management NIC first (Esc back to the network page)' }] };
    const mac = a.vipHwAddr.trim() || randomMac();
    a.vipHwAddr = mac;
    const w = wait(`Requesting the VIP by DHCP for ${mac} on ${nic}`, this.opts.dhcp.timeoutMs + 2000);
    const r: ProbeResult = await (await probes()).dhcpLease(nic, { ...this.opts.dhcp, runDir: this.opts.runDir, hwAddr: mac });
    if (w.cancelled) return 'handled';
    this.opts.log.info('vip dhcp', { nic, mac, ok: r.ok, detail: r.detail });
    if (r.ok && r.value) {
      a.vip = r.value;
      return { ok: false, field: 'vip', messages: [{ level: 'info', text: `VIP ${r.value} leased for ${mac}; Enter again to go on.` }] };
    }
    return { ok: false, field: 'vipMode', messages: [{ level: 'error', text: `fail to get vip: ${r.detail}. Choose Static to give the VIP by hand.` }] };
  }

  /**
   * The remote config: fetched once, then validated merged under the answers (as it will be
   * installed); the findings about the remote's own content are shown and nothing is merged until
   * there are none.
   */
  private async fetchRemote(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const url = this.state.answers.configUrl.trim();
    if (!url) {
      this.state.remote = undefined;
      return { ok: true };
    }
    if (this.state.remote?.url === url) return { ok: true };
    const w = wait(`Fetching ${url} (3 attempts, 10 s each)`, 40_000);
    let read;
    try {
      read = await readConfigText(url, { attempts: 3, timeoutMs: 10_000, retryDelayMs: 1000 });
    } catch (err) {
      if (w.cancelled) return 'handled';
      this.opts.log.warn('remote config unreachable', { url, error: describeError(err) });
      return { ok: false, field: 'configUrl', messages: [{ level: 'error', text: describeError(err).replace(/^error: /, '').replace(/\n\s*/g, ' ') + ' Nothing was merged.' }] };
    }
    if (w.cancelled) return 'handled';
    const nothing = (findings: Finding[]): SubmitResult => {
      this.opts.log.warn('remote config invalid', { url, errors: findings.map(formatFinding) });
      return {
        ok: false,
        field: 'configUrl',
        messages: [
          { level: 'error', text: `${url} is not a valid config (${findings.length} error(s)); nothing was merged:` },
          ...findings.map((f) => ({ level: 'error' as const, text: formatFinding(f).replace(/\n\s*/g, ' ') })),
        ],
      };
    };
    if (read.error || read.text === undefined) return nothing(read.error ? [read.error] : []);
    const candidate = { url, text: read.text };
    const merged = await validateAnswers({ ...this.state, remote: candidate });
    const own = merged.errors.filter((f) => f.source === url);
    if (own.length) return nothing(own);
    this.state.remote = candidate;
    this.opts.log.info('remote config fetched', { url, warnings: merged.warnings.filter((f) => f.source === url).map(formatFinding) });
    return { ok: true };
  }

  private async confirm(): Promise<SubmitResult | 'handled'> {
    const s = this.state.summary;
    const f = (this.app.current() as PageScreen).form.field('confirm');
    const choice = f?.kind === 'select' ? f.value : 'back';
    if (!s) return 'handled';
    if (choice === 'no') {
      await this.halt('Installation halted.');
      return 'handled';
    }
    if (choice === 'back' || !s.canInstall) {
      this.back();
      return 'handled';
    }
    this.redactor = new Redactor().addFrom(s.config).add(this.state.answers.password, this.state.answers.token);
    if (this.opts.dryRun) {
      await mkdir(path.dirname(this.opts.configFile), { recursive: true });
      await (await installRun()).writeConsoleConfig(this.opts.configFile, s.config, this.opts.log);
      this.opts.log.info('dry run: stopped before touching any disk', { configFile: this.opts.configFile });
      this.app.show(new InfoScreen('Dry run complete', [`The config was written to ${this.opts.configFile} (mode 0600).`, 'No disk was touched (--dry-run).', '', `Install it later with: hvinstall install --config ${this.opts.configFile} --yes`], () => this.app.exit(0)));
      return 'handled';
    }
    void this.install();
    return 'handled';
  }

  private async halt(text: string): Promise<void> {
    this.opts.log.info('halted by the operator', { text });
    if (this.opts.noReboot) {
      this.app.show(new InfoScreen('Installation halted', [text, 'Nothing was written to any disk.', 'Not rebooting (--no-reboot).'], () => this.app.exit(1)));
      return;
    }
    this.app.show(new ChoiceScreen('Installation halted', [text, 'Rebooting system in 5 seconds'], [], () => undefined));
    setTimeout(() => void this.powerAction('reboot').then(() => this.app.exit(1)), 5000);
  }

  // ---- install -----------------------------------------------------------------------------

  private async install(): Promise<void> {
    const s = this.state.summary!;
    const progress = new ProgressScreen(s.plan?.steps.map((x) => x.name) ?? []);
    this.app.show(progress);
    const ctl = new AbortController();
    this.installing = ctl;
    const ticker = setInterval(() => this.app.redraw(), 1000);
    let result: ConsoleInstallResult;
    try {
      await mkdir(path.dirname(this.opts.configFile), { recursive: true, mode: 0o700 });
      const { writeConsoleConfig, installFromConsole } = await installRun();
      await writeConsoleConfig(this.opts.configFile, s.config, this.opts.log);
      progress.note(`config written to ${this.opts.configFile}`);
      result = await installFromConsole({
        configFile: this.opts.configFile,
        source: this.opts.source,
        bundle: this.opts.bundle,
        agent: this.opts.agent,
        stateDir: this.opts.stateDir,
        systemSizeMiB: this.opts.systemSizeMiB,
        log: this.opts.log,
        signal: ctl.signal,
        onEvent: (e) => {
          progress.event(e);
          this.app.redraw();
        },
      });
    } catch (err) {
      result = { refused: err };
    } finally {
      clearInterval(ticker);
      this.installing = undefined;
    }
    const ok = result.outcome?.ok === true;
    this.opts.log.info('install finished', { ok, failedStep: result.outcome?.failedStep, journal: result.outcome?.journalFile });
    if (ok) this.succeeded(result);
    else await this.failed(result);
  }

  private async failed(r: ConsoleInstallResult): Promise<void> {
    const { resumeCommand } = await installRun();
    const o = r.outcome && describeFailedInstall(r.outcome, this.redactor);
    const text = o ? o.error : this.redactor.redactString(describeError(r.refused));
    // What went wrong and what to do come first, with the choices; the record follows.
    const lines: string[] = ['** Installation Failed **', ''];
    if (o) lines.push(o.refused ? 'The install was refused before any disk was changed.' : `The install failed in step ${o.failedStep}.`);
    else lines.push('The install could not start; no disk was changed.');
    lines.push(...text.split('\n'), '');
    lines.push('To resume: fix the cause, then choose Retry: the install resumes from its journal (steps already done are kept).');
    const after: string[] = [''];
    if (o) {
      after.push(`journal: ${o.journal}`);
      if (o.steps !== undefined) after.push(`steps: ${o.steps}`);
      if (o.invalidated.length > 0) after.push(`invalidated so it cannot boot half-installed: ${o.invalidated.join(', ')}`);
      after.push(`install log: ${o.logFile}`);
    }
    if (this.opts.logFile) after.push(`console log: ${this.opts.logFile}`);
    after.push(`From a shell: ${resumeCommand(this.opts)}`);
    this.app.show(
      new ChoiceScreen('Installation failed', lines, ['Retry', 'Quit to a shell'], (c) => {
        if (c === 0) void this.install();
        else this.app.exit(3);
      }, after),
    );
  }

  private succeeded(r: ConsoleInstallResult): void {
    const o = r.outcome!;
    const powerOff = this.state.summary?.config.install?.powerOff === true;
    const action = powerOff ? 'poweroff' : 'reboot';
    const lines = [
      `Harvester was installed on ${r.plan?.device}${o.resumed ? ' (resumed from the journal)' : ''}.`,
      `journal: ${o.journalFile}; the install log is on COS_OEM at /oem/install/install.log`,
      `config: ${this.opts.configFile}`,
      '',
    ];
    if (this.opts.noReboot) {
      lines.push(`Not rebooting (--no-reboot). Remove the installation media before you ${action}.`);
      this.app.show(new ChoiceScreen('Installation complete', lines, ['Quit'], () => this.app.exit(0)));
      return;
    }
    let left = 10;
    const screen = new ChoiceScreen('Installation complete', [...lines, `Remove the installation media. The system will ${action} in ${left} seconds.`], [action === 'reboot' ? 'Reboot now' : 'Power off now', 'Cancel (stay here)'], (c) => {
      clearInterval(timer);
      if (c === 0) void this.powerAction(action).then(() => this.app.exit(0));
      else this.app.show(new ChoiceScreen('Installation complete', [...lines, `${action} cancelled.`], [action === 'reboot' ? 'Reboot now' : 'Power off now', 'Quit to a shell'], (k) => (k === 0 ? void this.powerAction(action).then(() => this.app.exit(0)) : this.app.exit(0))));
    });
    this.app.show(screen);
    const timer = setInterval(() => {
      left--;
      screen.lines[screen.lines.length - 1] = `Remove the installation media. The system will ${action} in ${left} seconds.`;
      this.app.redraw();
      if (left <= 0) {
        clearInterval(timer);
        void this.powerAction(action).then(() => this.app.exit(0));
      }
    }, 1000);
  }

  private async powerAction(action: 'reboot' | 'poweroff'): Promise<void> {
    this.opts.log.info('power action', { action });
    const { run } = await import('../../lib/exec.js');
    await run(action, ['-f'], { allowFailure: true, timeoutMs: 30_000 }).catch(() => undefined);
  }
}

function randomMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfe) | 0x02; // locally administered, unicast
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

// ---- screens ---------------------------------------------------------------------------------

interface PageHooks {
  redraw(): void;
  store(f: Field): void;
  check(f: Field): Promise<FieldMessage[]>;
  submit(wait: (text: string, deadlineMs: number) => Waiting): Promise<SubmitResult | 'handled'>;
  back(): void;
  next(): void;
  rescan(): Promise<void>;
  ask(title: string, text: string, choices: string[]): Promise<number>;
  flash(text: string): void;
}

/** One page: its form, the field checks as fields are left, and the page's own step when it is done. */
export class PageScreen implements Screen {
  form: Form;
  readonly help: string;
  private waiting?: Waiting;
  private ticker?: NodeJS.Timeout;

  constructor(
    readonly def: PageDef,
    private readonly state: ConsoleState,
    readonly progress: string,
    private readonly hooks: PageHooks,
  ) {
    this.form = new Form(def.items(state));
    this.help = typeof def.help === 'function' ? def.help(state) : (def.help ?? DEFAULT_HELP);
  }

  get title(): string {
    return this.def.title(this.state);
  }

  /** Rebuilds the page from the answers, keeping focus and messages. */
  relayout(focusId?: string): void {
    const keep = this.form.focused()?.id;
    const messages = new Map(this.form.fields().map((f) => [f.id, f.messages]));
    this.form = new Form(this.def.items(this.state));
    for (const f of this.form.fields()) f.messages = messages.get(f.id);
    const target = focusId ?? keep;
    if (target) this.form.focusOn(target);
  }

  body(width: number): Line[] {
    const lines = this.form.render(width);
    if (this.waiting) {
      const w = this.waiting;
      const secs = Math.floor((Date.now() - w.since) / 1000);
      const text = `${w.text}... ${secs} s (gives up after ${Math.round(w.deadlineMs / 1000)} s)   Esc: stop waiting`;
      lines.push(...wrap(text, width).map((t) => ({ segs: [{ text: t, attr: ATTR_BOLD }], anchor: true })));
    }
    return lines;
  }

  async key(k: Key): Promise<void> {
    if (this.waiting) {
      if (k.kind === 'key' && k.name === 'escape') this.stopWaiting(true);
      return;
    }
    if (k.kind === 'key' && k.name === 'f5' && ['disk', 'network'].includes(this.def.id)) {
      await this.hooks.rescan();
      this.relayout();
      this.hooks.flash('rescanned the disks and NICs');
      return;
    }
    const action = this.form.handleKey(k);
    if (action.type === 'back') {
      this.hooks.back();
      return;
    }
    if (action.type === 'edited') {
      this.hooks.store(action.field);
      // A text field re-lays the page when it is left, not at every key (the cursor stays put).
      if (action.field.kind !== 'text' && this.def.relayout?.includes(action.field.id)) this.relayout();
      return;
    }
    // The hardware page of a machine nothing can make installable has nothing to fill in: Enter halts it.
    if (action.type === 'none' && k.kind === 'key' && k.name === 'enter' && this.def.id === 'hardware' && this.form.fields().length === 0) {
      await this.submitPage();
      return;
    }
    if (action.type !== 'leave') return;
    const f = action.field;
    this.hooks.store(f);
    if (action.direction === 'backward') {
      this.form.move(-1);
      return;
    }
    f.messages = await this.hooks.check(f);
    if (this.def.relayout?.includes(f.id)) this.relayout(f.id);
    const shown = this.form.field(f.id);
    if (shown?.messages?.some((m) => m.level === 'error')) return;
    if (this.form.move(1)) return;
    await this.submitPage();
  }

  private async submitPage(): Promise<void> {
    // Every field again, in case an earlier one depends on a later answer.
    for (const f of this.form.fields()) {
      f.messages = [...(await this.hooks.check(f)), ...(f.messages ?? []).filter((m) => m.level === 'info')];
      if (f.messages.some((m) => m.level === 'error')) {
        this.form.focusOn(f.id);
        return;
      }
    }
    const r = await this.hooks.submit((text, deadlineMs) => this.startWaiting(text, deadlineMs));
    this.stopWaiting(false);
    if (r === 'handled') return;
    if (r.ok) {
      this.hooks.next();
      return;
    }
    this.relayout(r.field);
    const f = this.form.field(r.field) ?? this.form.fields()[this.form.fields().length - 1];
    if (f) {
      f.messages = r.messages;
      this.form.focusOn(f.id);
    } else {
      this.form.items.push({ kind: 'static', id: 'result', lines: r.messages.map((m) => m.text) });
    }
  }

  private startWaiting(text: string, deadlineMs: number): Waiting {
    const w: Waiting = { text, since: Date.now(), deadlineMs, cancelled: false, end: () => this.waiting === w && this.stopWaiting(false) };
    this.waiting = w;
    this.ticker = setInterval(() => this.hooks.redraw(), 1000);
    this.hooks.redraw();
    return w;
  }

  private stopWaiting(cancelled: boolean): void {
    if (this.waiting) this.waiting.cancelled ||= cancelled;
    this.waiting = undefined;
    clearInterval(this.ticker);
    if (cancelled) this.hooks.flash('stopped waiting');
    this.hooks.redraw();
  }
}

/** The install as it runs: every step with its state, the current step's bytes, the last messages. */
export class ProgressScreen implements Screen {
  readonly title = 'Installing Harvester';
  readonly help = 'Ctrl-C: stop the install (asks first)';
  private readonly status = new Map<string, string>();
  private bytes?: { step: string; done: number; total: number; rate: number };
  private readonly messages: string[] = [];
  private readonly started = Date.now();
  private total = 0;

  constructor(private steps: string[]) {}

  note(text: string): void {
    this.messages.push(text);
  }

  event(e: StampedEvent): void {
    if (e.type === 'step') {
      if (!this.steps.includes(e.step)) this.steps = [...this.steps, e.step];
      this.status.set(e.step, e.phase);
      this.total = e.total;
      if (e.phase !== 'started') this.bytes = this.bytes?.step === e.step ? undefined : this.bytes;
      if (e.phase === 'failed' && e.message) this.messages.push(`${e.step} failed: ${e.message}`);
    } else if (e.type === 'bytes') {
      this.bytes = { step: e.step, done: e.done, total: e.total, rate: e.rateBytesPerSec };
    } else if (e.type === 'message' && e.message) {
      this.messages.push(`${e.level === 'info' ? '' : `${e.level}: `}${e.message}`);
    } else if (e.type === 'install') {
      this.messages.push(`install ${e.phase} on ${e.device}${e.message ? `: ${e.message}` : ''}`);
    }
  }

  get progress(): string {
    const done = [...this.status.values()].filter((p) => p === 'done' || p === 'skipped').length;
    const secs = Math.floor((Date.now() - this.started) / 1000);
    return `${done}/${this.total || this.steps.length} steps, ${Math.floor(secs / 60)}:${String(secs % 60).padStart(2, '0')}`;
  }

  body(width: number): Line[] {
    const out: Line[] = [];
    for (const s of this.steps) {
      const phase = this.status.get(s);
      const mark = phase === 'done' ? '[done]' : phase === 'skipped' ? '[kept]' : phase === 'started' ? '[ .. ]' : phase === 'failed' ? '[FAIL]' : '[    ]';
      out.push({ segs: [{ text: `${mark} ${s}`, attr: phase === 'started' ? ATTR_BOLD : 0 }], anchor: phase === 'started' });
      if (phase === 'started' && this.bytes?.step === s && this.bytes.total > 0) {
        const pct = Math.floor((this.bytes.done * 100) / this.bytes.total);
        const barW = Math.max(10, Math.min(40, width - 40));
        const fill = Math.round((barW * pct) / 100);
        out.push({ segs: [{ text: '       [' }, { text: '#'.repeat(fill), attr: ATTR_REVERSE }, { text: `${'.'.repeat(barW - fill)}] ${pct}%` }] });
        out.push({ segs: [{ text: `       ${formatBytes(this.bytes.done)} of ${formatBytes(this.bytes.total)}, ${formatBytes(this.bytes.rate)}/s` }] });
      }
    }
    out.push({ segs: [] });
    for (const m of this.messages.slice(-6)) for (const w of wrap(m, width)) out.push({ segs: [{ text: w }] });
    return out;
  }

  key(): void {}
}

/** Text and a row of choices (failure, success). */
export class ChoiceScreen implements Screen {
  readonly help = 'Left/Right: choose  Enter: confirm  PgUp/PgDn: scroll';
  private choice = 0;

  constructor(
    readonly title: string,
    readonly lines: string[],
    private readonly choices: string[],
    private readonly done: (choice: number) => void,
    /** Text below the choices (details a person scrolls to with PgDn). */
    private readonly after: string[] = [],
  ) {}

  body(width: number): Line[] {
    const text = (ls: string[]): Line[] => ls.flatMap((l) => wrap(l, width).map((t) => ({ segs: [{ text: t }] })));
    const out: Line[] = text(this.lines);
    out.push({ segs: [] });
    if (this.choices.length) {
      out.push({
        segs: this.choices.flatMap((c, i) => [{ text: i ? '  ' : '' }, { text: `[ ${ellipsis(c, width - 6)} ]`, attr: i === this.choice ? ATTR_REVERSE : 0 }]),
        anchor: true,
      });
    }
    out.push(...text(this.after));
    return out;
  }

  key(k: Key): void {
    if (k.kind !== 'key') return;
    if (k.name === 'left' || k.name === 'up' || k.name === 'backtab') this.choice = Math.max(0, this.choice - 1);
    else if (k.name === 'right' || k.name === 'down' || k.name === 'tab') this.choice = Math.min(this.choices.length - 1, this.choice + 1);
    else if (k.name === 'enter') this.done(this.choice);
  }
}

export class InfoScreen extends ChoiceScreen {
  constructor(title: string, lines: string[], done: () => void) {
    super(title, lines, ['OK'], () => done());
  }
}

/** What the first screen does not need is loaded when it is: the cold start counts (bench/console.bench.mjs). */
const probes = (): Promise<typeof import('./probes.js')> => import('./probes.js');
const installRun = (): Promise<typeof import('./install-run.js')> => import('./install-run.js');
