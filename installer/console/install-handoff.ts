/**
 * The install hand-off: the confirmation page's answer (halt, dry run or install), the install
 * through the pipeline (install-run.ts) with its progress, a failure screen that resumes, and the
 * reboot or power-off.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { App } from '../../lib/tui/app.js';
import { describeError } from '../../lib/errors.js';
import { Redactor } from '../../lib/redact.js';
import { describeFailedInstall } from '../steps/failed-install.js';
import type { ConsoleContext, ConsoleOptions } from './context.js';
import type { ConsoleInstallResult } from './install-run.js';
import type { PageScreen } from './page-screen.js';
import type { ConsoleState, SubmitResult } from './pages.js';
import { ChoiceScreen, InfoScreen, ProgressScreen } from './screens.js';

export class InstallHandoff {
  /** Set while the install runs: Ctrl-C aborts it. */
  installing?: AbortController;
  private redactor = new Redactor();
  private readonly app: App;
  private readonly state: ConsoleState;
  private readonly opts: ConsoleOptions;

  constructor(
    ctx: ConsoleContext,
    private readonly back: () => void,
  ) {
    this.app = ctx.app;
    this.state = ctx.state;
    this.opts = ctx.opts;
  }

  async confirm(): Promise<SubmitResult | 'handled'> {
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

  async halt(text: string): Promise<void> {
    this.opts.log.info('halted by the operator', { text });
    if (this.opts.noReboot) {
      this.app.show(new InfoScreen('Installation halted', [text, 'Nothing was written to any disk.', 'Not rebooting (--no-reboot).'], () => this.app.exit(1)));
      return;
    }
    this.app.show(new ChoiceScreen('Installation halted', [text, 'Rebooting system in 5 seconds'], [], () => undefined));
    setTimeout(() => void this.powerAction('reboot').then(() => this.app.exit(1)), 5000);
  }

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

const installRun = (): Promise<typeof import('./install-run.js')> => import('./install-run.js');
