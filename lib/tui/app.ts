/**
 * The frame every full-screen program here shares: a title bar, the screen's title, its body in a
 * viewport that follows the focused field, a line of messages and a line of key help. It owns the
 * keys that mean the same everywhere: Ctrl-L repaints (so does a resize, and a timer: kernel
 * messages write straight onto the console), Ctrl-C asks before quitting. Errors thrown by a screen
 * are shown, never a stack trace.
 */
import type { Key } from './keys.js';
import { ATTR_BOLD, ATTR_REVERSE, type Canvas, type Segment } from './screen.js';
import type { Line } from './form.js';
import type { Terminal } from './terminal.js';
import { ellipsis, padTo, textWidth, wrap } from './text.js';

export interface Screen {
  title: string;
  /** The body as lines of `width` columns (a Form renders them). */
  body(width: number): Line[];
  /** Key help for the bottom line, e.g. "Enter: next  Esc: back". */
  help: string;
  key(k: Key): void | Promise<void>;
  /** Shown on the right of the title bar (e.g. "step 3 of 14"). */
  progress?: string;
}

export interface Dialog {
  title: string;
  text: string;
  choices: string[];
  /** Index of the choice Enter takes when nothing was moved (the safe one). */
  initial: number;
  resolve(choice: number): void;
}

export interface AppOptions {
  name: string;
  /** Ctrl-C: what to ask. */
  quitQuestion?: () => string;
  /** After "Yes": false keeps the program running (it stops what it was doing instead). */
  onQuit?: () => boolean;
  /** A key's handling threw: the screen flashes it for a while; this keeps it (the program's log). */
  onKeyError?: (err: unknown) => void;
}

export class App {
  private screen?: Screen;
  private dialog?: Dialog & { choice: number };
  private scroll = 0;
  /** PgUp/PgDn moved the view: it stays where the operator put it until another key. */
  private manualScroll = false;
  private notice?: { text: string; until: number };
  private queue: Key[] = [];
  /** The terminal is lent to another program (suspend): nothing is drawn. */
  private suspended = false;
  private stopped = false;
  private pumping = false;
  private done?: (code: number) => void;
  private readonly finished: Promise<number>;

  constructor(
    readonly term: Terminal,
    private readonly opts: AppOptions,
  ) {
    this.finished = new Promise((r) => (this.done = r));
  }

  start(first: Screen): Promise<number> {
    this.screen = first;
    this.term.start({ keys: (ks) => this.enqueue(ks), resize: () => this.redraw(true), refresh: () => this.redraw(true) });
    this.redraw(true);
    return this.finished;
  }

  /**
   * Gives the terminal to something else (a shell) and takes it back when that is done: cooked mode
   * while it runs, raw mode and a full repaint after.
   */
  async suspend(fn: () => Promise<void>): Promise<void> {
    this.term.stop();
    this.suspended = true;
    try {
      await fn();
    } finally {
      this.suspended = false;
      this.term.start({ keys: (ks) => this.enqueue(ks), resize: () => this.redraw(true), refresh: () => this.redraw(true) });
      this.redraw(true);
    }
  }

  exit(code: number): void {
    this.stopped = true;
    this.term.stop();
    this.done?.(code);
  }

  show(s: Screen): void {
    this.screen = s;
    this.scroll = 0;
    this.manualScroll = false;
    this.redraw();
  }

  current(): Screen | undefined {
    return this.screen;
  }

  /** A line of text under the body for a few seconds (e.g. why a key did nothing). */
  flash(text: string, ms = 4000): void {
    this.notice = { text, until: Date.now() + ms };
    this.redraw();
    setTimeout(() => this.redraw(), ms + 10).unref();
  }

  /** Asks a question in a box over the screen; resolves with the index of the choice. */
  ask(title: string, text: string, choices: string[], initial = 0): Promise<number> {
    return new Promise((resolve) => {
      this.dialog = {
        title,
        text,
        choices,
        initial,
        choice: initial,
        resolve: (c) => {
          this.dialog = undefined;
          this.redraw();
          resolve(c);
        },
      };
      this.redraw();
    });
  }

