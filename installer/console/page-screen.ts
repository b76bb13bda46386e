/** One page of the console as a screen: its form, the checks as fields are left, the wait for a page's own step. */
import type { Screen } from '../../lib/tui/app.js';
import { Form, type Field, type FieldMessage, type Line } from '../../lib/tui/form.js';
import type { Key } from '../../lib/tui/keys.js';
import { ATTR_BOLD } from '../../lib/tui/screen.js';
import { wrap } from '../../lib/tui/text.js';
import type { ConsoleState, PageDef, SubmitResult } from './pages.js';

const DEFAULT_HELP = 'Enter: next  Tab/Shift-Tab: field  Esc: back  Ctrl-C: quit';

export interface Waiting {
  text: string;
  since: number;
  deadlineMs: number;
  cancelled: boolean;
  /** The wait is over (before a question about its outcome). */
  end(): void;
}

export interface PageHooks {
  redraw(): void;
  store(f: Field): void;
  check(f: Field): Promise<FieldMessage[]>;
  submit(wait: (text: string, deadlineMs: number) => Waiting): Promise<SubmitResult | 'handled'>;
  back(): void;
  next(): void;
  rescan(): Promise<void>;
  ask(title: string, text: string, choices: string[]): Promise<number>;
  flash(text: string): void;
  /** F2: a config up front (the mode page), or pasted (the config and remote-config pages). */
  f2(): void;
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
    if (k.kind === 'key' && k.name === 'f5' && ['disk', 'network', 'config'].includes(this.def.id)) {
      await this.hooks.rescan();
      this.relayout();
      this.hooks.flash(this.def.id === 'config' ? 'looked for config media again' : 'rescanned the disks and NICs');
      return;
    }
    if (k.kind === 'key' && k.name === 'f2' && ['mode', 'config', 'config-url'].includes(this.def.id)) {
      this.hooks.f2();
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
