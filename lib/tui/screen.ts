/**
 * A character-cell screen and the renderer that puts it on a terminal with nothing but ANSI/VT100
 * sequences every console here understands: cursor position (CUP), erase (ED, EL), bold and
 * reverse video (SGR 1, 7), auto-wrap off (DECAWM) and cursor show/hide (DECTCEM; a VT100 ignores
 * it). No colours, no terminfo lookups (the live initramfs has no terminfo database), no alternate
 * screen (the Linux console has none). Frames are diffed cell by cell, so a keystroke on a 9600-baud
 * line costs a few bytes; `full` repaints everything, which is how kernel messages that scribbled
 * over the screen are wiped out.
 */
import { charWidth, printable, toAscii } from './text.js';

export const ATTR_BOLD = 1;
export const ATTR_REVERSE = 2;

export interface Segment {
  text: string;
  attr?: number;
}

interface Cell {
  ch: string;
  attr: number;
  /** Right half of a wide character: drawn by the cell before it. */
  cont?: boolean;
}

const blank = (): Cell => ({ ch: ' ', attr: 0 });

export class Canvas {
  readonly cells: Cell[][];
  cursor?: { row: number; col: number };

  constructor(
    readonly rows: number,
    readonly cols: number,
  ) {
    this.cells = Array.from({ length: rows }, () => Array.from({ length: cols }, blank));
  }

  /** Writes text at (row, col), clipped at the right edge; returns the column after it. */
  put(row: number, col: number, text: string, attr = 0): number {
    if (row < 0 || row >= this.rows) return col;
    const line = this.cells[row]!;
    let c = col;
    for (const ch of printable(text)) {
      const w = charWidth(ch.codePointAt(0)!);
      if (w === 0) {
        // A combining mark joins the character before it.
        if (c > 0 && c <= this.cols) line[c - 1]!.ch += ch;
        continue;
      }
      if (c + w > this.cols) break;
      if (c >= 0) {
        line[c] = { ch, attr };
        if (w === 2) line[c + 1] = { ch: '', attr, cont: true };
      }
      c += w;
    }
    return c;
  }

  putSegments(row: number, col: number, segs: Segment[]): number {
    let c = col;
    for (const s of segs) c = this.put(row, c, s.text, s.attr ?? 0);
    return c;
  }

  /** Fills the rest of a row from `col` with spaces in `attr` (a title bar in reverse video). */
  fill(row: number, col: number, attr: number, width = this.cols - col): void {
    if (row < 0 || row >= this.rows) return;
    for (let c = Math.max(0, col); c < Math.min(this.cols, col + width); c++) this.cells[row]![c] = { ch: ' ', attr };
  }
}

export interface Output {
  write(s: string): unknown;
}

export interface RendererOptions {
  /** Only 7-bit characters are sent (VT100/VT220 on a serial line). */
  ascii: boolean;
}

function sgr(attr: number): string {
  let s = '\x1b[0';
  if (attr & ATTR_BOLD) s += ';1';
  if (attr & ATTR_REVERSE) s += ';7';
  return s + 'm';
}

export class Renderer {
  private previous?: Canvas;

  constructor(
    private readonly out: Output,
    private readonly opts: RendererOptions,
  ) {}

  /** Puts the terminal in the state the renderer expects: auto-wrap off, attributes reset, screen cleared. */
  start(): void {
    this.out.write('\x1b[?7l\x1b[0m\x1b[H\x1b[2J');
    this.previous = undefined;
  }

  /** Gives the terminal back: attributes reset, auto-wrap on, cursor shown, screen cleared. */
  stop(): void {
    this.out.write('\x1b[0m\x1b[?7h\x1b[?25h\x1b[H\x1b[2J');
    this.previous = undefined;
  }

  /** Forgets what the terminal shows, so the next frame repaints every cell. */
  invalidate(): void {
    this.previous = undefined;
  }

  render(next: Canvas): void {
    const prev = this.previous && this.previous.rows === next.rows && this.previous.cols === next.cols ? this.previous : undefined;
    let s = '\x1b[?25l';
    if (!prev) s += '\x1b[0m\x1b[H\x1b[2J';
    let attr = -1;
    for (let r = 0; r < next.rows; r++) {
      const row = next.cells[r]!;
      const old = prev?.cells[r];
      let c = 0;
      while (c < next.cols) {
        const cell = row[c]!;
        if (cell.cont || (old && same(old[c]!, cell))) {
          c++;
          continue;
        }
        if (!prev && cell.ch === ' ' && cell.attr === 0) {
          c++; // a cleared screen is blank already
          continue;
        }
        // A run of changed cells, written after one cursor move.
        s += `\x1b[${r + 1};${c + 1}H`;
        while (c < next.cols) {
          const x = row[c]!;
          if (x.cont) {
            c++;
            continue;
          }
          if (old && same(old[c]!, x) && (c + 1 >= next.cols || same(old[c + 1]!, row[c + 1]!))) break;
          if (!prev && x.ch === ' ' && x.attr === 0 && (c + 1 >= next.cols || (row[c + 1]!.ch === ' ' && row[c + 1]!.attr === 0))) break;
          if (x.attr !== attr) {
            s += sgr(x.attr);
            attr = x.attr;
          }
          s += this.opts.ascii ? toAscii(x.ch) : x.ch;
          c++;
        }
      }
    }
    if (attr !== 0) s += '\x1b[0m';
    if (next.cursor) s += `\x1b[${next.cursor.row + 1};${next.cursor.col + 1}H\x1b[?25h`;
    this.out.write(s);
    this.previous = next;
  }
}

function same(a: Cell, b: Cell): boolean {
  return a.ch === b.ch && a.attr === b.attr && !!a.cont === !!b.cont;
}
