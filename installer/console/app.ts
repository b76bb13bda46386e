/**
 * `hvinstall console`: a config up front when one is found or asked for (config-first.ts), then the
 * pages (pages.ts, each shown by page-screen.ts) walked in order, each field
 * checked as it is left (checks.ts), each page's own step once it is done (page-steps.ts: the network
 * probed where Harvester's console probes it, probes.ts), the whole config confirmed (summary.ts),
 * then the install hand-off (install-handoff.ts: the pipeline through install-run.ts, its progress
 * and failure screens, screens.ts, and the reboot). This file is the navigation between the pages.
 */
import { randomBytes } from 'node:crypto';
import { App } from '../../lib/tui/app.js';
import type { Field, FieldMessage } from '../../lib/tui/form.js';
import type { Terminal } from '../../lib/tui/terminal.js';
import { runPreflightChecks } from '../preflight/index.js';
import { answersFrom, splitCidr } from './answers.js';
import { fieldMessages, type FieldId } from './checks.js';
import { ConfigFirstStep } from './config-first.js';
import type { ConsoleOptions } from './context.js';
import { InstallHandoff } from './install-handoff.js';
import { defaultDisk, defaultPersistentSize, findListedDisk } from './machine.js';
import { PageScreen } from './page-screen.js';
import { PageSteps } from './page-steps.js';
import { PASTED_SOURCE, PasteScreen } from './paste-screen.js';
import { prefill } from './prefill.js';
import { MACHINE_CHECKS, PAGES, type ConsoleState, type PageDef } from './pages.js';

export class ConsoleApp {
  readonly state: ConsoleState;
  private readonly app: App;
  private readonly salt = randomBytes(12).toString('base64').replace(/\+/g, '.').replace(/=/g, '').slice(0, 16);
  private page = 0;
  private readonly handoff: InstallHandoff;
  private readonly steps: PageSteps;
  private readonly configFirst: ConfigFirstStep;

