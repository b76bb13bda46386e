/** The screens besides the pages: the install's progress, and text with a row of choices (failure, success, halt). */
import type { Screen } from '../../lib/tui/app.js';
import type { Line } from '../../lib/tui/form.js';
import type { Key } from '../../lib/tui/keys.js';
import { ATTR_BOLD, ATTR_REVERSE } from '../../lib/tui/screen.js';
import { ellipsis, wrap } from '../../lib/tui/text.js';
import { formatBytes } from '../../config/disk-sizes.js';
import type { StampedEvent } from '../steps/progress.js';

/** The install as it runs: every step with its state, the current step's bytes, the last messages. */
export class ProgressScreen implements Screen {
  readonly title = 'Installing Harvester';
  readonly help = 'Ctrl-C: stop the install (asks first)';
  private readonly status = new Map<string, string>();
  private bytes?: { step: string; done: number; total: number; rate: number };
  private readonly messages: string[] = [];
  private readonly started = Date.now();
  private total = 0;

  constructor(private steps: string[]) {}

  note(text: string): void {
    this.messages.push(text);
  }

  event(e: StampedEvent): void {
    if (e.type === 'step') {
      if (!this.steps.includes(e.step)) this.steps = [...this.steps, e.step];
      this.status.set(e.step, e.phase);
      this.total = e.total;
      if (e.phase !== 'started') this.bytes = this.bytes?.step === e.step ? undefined : this.bytes;
      if (e.phase === 'failed' && e.message) this.messages.push(`${e.step} failed: ${e.message}`);
    } else if (e.type === 'bytes') {
      this.bytes = { step: e.step, done: e.done, total: e.total, rate: e.rateBytesPerSec };
    } else if (e.type === 'message' && e.message) {
      this.messages.push(`${e.level === 'info' ? '' : `${e.level}: `}${e.message}`);
    } else if (e.type === 'install') {
      this.messages.push(`install ${e.phase} on ${e.device}${e.message ? `: ${e.message}` : ''}`);
    }
  }

  get progress(): string {
    const done = [...this.status.values()].filter((p) => p === 'done' || p === 'skipped').length;
    const secs = Math.floor((Date.now() - this.started) / 1000);
    return `${done}/${this.total || this.steps.length} steps, ${Math.floor(secs / 60)}:${String(secs % 60).padStart(2, '0')}`;
  }

  body(width: number): Line[] {
    const out: Line[] = [];
    for (const s of this.steps) {
      const phase = this.status.get(s);
      const mark = phase === 'done' ? '[done]' : phase === 'skipped' ? '[kept]' : phase === 'started' ? '[ .. ]' : phase === 'failed' ? '[FAIL]' : '[    ]';
      out.push({ segs: [{ text: `${mark} ${s}`, attr: phase === 'started' ? ATTR_BOLD : 0 }], anchor: phase === 'started' });
      if (phase === 'started' && this.bytes?.step === s && this.bytes.total > 0) {
        const pct = Math.floor((this.bytes.done * 100) / this.bytes.total);
        const barW = Math.max(10, Math.min(40, width - 40));
        const fill = Math.round((barW * pct) / 100);
        out.push({ segs: [{ text: '       [' }, { text: '#'.repeat(fill), attr: ATTR_REVERSE }, { text: `${'.'.repeat(barW - fill)}] ${pct}%` }] });
        out.push({ segs: [{ text: `       ${formatBytes(this.bytes.done)} of ${formatBytes(this.bytes.total)}, ${formatBytes(this.bytes.rate)}/s` }] });
      }
    }
    out.push({ segs: [] });
    for (const m of this.messages.slice(-6)) for (const w of wrap(m, width)) out.push({ segs: [{ text: w }] });
    return out;
  }

  key(): void {}
}

/** Text and a row of choices (failure, success). */
export class ChoiceScreen implements Screen {
  readonly help = 'Left/Right: choose  Enter: confirm  PgUp/PgDn: scroll';
  private choice = 0;

  constructor(
    readonly title: string,
    readonly lines: string[],
    private readonly choices: string[],
    private readonly done: (choice: number) => void,
    /** Text below the choices (details a person scrolls to with PgDn). */
    private readonly after: string[] = [],
  ) {}

  body(width: number): Line[] {
    const text = (ls: string[]): Line[] => ls.flatMap((l) => wrap(l, width).map((t) => ({ segs: [{ text: t }] })));
    const out: Line[] = text(this.lines);
    out.push({ segs: [] });
    if (this.choices.length) {
      out.push({
        segs: this.choices.flatMap((c, i) => [{ text: i ? '  ' : '' }, { text: `[ ${ellipsis(c, width - 6)} ]`, attr: i === this.choice ? ATTR_REVERSE : 0 }]),
        anchor: true,
      });
    }
    out.push(...text(this.after));
    return out;
  }

  key(k: Key): void {
    if (k.kind !== 'key') return;
    if (k.name === 'left' || k.name === 'up' || k.name === 'backtab') this.choice = Math.max(0, this.choice - 1);
    else if (k.name === 'right' || k.name === 'down' || k.name === 'tab') this.choice = Math.min(this.choices.length - 1, this.choice + 1);
    else if (k.name === 'enter') this.done(this.choice);
  }
}

export class InfoScreen extends ChoiceScreen {
  constructor(title: string, lines: string[], done: () => void) {
    super(title, lines, ['OK'], () => done());
  }
}
