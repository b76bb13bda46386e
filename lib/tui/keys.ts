/**
 * Terminal input as keys. Decodes the bytes a Linux console (TERM=linux), a VT100/VT220 on a serial
 * line or an xterm sends: UTF-8 text, control keys, CSI and SS3 sequences (arrows come as ESC [ A on
 * most terminals, ESC O A in a VT100's application mode), Shift-Tab (ESC [ Z), function keys in the
 * VT220 (ESC [ 2 4 ~) and Linux console (ESC [ [ A) spellings, and the answer to a cursor position
 * query (ESC [ row ; col R), which is how the size of a serial terminal is learnt.
 *
 * A lone ESC is the Escape key only once nothing follows it for a moment: on a slow serial line the
 * rest of a sequence can arrive in a later read, so the caller flushes after a short quiet time
 * (`pendingEscape` tells it to). Bytes that are not UTF-8 become one `invalid` key per run, so the
 * application can say so instead of showing replacement characters.
 */
export type KeyName =
  | 'enter' | 'tab' | 'backtab' | 'escape' | 'backspace' | 'delete' | 'insert'
  | 'up' | 'down' | 'left' | 'right' | 'home' | 'end' | 'pageup' | 'pagedown'
  | 'f1' | 'f2' | 'f3' | 'f4' | 'f5' | 'f6' | 'f7' | 'f8' | 'f9' | 'f10' | 'f11' | 'f12'
  | 'ctrl-a' | 'ctrl-c' | 'ctrl-d' | 'ctrl-e' | 'ctrl-k' | 'ctrl-l' | 'ctrl-r' | 'ctrl-u' | 'ctrl-w'
  | 'space';

export type Key =
  | { kind: 'key'; name: KeyName }
  | { kind: 'char'; ch: string }
  | { kind: 'cursor-report'; row: number; col: number }
  /** Bytes that are not UTF-8 text (a terminal in a Latin-1 mode, line noise on a serial line). */
  | { kind: 'invalid'; bytes: number }
  /** A sequence this decoder does not know (reported so nothing is silently typed). */
  | { kind: 'unknown'; sequence: string };

const CTRL: Record<number, KeyName> = {
  0x01: 'ctrl-a', 0x03: 'ctrl-c', 0x04: 'ctrl-d', 0x05: 'ctrl-e', 0x08: 'backspace', 0x09: 'tab',
  0x0a: 'enter', 0x0b: 'ctrl-k', 0x0c: 'ctrl-l', 0x0d: 'enter', 0x12: 'ctrl-r', 0x15: 'ctrl-u',
  0x17: 'ctrl-w', 0x7f: 'backspace',
};

const CSI_FINAL: Record<string, KeyName> = { A: 'up', B: 'down', C: 'right', D: 'left', H: 'home', F: 'end', Z: 'backtab', P: 'f1', Q: 'f2', R: 'f3', S: 'f4' };
const SS3_FINAL: Record<string, KeyName> = { A: 'up', B: 'down', C: 'right', D: 'left', H: 'home', F: 'end', P: 'f1', Q: 'f2', R: 'f3', S: 'f4', M: 'enter' };
const TILDE: Record<number, KeyName> = {
  1: 'home', 2: 'insert', 3: 'delete', 4: 'end', 5: 'pageup', 6: 'pagedown', 7: 'home', 8: 'end',
  11: 'f1', 12: 'f2', 13: 'f3', 14: 'f4', 15: 'f5', 17: 'f6', 18: 'f7', 19: 'f8', 20: 'f9', 21: 'f10', 23: 'f11', 24: 'f12',
};
/** The Linux console's F1-F5: ESC [ [ A … E. */
const LINUX_F: Record<string, KeyName> = { A: 'f1', B: 'f2', C: 'f3', D: 'f4', E: 'f5' };

export class KeyDecoder {
  private pending: number[] = [];
  /** The last byte decoded was CR: an LF right after it (CR LF, possibly split across reads) is the same Enter. */
  private afterCr = false;

  /** True when the bytes held back start with ESC: flush() after a quiet moment makes it the Escape key. */
  get pendingEscape(): boolean {
    return this.pending[0] === 0x1b;
  }

  feed(chunk: Uint8Array): Key[] {
    for (const b of chunk) this.pending.push(b);
    return this.drain(false);
  }

  /** Called after a quiet time: whatever is held back is taken as it is (a lone ESC is Escape). */
  flush(): Key[] {
    return this.drain(true);
  }