  constructor(
    term: Terminal,
    private readonly opts: ConsoleOptions,
  ) {
    const hardware = runPreflightChecks(opts.facts, { profile: 'testing' }).checks.filter((c) => MACHINE_CHECKS.has(c.id) && c.result !== 'pass');
    const configFirst = { shown: false, volumes: [], choice: 'paste', label: '' };
    this.state = { answers: answersFrom({}), facts: opts.facts, base: opts.base, skipchecks: false, allowLegacyBios: opts.allowLegacyBios === true, hardware, configFirst };
    prefill(this.state, opts.base, opts);
    this.app = new App(term, {
      name: 'Harvester installer (hvinstall console)',
      quitQuestion: () =>
        this.handoff.installing
          ? 'Stop the install? The disk is invalidated so it cannot boot half-installed; the journal is kept and a retry resumes it.'
          : 'Quit the installer? Nothing has been written to any disk.',
      onKeyError: (err) => this.opts.log.error('a key could not be handled', { page: PAGES[this.page]?.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
      onQuit: () => {
        if (!this.handoff.installing) return true;
        this.handoff.installing.abort(new Error('stopped from the console (Ctrl-C)'));
        return false;
      },
    });
    const ctx = { app: this.app, state: this.state, opts };
    this.handoff = new InstallHandoff(ctx, () => this.back());
    this.steps = new PageSteps(ctx, this.handoff);
    this.configFirst = new ConfigFirstStep(ctx, () => this.paste(PAGES.find((p) => p.id === 'config')!));
  }

  async run(): Promise<number> {
    this.opts.log.info('console started', { dryRun: this.opts.dryRun, disks: this.opts.facts.disks.length, nics: this.opts.facts.nics.length });
    // Before the first page: a config medium found is offered first (one bounded probe).
    await this.configFirst.discover();
    const first = this.applicable()[0]!;
    this.page = PAGES.indexOf(first);
    return this.app.start(this.pageScreen(first));
  }

  /** Shows an error that escaped a handler (it is in the log with its stack). */
  internalError(err: unknown): void {
    this.app.flash(`internal error (logged): ${(err as Error)?.message ?? String(err)}`, 15_000);
  }

  private applicable(): PageDef[] {
    return PAGES.filter((p) => p.applies(this.state) && (this.state.answers.mode !== 'install' || ['hardware', 'config', 'mode', 'password', 'disk', 'summary'].includes(p.id)));
  }

  private goto(p: PageDef): void {
    this.page = PAGES.indexOf(p);
    this.steps.confirmable = undefined;
    this.opts.log.info('page', { page: p.id });
    if (p.id === 'summary') {
      this.state.summary = undefined;
      this.app.show(this.pageScreen(p));
      void this.refreshSummary();
      return;
    }
    this.app.show(this.pageScreen(p));
  }

  private next(from: PageDef = PAGES[this.page]!): void {
    const list = this.applicable();
    const i = list.findIndex((p) => p === from);
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

  private pageScreen(def: PageDef): PageScreen {
    const list = this.applicable();
    const progress = `${list.indexOf(def) + 1}/${list.length}`;
    return new PageScreen(def, this.state, progress, {
      redraw: () => this.app.redraw(),
      store: (f) => this.store(f),
      check: (f) => this.checkField(f),
      submit: (w) => (def.id === 'config' ? this.configFirst.submit(w) : this.steps.submit(def, w)),
      back: () => this.back(),
      next: () => this.next(),
      rescan: () => (def.id === 'config' ? this.configFirst.discover() : this.rescan()),
      ask: (t, x, c) => this.app.ask(t, x, c),
      flash: (t) => this.app.flash(t),
      f2: () => this.f2(def),
    });
  }

  /** F2: on the mode page, the config page (when no medium put it in the walk); elsewhere the paste screen. */
  private f2(def: PageDef): void {
    if (def.id !== 'mode') return this.paste(def);
    this.state.configFirst.shown = true;
    this.goto(PAGES.find((p) => p.id === 'config')!);
  }

  /**
   * The paste screen: on the remote-config page the text is merged under the answers and the page
   * comes back; on the config page it is taken (its values become the answers) and the walk goes on.
   */
  private paste(def: PageDef): void {
    this.opts.log.info('page', { page: 'paste' });
    const first = def.id === 'config';
    this.app.show(
      new PasteScreen({
        accept: async (text) => {
          const r = first ? await this.configFirst.take({ url: PASTED_SOURCE, text }) : await this.steps.merge({ url: PASTED_SOURCE, text });
          return r.ok ? { ok: true } : { ok: false, messages: r.messages.map((m) => m.text) };
        },
        done: (merged) => {
          if (merged && first) return this.next(def);
          if (merged) this.state.answers.configUrl = '';
          this.goto(def);
          if (merged) this.app.flash('the pasted config is merged under the answers; Enter to go on');
        },
        redraw: () => this.app.redraw(),
      }),
    );
  }

  private store(f: Field): void {
    const a = this.state.answers as unknown as Record<string, unknown>;
    if (f.id === 'proceed' || f.id === 'confirm') return;
    // The config page's own choice: not an answer (no config key).
    if (f.id === 'configSource' && f.kind === 'select') this.state.configFirst.choice = f.value;
    if (f.id === 'configLabel' && f.kind === 'text') this.state.configFirst.label = f.value;
    if (f.id === 'configSource' || f.id === 'configLabel') return;
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
    // A URL typed replaces a pasted config; leaving the field empty keeps it.
    if (f.id === 'configUrl' && (f.kind !== 'text' || f.value.trim() !== '' || this.state.remote?.url !== PASTED_SOURCE)) this.state.remote = undefined;
  }

  private async checkField(f: Field): Promise<FieldMessage[]> {
    if (['proceed', 'confirm', 'configSource', 'configLabel'].includes(f.id)) return [];
    return fieldMessages(f.id as FieldId, { ...this.state });
  }

  private async rescan(): Promise<void> {
    this.state.facts = await this.opts.rescan();
    this.state.answers.device = findListedDisk(this.state.facts, this.state.answers.device) ? this.state.answers.device : defaultDisk(this.state.facts);
    this.state.answers.nics = this.state.answers.nics.filter((n) => this.state.facts.nics.some((x) => x.name === n));
    this.opts.log.info('rescanned the machine', { disks: this.state.facts.disks.map((d) => d.path), nics: this.state.facts.nics.map((n) => `${n.name}:${n.operState}`) });
  }

}
