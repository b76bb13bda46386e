/**
 * A full-screen program on a real pseudo-terminal (node-pty), read back through a headless terminal
 * emulator (@xterm/headless) the way a person sees the screen: rows of text, the reverse-video cells
 * that mark what is focused, the cursor. The emulator's answers (a cursor position report) go back
 * to the program, as a real terminal's would.
 */
import path from 'node:path';
import { spawn, type IPty } from 'node-pty';
import xtermHeadless from '@xterm/headless';

const { Terminal } = xtermHeadless as unknown as typeof import('@xterm/headless');

export const REPO = path.resolve(import.meta.dirname, '../../..');
export const CLI = path.join(REPO, 'dist/installer/cli.js');
export const AGENT_CLI = path.join(REPO, 'dist/agent/cli.js');

/** How every frame the console draws begins (lib/tui/screen.ts: the cursor hidden while drawing). */
const FRAME_START = '\x1b[?25l';

export const KEYS = {
  enter: '\r',
  tab: '\t',
  backtab: '\x1b[Z',
  esc: '\x1b',
  up: '\x1b[A',
  down: '\x1b[B',
  right: '\x1b[C',
  left: '\x1b[D',
  space: ' ',
  backspace: '\x7f',
  ctrlC: '\x03',
  ctrlL: '\x0c',
  ctrlU: '\x15',
  f5: '\x1b[15~',
  f12: '\x1b[24~',
} as const;

export interface SessionOptions {
  cols?: number;
  rows?: number;
  env?: Record<string, string>;
  cwd?: string;
}

export class Session {
  readonly term: InstanceType<typeof Terminal>;
  private readonly pty: IPty;
  private exitInfo?: { exitCode: number; signal?: number };
  private readonly exited: Promise<{ exitCode: number; signal?: number }>;
  /** Everything the program wrote, raw (for checks that no stack trace ever reached the screen). */
  raw = '';
  private pending = Promise.resolve();
  /** Frames the program drew so far (each starts with FRAME_START). */
  private frames = 0;

  constructor(file: string, args: string[], opts: SessionOptions = {}) {
    const cols = opts.cols ?? 80;
    const rows = opts.rows ?? 25;
    this.term = new Terminal({ cols, rows, allowProposedApi: true, scrollback: 0 });
    this.pty = spawn(file, args, {
      name: opts.env?.TERM ?? 'xterm',
      cols,
      rows,
      cwd: opts.cwd ?? REPO,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', LANG: 'C.UTF-8', TERM: 'xterm', ...opts.env },
    });
    this.pty.onData((d) => {
      this.raw += d;
      this.frames += d.split(FRAME_START).length - 1;
      this.pending = this.pending.then(() => new Promise<void>((r) => this.term.write(d, r)));
    });
    this.term.onData((d) => this.pty.write(d));
    this.exited = new Promise((resolve) =>
      this.pty.onExit((e) => {
        this.exitInfo = e;
        resolve(e);
      }),
    );
  }

  static console(args: string[], opts: SessionOptions = {}): Session {
    return new Session(process.execPath, [CLI, 'console', ...args], opts);
  }

  /** The screen as rows of text (trailing spaces trimmed). */
  rows(): string[] {
    const b = this.term.buffer.active;
    const out: string[] = [];
    for (let i = 0; i < this.term.rows; i++) out.push((b.getLine(b.viewportY + i)?.translateToString(true) ?? '').trimEnd());
    return out;
  }

  screen(): string {
    return this.rows().join('\n');
  }

  /** The body's text as one line, whitespace collapsed: messages are checked whole, however they wrapped. */
  flat(): string {
    return this.rows().slice(1, -1).map((r) => r.trim()).join(' ').replace(/\s+/g, ' ');
  }

  /** The whole page as a person reads it: PgUp to the top, then PgDn to the end (text flattened). */
  async scrolledText(): Promise<string> {
    for (let i = 0; i < 20 && /\(more\)/.test(this.rows()[2] ?? ''); i++) await this.keys('\x1b[5~');
    const parts = [this.flat()];
    for (let i = 0; i < 20 && /\(more\)/.test(this.rows()[this.term.rows - 2] ?? ''); i++) {
      await this.keys('\x1b[6~');
      parts.push(this.flat());
    }
    return parts.join(' ');
  }

