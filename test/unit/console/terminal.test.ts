/**
 * Terminals the console meets: a 40-column screen, a VT100 on a serial line (7-bit text only, no
 * colours), input that is not UTF-8, kernel messages written over the screen (Ctrl-L repaints),
 * a resize; and the decoder and renderer underneath, byte for byte.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { KeyDecoder } from '../../../lib/tui/keys.js';
import { Canvas, Renderer, ATTR_REVERSE } from '../../../lib/tui/screen.js';
import { asciiOnly } from '../../../lib/tui/terminal.js';
import { textWidth, wrap } from '../../../lib/tui/text.js';
import { KEYS, type Session } from './session.js';
import { TITLES, fill, startDryRun, toPage } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());


describe('hvinstall console on different terminals', () => {
  it('40 columns: labels above their fields, every choice readable, and the walk still works', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }, [], { cols: 40, rows: 25 }));
    await s.page(TITLES.mode);
    expect(s.flat()).toContain('Create a new Harvester cluster');
    expect(s.flat()).toContain('Install Harvester binaries only');
    await s.keys(KEYS.enter);
    await s.page(TITLES.password);
    const rows = s.rows();
    const label = rows.findIndex((r) => r.trim() === 'Password');
    expect(label).toBeGreaterThan(0);
    expect(rows[label + 1]).toMatch(/^ \[ *\]$/); // the box on its own line, closed within 40 columns
    await fill(s, 'Passw0rd!');
    await fill(s, 'Passw0rd!');
    await s.page(TITLES.disk);
    // A by-id name longer than the screen is wrapped, not cut.
    expect(s.flat().replace(/ /g, '')).toContain('/dev/disk/by-id/nvme-Dell_Ent_NVMe_P5600_MU_U.2_3.2TB_PHAB112300001');
  }, 30_000);

  it('VT100 on a serial line: only 7-bit text is sent, no colour sequences; a typed é shows as ?', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }, [], { env: { TERM: 'vt100', LANG: 'C' } }));
    await toPage(s, TITLES.hostname);
    await s.type('caf\u00e9');
    await s.waitFor('[caf?');
    expect([...s.raw].every((ch) => ch.charCodeAt(0) < 0x80)).toBe(true);
    expect(s.raw).not.toMatch(/\x1b\[[0-9;]*3[0-9]m|\x1b\[[0-9;]*4[0-9]m/);
    await s.keys(KEYS.enter);
    await s.waitForText('! invalid hostname.');
  }, 30_000);

  it('input that is not UTF-8 is ignored, with a notice; the field keeps what was typed around it', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await toPage(s, TITLES.hostname);
    await s.type('ab');
    s.write(Buffer.from([0xff, 0xfe, 0x80]));
    await s.waitFor('ignored 3 bytes of input that is not UTF-8 text');
    await s.type('c');
    expect(s.flat()).toMatch(/HostName \[abc +\]/);
  }, 30_000);

  it('kernel messages written over the screen are wiped by Ctrl-L; a resize redraws at the new size', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await s.page(TITLES.mode);
    const before = s.screen();
    // What the kernel does to a console: text at the cursor, outside the program's control.
    await new Promise<void>((r) => s!.term.write('\x1b[8;3H[  12.345678] nvme nvme0: I/O 42 QID 3 timeout, aborting\r\n[  12.40] EXT4-fs (sda1): mounted', r));
    expect(s.screen()).toContain('nvme nvme0: I/O 42 QID 3 timeout');
    await s.keys(KEYS.ctrlL);
    expect(s.screen()).toBe(before);
    s.resize(100, 30);
    await s.settle();
    const rows = s.rows();
    expect(rows[0]).toMatch(/^ Harvester installer \(hvinstall console\) +1\/14$/);
    expect(rows[0]!.length).toBe(99); // right-aligned with one space of margin
    expect(rows[29]).toContain('Enter: next');
  }, 30_000);
});

describe('lib/tui: keys, text and the renderer', () => {
  const decode = (...chunks: Array<number[] | string>): unknown[] => {
    const d = new KeyDecoder();
    const out = chunks.flatMap((c) => d.feed(typeof c === 'string' ? Buffer.from(c, 'utf8') : Uint8Array.from(c)));
    return [...out, ...d.flush()];
  };

  it('decodes the keys of a Linux console, a VT100 and an xterm, split across reads', () => {
    expect(decode('\x1b[A', '\x1bOB', '\x1b[Z', '\r\n', '\x7f')).toEqual([
      { kind: 'key', name: 'up' },
      { kind: 'key', name: 'down' },
      { kind: 'key', name: 'backtab' },
      { kind: 'key', name: 'enter' },
      { kind: 'key', name: 'backspace' },
    ]);
    expect(decode('\x1b', '[', '2', '4~')).toEqual([{ kind: 'key', name: 'f12' }]);
    expect(decode('\x1b[[E')).toEqual([{ kind: 'key', name: 'f5' }]);
    expect(decode('\x1b[15~')).toEqual([{ kind: 'key', name: 'f5' }]);
    expect(decode('\x1b[24;80R')).toEqual([{ kind: 'cursor-report', row: 24, col: 80 }]);
    expect(decode('\x1b')).toEqual([{ kind: 'key', name: 'escape' }]);
    expect(decode([0xc3], [0xa9])).toEqual([{ kind: 'char', ch: 'é' }]);
    expect(decode([0x61, 0xff, 0x80, 0x62])).toEqual([{ kind: 'char', ch: 'a' }, { kind: 'invalid', bytes: 2 }, { kind: 'char', ch: 'b' }]);
    expect(decode([0xed, 0xa0, 0x80])).toEqual([{ kind: 'invalid', bytes: 3 }]); // a UTF-16 surrogate is not UTF-8
  });

  it('measures and wraps text as a terminal shows it', () => {
    expect(textWidth('abc')).toBe(3);
    expect(textWidth('日本')).toBe(4);
    expect(textWidth('e\u0301')).toBe(1);
    expect(wrap('one two three', 7)).toEqual(['one two', 'three']);
    expect(wrap('/dev/disk/by-id/abcdefgh', 10)).toEqual(['/dev/disk/', 'by-id/abcd', 'efgh']);
    expect(wrap('  indented text here', 10)).toEqual(['  indented', '  text', '  here']);
  });

  it('renders only what changed, and repaints everything when asked', () => {
    let out = '';
    const r = new Renderer({ write: (x: string) => (out += x) }, { ascii: false });
    const a = new Canvas(3, 10);
    a.put(0, 0, 'hello');
    r.render(a);
    expect(out).toContain('\x1b[H\x1b[2J');
    out = '';
    const b = new Canvas(3, 10);
    b.put(0, 0, 'hello');
    b.put(2, 4, 'x', ATTR_REVERSE);
    r.render(b);
    expect(out).toBe('\x1b[?25l\x1b[3;5H\x1b[0;7mx\x1b[0m');
    out = '';
    r.invalidate();
    r.render(b);
    expect(out).toContain('\x1b[2J');
    expect(out).toContain('hello');
  });

  it('sends 7-bit text to VT100/VT220 and to terminals of unknown kind in a non-UTF-8 locale', () => {
    expect(asciiOnly({ TERM: 'vt220' })).toBe(true);
    expect(asciiOnly({ TERM: 'vt100', LANG: 'en_US.UTF-8' })).toBe(true);
    expect(asciiOnly({ TERM: 'linux' })).toBe(false);
    expect(asciiOnly({ TERM: 'xterm-256color', LANG: 'C' })).toBe(false);
    expect(asciiOnly({ TERM: 'foo', LANG: 'C' })).toBe(true);
    expect(asciiOnly({ TERM: 'foo', LANG: 'de_DE.UTF-8' })).toBe(false);
  });
});
