/**
 * Text as a terminal shows it: how many columns a string takes (combining marks none, East Asian
 * wide characters two), cutting and wrapping to a width, and the ASCII stand-ins used on terminals
 * that cannot show anything else (a VT100 on a serial line has no UTF-8). Pure.
 */

/** Zero-width code points: combining marks, joiners, variation selectors. */
const ZERO: Array<[number, number]> = [
  [0x0300, 0x036f], [0x0483, 0x0489], [0x0591, 0x05bd], [0x0610, 0x061a], [0x064b, 0x065f],
  [0x0e31, 0x0e31], [0x0e34, 0x0e3a], [0x1ab0, 0x1aff], [0x1dc0, 0x1dff], [0x200b, 0x200f],
  [0x202a, 0x202e], [0x2060, 0x2064], [0x20d0, 0x20ff], [0xfe00, 0xfe0f], [0xfe20, 0xfe2f], [0xfeff, 0xfeff],
];
/** Double-width code points (CJK, Hangul, fullwidth forms, emoji). */
const WIDE: Array<[number, number]> = [
  [0x1100, 0x115f], [0x2e80, 0x303e], [0x3041, 0x33ff], [0x3400, 0x4dbf], [0x4e00, 0x9fff],
  [0xa000, 0xa4cf], [0xac00, 0xd7a3], [0xf900, 0xfaff], [0xfe30, 0xfe4f], [0xff00, 0xff60],
  [0xffe0, 0xffe6], [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0x20000, 0x3fffd],
];

function inRanges(cp: number, ranges: Array<[number, number]>): boolean {
  for (const [a, b] of ranges) if (cp >= a && cp <= b) return true;
  return false;
}

/** Columns one code point takes; control characters take none (they are never drawn). */
export function charWidth(cp: number): number {
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0;
  if (cp < 0x300) return 1;
  if (inRanges(cp, ZERO)) return 0;
  return inRanges(cp, WIDE) ? 2 : 1;
}

export function textWidth(s: string): number {
  let w = 0;
  for (const ch of s) w += charWidth(ch.codePointAt(0)!);
  return w;
}

/** The longest prefix of `s` that fits in `width` columns. */
export function cut(s: string, width: number): string {
  let w = 0;
  let out = '';
  for (const ch of s) {
    const cw = charWidth(ch.codePointAt(0)!);
    if (w + cw > width) break;
    w += cw;
    out += ch;
  }
  return out;
}

/** `s` cut to `width` columns, ending in "..." when something was cut off. */
export function ellipsis(s: string, width: number): string {
  if (textWidth(s) <= width) return s;
  if (width <= 3) return cut(s, width);
  return cut(s, width - 3) + '...';
}

export function padTo(s: string, width: number): string {
  const w = textWidth(s);
  return w >= width ? s : s + ' '.repeat(width - w);
}

/**
 * Word-wraps text to `width` columns; explicit newlines are kept, words longer than a line (URLs,
 * by-id names) are broken where they hit the edge.
 */
export function wrap(text: string, width: number): string[] {
  const w = Math.max(1, width);
  const out: string[] = [];
  for (const raw of text.split('\n')) {
    // Leading spaces are a hanging indent: every line of the paragraph keeps them.
    const lead = /^ */.exec(raw)![0].slice(0, Math.max(0, w - 1));
    const para = raw.slice(lead.length);
    if (lead) {
      out.push(...wrap(para, w - lead.length).map((l) => lead + l));
      continue;
    }
    let line = '';
    for (const word of para.split(/ +/)) {
      if (word === '') continue;
      let rest = word;
      while (rest) {
        const sep = line ? ' ' : '';
        if (textWidth(line + sep + rest) <= w) {
          line += sep + rest;
          rest = '';
        } else if (line) {
          out.push(line);
          line = '';
        } else {
          const head = cut(rest, w) || [...rest][0]!;
          out.push(head);
          rest = rest.slice(head.length);
        }
      }
    }
    out.push(line);
  }
  return out;
}

/** Replaces what a 7-bit terminal cannot show with `?`, keeping the width of each character. */
export function toAscii(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp < 0x80) out += ch;
    else out += '?'.repeat(charWidth(cp));
  }
  return out;
}

/** Removes control characters (and so escape sequences' introducers) from text that will be drawn. */
export function printable(s: string): string {
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '');
}
