/**
 * A pasted config (hvinstall, beyond Harvester's console): on the remote-config page F2 opens this
 * screen, and on the first page (config-first.ts) "Paste a config"; what the terminal sends (a paste
 * over a BMC's serial console or a KVM's "type text") is taken line by line, shown numbered, and
 * Ctrl-D checks it with the one validator (merged under the answers as a remote config is, or taken
 * up front). Its findings are shown with their line numbers and nothing is merged until there are
 * none; Esc goes back without merging.
 */
import type { Screen } from '../../lib/tui/app.js';
import type { Line } from '../../lib/tui/form.js';
import type { Key } from '../../lib/tui/keys.js';
import { ATTR_BOLD } from '../../lib/tui/screen.js';
import { wrap } from '../../lib/tui/text.js';

/** The name a pasted config's findings carry, and the summary shows. */
export const PASTED_SOURCE = '<pasted>';

export interface PasteHooks {
  /** Validates the text merged under the answers: messages when it cannot be merged. */
  accept(text: string): Promise<{ ok: true } | { ok: false; messages: string[] }>;
  /** Back to the page: `merged` once the text was accepted. */
  done(merged: boolean): void;
  redraw(): void;
}

/** Pasted text -> lines: CR LF, CR and LF each end a line (a paste over a serial line sends CR). Pure. */
export function pastedLines(keys: readonly Key[], start: readonly string[] = ['']): string[] {
  const lines = [...start];
  for (const k of keys) {
    const last = lines.length - 1;
    if (k.kind === 'char') lines[last] += k.ch;
    else if (k.kind === 'key' && k.name === 'space') lines[last] += ' ';
    // A tab is kept so the validator can say where YAML refuses it.
    else if (k.kind === 'key' && k.name === 'tab') lines[last] += '\t';
    else if (k.kind === 'key' && k.name === 'enter') lines.push('');
    else if (k.kind === 'key' && k.name === 'backspace') {
      if (lines[last]!.length > 0) lines[last] = [...lines[last]!].slice(0, -1).join('');
      else if (lines.length > 1) lines.pop();
    }
  }
  return lines;
}

export class PasteScreen implements Screen {
  readonly title = 'Paste a Harvester config';
  readonly help = 'Paste or type, then Ctrl-D: check and merge  Ctrl-U: clear  Esc: back, nothing merged';
  private lines: string[] = [''];
  private messages: string[] = [];
  private checking = false;

  constructor(private readonly hooks: PasteHooks) {}

  body(width: number): Line[] {
    const out: Line[] = [];
    const numW = String(this.lines.length).length;
    this.lines.forEach((l, i) => out.push({ segs: [{ text: `${String(i + 1).padStart(numW)} | ${l.replace(/\t/g, '→')}`.slice(0, width) }], anchor: i === this.lines.length - 1 && this.messages.length === 0 }));
    const status = this.checking ? ['Checking the config...'] : this.messages;
    status.forEach((m, i) => out.push(...wrap(m, width).map((t) => ({ segs: [{ text: t, attr: ATTR_BOLD }], anchor: i === 0 }))));
    return out;
  }

  async key(k: Key): Promise<void> {
    if (this.checking) return;
    if (k.kind === 'key' && k.name === 'escape') return this.hooks.done(false);
    if (k.kind === 'key' && k.name === 'ctrl-u') {
      this.lines = [''];
      this.messages = [];
      return;
    }
    if (k.kind === 'key' && k.name === 'ctrl-d') return this.check();
    this.lines = pastedLines([k], this.lines);
  }

  private async check(): Promise<void> {
    const text = `${this.lines.join('\n').replace(/\n+$/, '')}\n`;
    if (!text.trim()) {
      this.messages = ['Nothing pasted yet.'];
      return;
    }
    this.checking = true;
    this.hooks.redraw();
    try {
      const r = await this.hooks.accept(text);
      if (r.ok) return this.hooks.done(true);
      this.messages = r.messages;
    } finally {
      this.checking = false;
    }
  }
}