  private drain(final: boolean): Key[] {
    const out: Key[] = [];
    let invalid = 0;
    const pushInvalid = (): void => {
      if (invalid) out.push({ kind: 'invalid', bytes: invalid });
      invalid = 0;
    };
    const p = this.pending;
    let i = 0;
    while (i < p.length) {
      const b = p[i]!;
      if (b === 0x1b) {
        const r = this.escape(p, i, final);
        if (r === 'incomplete') break;
        this.afterCr = false;
        pushInvalid();
        out.push(r.key);
        i = r.next;
        continue;
      }
      const wasCr = this.afterCr;
      this.afterCr = b === 0x0d;
      if (b < 0x20 || b === 0x7f) {
        pushInvalid();
        // CR LF (a terminal in "newline" mode) is one Enter.
        if (b === 0x0a && wasCr) {
          i++;
          continue;
        }
        const name = CTRL[b];
        out.push(name ? { kind: 'key', name } : { kind: 'unknown', sequence: `^${String.fromCharCode(b + 0x40)}` });
        i++;
        continue;
      }
      if (b < 0x80) {
        pushInvalid();
        out.push(b === 0x20 ? { kind: 'key', name: 'space' } : { kind: 'char', ch: String.fromCharCode(b) });
        i++;
        continue;
      }
      const len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
      if (len === 0) {
        invalid++;
        i++;
        continue;
      }
      if (i + len > p.length) {
        // A character split across reads: wait for the rest, unless what is there is already wrong.
        if (!final && p.slice(i + 1).every((c) => (c & 0xc0) === 0x80)) break;
        invalid++;
        i++;
        continue;
      }
      const seq = p.slice(i, i + len);
      const ch = decodeUtf8(seq);
      if (ch === undefined) {
        invalid++;
        i++;
        continue;
      }
      pushInvalid();
      out.push({ kind: 'char', ch });
      i += len;
    }
    pushInvalid();
    this.pending = p.slice(i);
    return out;
  }

  private escape(p: number[], i: number, final: boolean): 'incomplete' | { key: Key; next: number } {
    const next = p[i + 1];
    if (next === undefined) return final ? { key: { kind: 'key', name: 'escape' }, next: i + 1 } : 'incomplete';
    if (next === 0x5b /* [ */) {
      // Linux console function keys: ESC [ [ X
      if (p[i + 2] === 0x5b) {
        const f = p[i + 3];
        if (f === undefined) return final ? { key: { kind: 'key', name: 'escape' }, next: i + 1 } : 'incomplete';
        const name = LINUX_F[String.fromCharCode(f)];
        return { key: name ? { kind: 'key', name } : { kind: 'unknown', sequence: `ESC[[${String.fromCharCode(f)}` }, next: i + 4 };
      }
      let j = i + 2;
      while (j < p.length && p[j]! >= 0x30 && p[j]! <= 0x3f) j++; // parameter bytes
      while (j < p.length && p[j]! >= 0x20 && p[j]! <= 0x2f) j++; // intermediate bytes
      if (j >= p.length) {
        // A sequence longer than any real key is line noise, not a key still arriving.
        if (!final && j - i < 16) return 'incomplete';
        return { key: { kind: 'key', name: 'escape' }, next: i + 1 };
      }
      const finalByte = String.fromCharCode(p[j]!);
      const params = String.fromCharCode(...p.slice(i + 2, j));
      const key = csiKey(params, finalByte);
      return { key, next: j + 1 };
    }
    if (next === 0x4f /* O */) {
      const f = p[i + 2];
      if (f === undefined) return final ? { key: { kind: 'key', name: 'escape' }, next: i + 1 } : 'incomplete';
      const name = SS3_FINAL[String.fromCharCode(f)];
      return { key: name ? { kind: 'key', name } : { kind: 'unknown', sequence: `ESC O ${String.fromCharCode(f)}` }, next: i + 3 };
    }
    // ESC followed by anything else: Escape, and the next byte is read on its own.
    return { key: { kind: 'key', name: 'escape' }, next: i + 1 };
  }
}

function csiKey(params: string, final: string): Key {
  if (final === 'R') {
    const m = /^(\d+);(\d+)$/.exec(params);
    if (m) return { kind: 'cursor-report', row: Number(m[1]), col: Number(m[2]) };
  }
  if (final === '~') {
    const n = Number(params.split(';')[0]);
    const name = TILDE[n];
    if (name) return { kind: 'key', name };
  } else if (CSI_FINAL[final] && /^(1(;\d+)?)?$/.test(params)) {
    return { kind: 'key', name: CSI_FINAL[final]! };
  }
  return { kind: 'unknown', sequence: `ESC[${params}${final}` };
}

function decodeUtf8(seq: number[]): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(seq));
  } catch {
    return undefined;
  }
}