  /** Waits until the body shows the text, however it is wrapped. */
  async waitForText(text: string, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.pending;
      const f = this.flat();
      if (f.includes(text)) return f;
      if (this.exitInfo) throw new Error(`the program exited (${this.exitInfo.exitCode}) before the screen showed ${JSON.stringify(text)}:\n${this.screen()}`);
      if (Date.now() > deadline) throw new Error(`the screen did not show ${JSON.stringify(text)} within ${timeoutMs} ms:\n${this.screen()}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until the body no longer shows the text (a dialog closed); fails with the screen as it was. */
  async waitForTextGone(text: string, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.pending;
      const f = this.flat();
      if (!f.includes(text)) return f;
      if (this.exitInfo) throw new Error(`the program exited (${this.exitInfo.exitCode}) with the screen still showing ${JSON.stringify(text)}:\n${this.screen()}`);
      if (Date.now() > deadline) throw new Error(`the screen still showed ${JSON.stringify(text)} after ${timeoutMs} ms:\n${this.screen()}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Text drawn in reverse video on the body rows (the focused field, the highlighted entry). */
  highlighted(): string[] {
    const b = this.term.buffer.active;
    const out: string[] = [];
    for (let i = 1; i < this.term.rows - 1; i++) {
      const line = b.getLine(b.viewportY + i);
      if (!line) continue;
      let s = '';
      for (let x = 0; x < this.term.cols; x++) {
        const c = line.getCell(x);
        if (c?.isInverse()) s += c.getChars() || ' ';
        else if (s.trim()) break;
      }
      if (s.trim()) out.push(s.trim());
    }
    return out;
  }

  cursor(): { row: number; col: number } {
    const b = this.term.buffer.active;
    return { row: b.cursorY, col: b.cursorX };
  }

  get exitCode(): number | undefined {
    return this.exitInfo?.exitCode;
  }

  /** Waits (bounded) until the screen shows the text; fails with the screen as it was. */
  async waitFor(what: string | RegExp, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.pending;
      const s = this.screen();
      if (typeof what === 'string' ? s.includes(what) : what.test(s)) return s;
      if (this.exitInfo) throw new Error(`the program exited (${this.exitInfo.exitCode}) before the screen showed ${String(what)}:\n${s}`);
      if (Date.now() > deadline) throw new Error(`the screen did not show ${String(what)} within ${timeoutMs} ms:\n${s}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until a page with this title is up (the title is on row 1, on a narrow screen rows 1 and 2). */
  async page(title: string, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.pending;
      const r = this.rows();
      if (r[1]?.trim() === title || `${r[1]?.trim()} ${r[2]?.trim()}` === title) return this.screen();
      if (this.exitInfo) throw new Error(`the program exited (${this.exitInfo.exitCode}) before page ${JSON.stringify(title)}:\n${this.screen()}`);
      if (Date.now() > deadline) throw new Error(`page ${JSON.stringify(title)} did not come within ${timeoutMs} ms:\n${this.screen()}`);
      await new Promise((res) => setTimeout(res, 10));
    }
  }

  /** Waits until the screen stops changing (the program handled what was sent). */
  async settle(quietMs = 150, timeoutMs = 10_000): Promise<string> {
    await this.quiet(() => quietMs, timeoutMs);
    return this.screen();
  }

  /**
   * Waits until the screen, its cursor and its reverse-video cells stayed the same for `quietMs()`
   * (asked again at each look), or until `timeoutMs` passed.
   */
  private async quiet(quietMs: () => number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    let since = Date.now();
    for (;;) {
      await this.pending;
      const s = this.screen() + JSON.stringify(this.cursor()) + this.highlighted().join('|');
      if (s !== last) {
        last = s;
        since = Date.now();
      } else if (Date.now() - since >= quietMs()) return;
      if (Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  write(data: string | Buffer): void {
    this.pty.write(data);
  }

  /**
   * Waits until the program took the input just sent: it drew a frame since `framesBefore` and the
   * screen then stayed the same for a moment (a key's own redraws come at once, together); or, for
   * input that draws nothing, the screen stayed the same for 60 ms as before.
   */
  private took(framesBefore: number): Promise<void> {
    return this.quiet(() => (this.frames > framesBefore ? 25 : 60), 10_000);
  }

  /** Sends keys one at a time, letting the program take each before the next. */
  async keys(...ks: string[]): Promise<void> {
    for (const k of ks) {
      const before = this.frames;
      this.write(k);
      await this.took(before);
    }
  }

  async type(text: string): Promise<void> {
    const before = this.frames;
    this.write(text);
    await this.took(before);
  }

  resize(cols: number, rows: number): void {
    this.pty.resize(cols, rows);
    this.term.resize(cols, rows);
  }

  async exit(timeoutMs = 15_000): Promise<number> {
    const t = setTimeout(() => this.pty.kill('SIGKILL'), timeoutMs);
    const e = await this.exited;
    clearTimeout(t);
    await this.pending;
    return e.exitCode;
  }

  kill(): void {
    if (!this.exitInfo) this.pty.kill('SIGKILL');
  }
}
