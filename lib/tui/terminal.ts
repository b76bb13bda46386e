/**
 * The terminal a full-screen program runs on: raw input decoded into keys, its size, and redraws.
 *
 * - Size: what the kernel reports for the tty (TIOCGWINSZ, `columns`/`rows` on the stream), updated
 *   on SIGWINCH. A serial line reports 0x0; then the terminal itself is asked (cursor to 999;999,
 *   then a cursor position report, which VT100s and xterm answer) and 80x24 is assumed until it
 *   answers, or if it never does.
 * - Redraws: on resize, on Ctrl-L and every `refreshMs` (kernel messages and getty banners write
 *   straight to the console and would otherwise stay on screen).
 * - TERM decides only one thing: whether to send 7-bit text (vt100, vt220, dumb; or a locale that
 *   is not UTF-8 on a terminal we do not know). The Linux console (TERM=linux) shows UTF-8.
 */
import { KeyDecoder, type Key } from './keys.js';
import { Canvas, Renderer } from './screen.js';

export interface TerminalStreams {
  input: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };
  output: NodeJS.WritableStream & { isTTY?: boolean; columns?: number; rows?: number; on(ev: 'resize', fn: () => void): unknown; off?(ev: 'resize', fn: () => void): unknown };
}

export interface TerminalOptions {
  env?: NodeJS.ProcessEnv;
  /** Periodic full repaint (ms); 0 disables. */
  refreshMs?: number;
  /** Quiet time after a lone ESC before it counts as the Escape key. */
  escapeMs?: number;
}

export const DEFAULT_SIZE = { rows: 24, cols: 80 };

/** Whether only 7-bit text can be shown, from TERM and the locale. Pure. */
export function asciiOnly(env: NodeJS.ProcessEnv): boolean {
  const term = (env.TERM ?? '').toLowerCase();
  if (/^(vt1\d\d|vt2\d\d|vt52|dumb|ansi)(-|$)/.test(term)) return true;
  if (term === 'linux' || term.startsWith('xterm') || term.startsWith('screen') || term.startsWith('tmux')) return false;
  const locale = env.LC_ALL || env.LC_CTYPE || env.LANG || '';
  return !/utf-?8/i.test(locale);
}

export class Terminal {
  readonly ascii: boolean;
  private readonly decoder = new KeyDecoder();
  private readonly renderer: Renderer;
  private escTimer?: NodeJS.Timeout;
  private refreshTimer?: NodeJS.Timeout;
  private onKeys?: (keys: Key[]) => void;
  private onResize?: () => void;
  private probed?: { rows: number; cols: number };
  private started = false;
  private readonly resizeListener = (): void => {
    this.renderer.invalidate();
    this.onResize?.();
  };
  private readonly dataListener = (chunk: Buffer | string): void => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    this.deliver(this.decoder.feed(bytes));
    clearTimeout(this.escTimer);
    if (this.decoder.pendingEscape) this.escTimer = setTimeout(() => this.deliver(this.decoder.flush()), this.opts.escapeMs ?? 60);
  };

  constructor(
    private readonly io: TerminalStreams,
    private readonly opts: TerminalOptions = {},
  ) {
    this.ascii = asciiOnly(opts.env ?? process.env);
    this.renderer = new Renderer(io.output, { ascii: this.ascii });
  }

  /** The size to draw for: the tty's, else what the terminal answered, else 80x24. */
  size(): { rows: number; cols: number } {
    const rows = this.io.output.rows ?? 0;
    const cols = this.io.output.columns ?? 0;
    if (rows > 0 && cols > 0) return { rows, cols };
    return this.probed ?? DEFAULT_SIZE;
  }

  /** True when the size is not known from the tty (a serial line). */
  get sizeUnknown(): boolean {
    return !((this.io.output.rows ?? 0) > 0 && (this.io.output.columns ?? 0) > 0);
  }

  start(handlers: { keys: (keys: Key[]) => void; resize: () => void; refresh: () => void }): void {
    this.onKeys = handlers.keys;
    this.onResize = handlers.resize;
    this.io.input.setRawMode?.(true);
    this.io.input.on('data', this.dataListener);
    this.io.input.resume?.();
    this.io.output.on('resize', this.resizeListener);
    this.renderer.start();
    this.started = true;
    if (this.sizeUnknown) this.probeSize();
    const every = this.opts.refreshMs ?? 30_000;
    if (every > 0) {
      this.refreshTimer = setInterval(() => {
        this.renderer.invalidate();
        handlers.refresh();
      }, every);
      this.refreshTimer.unref();
    }
  }

  /** Asks the terminal where the cursor lands when sent to the far corner: that is its size. */
  probeSize(): void {
    this.io.output.write('\x1b7\x1b[999;999H\x1b[6n\x1b8');
  }

  /** Restores the terminal (cooked mode, cursor, auto-wrap); safe to call twice. */
  stop(): void {
    if (!this.started) return;
    this.started = false;
    clearTimeout(this.escTimer);
    clearInterval(this.refreshTimer);
    this.io.input.off?.('data', this.dataListener);
    this.io.output.off?.('resize', this.resizeListener);
    this.renderer.stop();
    this.io.input.setRawMode?.(false);
    this.io.input.pause?.();
  }

  canvas(): Canvas {
    const { rows, cols } = this.size();
    return new Canvas(rows, cols);
  }

  draw(c: Canvas, full = false): void {
    if (full) this.renderer.invalidate();
    this.renderer.render(c);
  }

  private deliver(keys: Key[]): void {
    const rest: Key[] = [];
    for (const k of keys) {
      if (k.kind === 'cursor-report' && this.sizeUnknown) {
        const next = { rows: k.row, cols: k.col };
        if (next.rows >= 5 && next.cols >= 20 && (next.rows !== this.probed?.rows || next.cols !== this.probed?.cols)) {
          this.probed = next;
          this.resizeListener();
        }
        continue;
      }
      if (k.kind === 'cursor-report') continue;
      rest.push(k);
    }
    if (rest.length) this.onKeys?.(rest);
  }
}