  redraw(full = false): void {
    if (this.suspended || this.stopped) return;
    const c = this.term.canvas();
    this.paint(c);
    this.term.draw(c, full);
  }

  /** Keys are handled one at a time, in order; a screen that awaits holds the ones typed meanwhile. */
  private enqueue(keys: Key[]): void {
    for (const k of keys) {
      // A dialog and the global keys are served at once, even while a screen awaits (it may be
      // awaiting that very dialog).
      const global = k.kind !== 'key' && k.kind !== 'char' ? true : k.kind === 'key' && (k.name === 'ctrl-c' || k.name === 'ctrl-l');
      if (this.dialog || global) void this.onKey(k);
      else this.queue.push(k);
    }
    if (!this.pumping) void this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.queue.length) await this.onKey(this.queue.shift()!);
    } finally {
      this.pumping = false;
    }
  }

  private async onKey(k: Key): Promise<void> {
    {
      if (k.kind === 'key' && k.name === 'ctrl-l') {
        if (this.term.sizeUnknown) this.term.probeSize();
        this.redraw(true);
        return;
      }
      if (k.kind === 'invalid') {
        this.flash(`ignored ${k.bytes} byte${k.bytes === 1 ? '' : 's'} of input that is not UTF-8 text`);
        return;
      }
      if (k.kind === 'unknown') return;
      if (this.dialog) {
        this.dialogKey(k);
        return;
      }
      if (k.kind === 'key' && k.name === 'ctrl-c') {
        void this.confirmQuit();
        return;
      }
      if (k.kind === 'key' && (k.name === 'pageup' || k.name === 'pagedown')) {
        const step = Math.max(1, this.bodyRows() - 2);
        this.scroll = Math.max(0, this.scroll + (k.name === 'pageup' ? -step : step));
        this.manualScroll = true;
        this.redraw();
        return;
      }
      this.manualScroll = false;
      if (!this.screen) return;
      try {
        await this.screen.key(k);
      } catch (err) {
        this.opts.onKeyError?.(err);
        this.flash(`error: ${(err as Error).message ?? String(err)}`, 10_000);
      }
      this.redraw();
    }
  }

  private async confirmQuit(): Promise<void> {
    const question = this.opts.quitQuestion?.() ?? `Quit ${this.opts.name}?`;
    const choice = await this.ask('Quit?', question, ['No', 'Yes'], 0);
    if (choice === 1 && this.opts.onQuit?.() !== false) this.exit(130);
  }

  private dialogKey(k: Key): void {
    const d = this.dialog!;
    if (k.kind === 'key') {
      if (k.name === 'left' || k.name === 'up' || k.name === 'backtab') d.choice = Math.max(0, d.choice - 1);
      else if (k.name === 'right' || k.name === 'down' || k.name === 'tab') d.choice = Math.min(d.choices.length - 1, d.choice + 1);
      else if (k.name === 'enter' || k.name === 'space') d.resolve(d.choice);
      else if (k.name === 'escape' || k.name === 'ctrl-c') d.resolve(d.initial);
    } else if (k.kind === 'char') {
      const i = d.choices.findIndex((c) => c[0]?.toLowerCase() === k.ch.toLowerCase());
      if (i >= 0) d.resolve(i);
    }
    this.redraw();
  }

  private bodyRows(): number {
    return Math.max(1, this.term.size().rows - 6);
  }

  private paint(c: Canvas): void {
    const { rows, cols } = c;
    const s = this.screen;
    // Title bar
    c.fill(0, 0, ATTR_REVERSE);
    const right = s?.progress ? ` ${s.progress} ` : '';
    c.put(0, 0, ellipsis(` ${this.opts.name}`, Math.max(1, cols - textWidth(right))), ATTR_REVERSE);
    if (right && textWidth(right) < cols - 10) c.put(0, cols - textWidth(right), right, ATTR_REVERSE);
    if (!s) return;
    // A narrow screen wraps the title and the key help onto two lines rather than cutting them.
    const titleLines = wrap(s.title, cols - 2).slice(0, 2);
    titleLines.forEach((t, i) => c.put(1 + i, 1, t, ATTR_BOLD));
    const helpLines = cols < 60 ? wrap(s.help, cols - 1).slice(0, 2) : [ellipsis(s.help, cols - 1)];
    const top = 2 + titleLines.length;
    const bottom = rows - helpLines.length - 1; // the notice line
    const height = Math.max(1, bottom - top);
    const lines = s.body(Math.max(10, cols - 2));
    this.scroll = viewport(lines, height, this.scroll, !this.manualScroll);
    for (let i = 0; i < height && this.scroll + i < lines.length; i++) {
      const line = lines[this.scroll + i]!;
      c.putSegments(top + i, 1, line.segs);
      if (line.cursor !== undefined) c.cursor = { row: top + i, col: 1 + line.cursor };
    }
    if (this.scroll > 0) c.put(top - 1, cols - 9, ' (more) ');
    if (this.scroll + height < lines.length) c.put(top + height, cols - 9, ' (more) ');
    const notice = this.notice && this.notice.until > Date.now() ? this.notice.text : '';
    if (notice) c.put(bottom, 1, ellipsis(notice, cols - 2), ATTR_BOLD);
    helpLines.forEach((h, i) => {
      c.fill(rows - helpLines.length + i, 0, ATTR_REVERSE);
      c.put(rows - helpLines.length + i, 0, ` ${h}`, ATTR_REVERSE);
    });
    if (this.dialog) {
      c.cursor = undefined;
      this.paintDialog(c, this.dialog);
    }
  }

  private paintDialog(c: Canvas, d: Dialog & { choice: number }): void {
    const w = Math.min(c.cols - 2, 60);
    const textLines = wrap(d.text, w - 4);
    const buttons: Segment[] = [];
    d.choices.forEach((label, i) => {
      buttons.push({ text: i === 0 ? '' : '  ' });
      buttons.push({ text: `[ ${label} ]`, attr: i === d.choice ? ATTR_REVERSE : 0 });
    });
    const h = Math.min(c.rows - 2, textLines.length + 5);
    const top = Math.max(1, Math.floor((c.rows - h) / 2));
    const left = Math.max(0, Math.floor((c.cols - w) / 2));
    const border = '+' + '-'.repeat(w - 2) + '+';
    c.put(top, left, border);
    for (let r = 1; r < h - 1; r++) c.put(top + r, left, '|' + ' '.repeat(w - 2) + '|');
    c.put(top + h - 1, left, border);
    c.put(top, left + 2, ` ${ellipsis(d.title, w - 6)} `, ATTR_BOLD);
    textLines.slice(0, h - 4).forEach((l, i) => c.put(top + 1 + i, left + 2, padTo(l, w - 4)));
    c.putSegments(top + h - 2, left + 2, buttons);
  }
}

/** The first line to show so the anchor line is visible, and as much of the focused block as fits. Pure. */
export function viewport(lines: Line[], height: number, scroll: number, follow = true): number {
  const max = Math.max(0, lines.length - height);
  let s = Math.min(Math.max(0, scroll), max);
  const anchor = lines.findIndex((l) => l.anchor);
  if (anchor < 0 || !follow) return s;
  let first = lines.findIndex((l) => l.focused);
  let last = lines.length - 1 - [...lines].reverse().findIndex((l) => l.focused);
  if (first < 0) first = last = anchor;
  if (last - first + 1 <= height) {
    if (first < s) s = first;
    if (last >= s + height) s = last - height + 1;
  }
  if (anchor < s) s = anchor;
  if (anchor >= s + height) s = anchor - height + 1;
  return Math.min(Math.max(0, s), max);
}
