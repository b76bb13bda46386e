/**
 * A page of fields driven by the keyboard alone: text inputs (masked for passwords), single-choice
 * lists and multi-choice lists, each with the messages shown under it. The form only edits values
 * and says what the operator asked for (leave this field forwards or backwards, go back a page);
 * whoever owns the form checks the values and decides where focus goes.
 *
 * Keys: Tab / Enter / Down (in a text field) leave a field forwards, Shift-Tab / Up (in a text field)
 * backwards; in a list Up/Down move the highlight, Space ticks an entry of a multi-choice list and
 * Enter takes the highlighted entry; Esc asks for the previous page.
 *
 * Layout: one line per label and value when there is room (>= 60 columns), else the label above its
 * value, so a 40-column terminal shows the same fields.
 */
import type { Key } from './keys.js';
import { ATTR_BOLD, ATTR_REVERSE, type Segment } from './screen.js';
import { cut, ellipsis, padTo, textWidth, wrap } from './text.js';

export interface Option {
  value: string;
  label: string;
  /** Extra lines under the label (a disk's size, model and serial). */
  detail?: string[];
  /** Why this entry cannot be chosen; shown, and the entry is skipped. */
  disabled?: string;
}

export interface FieldMessage {
  level: 'error' | 'warning' | 'info';
  text: string;
}

interface Base {
  id: string;
  label: string;
  /** Help shown under the field while it has focus (Harvester's "Note: ..."). */
  note?: string;
  messages?: FieldMessage[];
}

export interface TextField extends Base {
  kind: 'text';
  value: string;
  secret?: boolean;
  cursor?: number;
  /** First character shown when the value is wider than its box. */
  scroll?: number;
}

export interface SelectField extends Base {
  kind: 'select';
  options: Option[];
  value: string;
  highlight?: number;
}

export interface MultiField extends Base {
  kind: 'multi';
  options: Option[];
  values: string[];
  highlight?: number;
  /** At least one entry is needed: Enter with none ticked takes the highlighted one. Otherwise Enter ticks nothing. */
  requireOne?: boolean;
}

/** Text that is not a field (a check list, a summary); scrolls with the page, never takes focus. */
export interface StaticBlock {
  kind: 'static';
  id: string;
  lines: Array<string | Segment[]>;
}

export type Field = TextField | SelectField | MultiField;
export type Item = Field | StaticBlock;

export type FormAction =
  | { type: 'none' }
  | { type: 'edited'; field: Field }
  /** Leave the focused field forwards (Tab, Enter, Down in a text field). `enter` tells Enter apart. */
  | { type: 'leave'; field: Field; direction: 'forward' | 'backward'; enter: boolean }
  | { type: 'back' };

export interface Line {
  segs: Segment[];
  /** Column of the text cursor on this line, when the focused text field is here. */
  cursor?: number;
  /** The line belongs to the focused field (the viewport keeps it visible). */
  focused?: boolean;
  /** The line the operator is on (the cursor, the highlighted entry): always kept in view. */
  anchor?: boolean;
}

export function isField(i: Item): i is Field {
  return i.kind !== 'static';
}

export class Form {
  focus = 0;

  constructor(readonly items: Item[]) {
    const first = this.fieldIndexes()[0];
    this.focus = first ?? 0;
    for (const f of this.fields()) this.initField(f);
  }

  fields(): Field[] {
    return this.items.filter(isField);
  }

  field(id: string): Field | undefined {
    return this.fields().find((f) => f.id === id);
  }

  focused(): Field | undefined {
    const i = this.items[this.focus];
    return i && isField(i) ? i : undefined;
  }

  focusOn(id: string): void {
    const i = this.items.findIndex((x) => x.id === id && isField(x));
    if (i >= 0) this.focus = i;
  }

  /** Moves focus to the next (or previous) field; false at the end (or start). */
  move(direction: 1 | -1): boolean {
    const idx = this.fieldIndexes();
    const at = idx.indexOf(this.focus);
    const next = idx[at + direction];
    if (next === undefined) return false;
    this.focus = next;
    return true;
  }

  private fieldIndexes(): number[] {
    return this.items.map((it, i) => (isField(it) ? i : -1)).filter((i) => i >= 0);
  }

  private initField(f: Field): void {
    if (f.kind === 'text') {
      f.cursor ??= [...f.value].length;
      f.scroll ??= 0;
    } else if (f.kind === 'select') {
      const at = f.options.findIndex((o) => o.value === f.value && !o.disabled);
      f.highlight ??= at >= 0 ? at : Math.max(0, f.options.findIndex((o) => !o.disabled));
    } else {
      f.highlight ??= Math.max(0, f.options.findIndex((o) => !o.disabled));
    }
  }

  handleKey(k: Key): FormAction {
    const f = this.focused();
    if (k.kind === 'key' && k.name === 'escape') return { type: 'back' };
    if (!f) return { type: 'none' };
    if (k.kind === 'key') {
      switch (k.name) {
        case 'tab':
          return { type: 'leave', field: f, direction: 'forward', enter: false };
        case 'backtab':
          return { type: 'leave', field: f, direction: 'backward', enter: false };
        case 'enter':
          if (f.kind === 'select' && f.options[f.highlight ?? 0] && !f.options[f.highlight ?? 0]!.disabled) f.value = f.options[f.highlight ?? 0]!.value;
          if (f.kind === 'multi' && f.requireOne && f.values.length === 0) {
            const o = f.options[f.highlight ?? 0];
            if (o && !o.disabled) f.values = [o.value];
          }
          return { type: 'leave', field: f, direction: 'forward', enter: true };
      }
    }
    if (f.kind === 'text') return this.editText(f, k);
    return this.moveInList(f, k);
  }

  private editText(f: TextField, k: Key): FormAction {
    const chars = [...f.value];
    let cur = Math.min(f.cursor ?? chars.length, chars.length);
    if (k.kind === 'char' || (k.kind === 'key' && k.name === 'space')) {
      chars.splice(cur, 0, k.kind === 'char' ? k.ch : ' ');
      cur++;
    } else if (k.kind === 'key') {
      switch (k.name) {
        case 'backspace':
          if (cur === 0) return { type: 'none' };
          chars.splice(cur - 1, 1);
          cur--;
          break;
        case 'delete':
        case 'ctrl-d':
          if (cur >= chars.length) return { type: 'none' };
          chars.splice(cur, 1);
          break;
        case 'left':
          cur = Math.max(0, cur - 1);
          break;
        case 'right':
          cur = Math.min(chars.length, cur + 1);
          break;
        case 'home':
        case 'ctrl-a':
          cur = 0;
          break;
        case 'end':
        case 'ctrl-e':
          cur = chars.length;
          break;
        case 'ctrl-u':
          chars.splice(0, cur);
          cur = 0;
          break;
        case 'ctrl-k':
          chars.splice(cur);
          break;
        case 'down':
          return { type: 'leave', field: f, direction: 'forward', enter: false };
        case 'up':
          return { type: 'leave', field: f, direction: 'backward', enter: false };
        default:
          return { type: 'none' };
      }
    } else {
      return { type: 'none' };
    }
    const value = chars.join('');
    const changed = value !== f.value;
    f.value = value;
    f.cursor = cur;
    if (changed) f.messages = f.messages?.filter((m) => m.level === 'info');
    return changed ? { type: 'edited', field: f } : { type: 'none' };
  }

  private moveInList(f: SelectField | MultiField, k: Key): FormAction {
    const n = f.options.length;
    if (n === 0) return { type: 'none' };
    const step = (from: number, d: number): number => {
      for (let i = from + d; i >= 0 && i < n; i += d) if (!f.options[i]!.disabled) return i;
      return from;
    };
    let h = f.highlight ?? 0;
    if (k.kind === 'key') {
      switch (k.name) {
        case 'up':
        case 'left':
          h = step(h, -1);
          break;
        case 'down':
        case 'right':
          h = step(h, 1);
          break;
        case 'home':
        case 'pageup':
          h = step(-1, 1);
          break;
        case 'end':
        case 'pagedown':
          h = step(n, -1);
          break;
        case 'space':
          if (f.kind === 'multi') {
            const o = f.options[h];
            if (o && !o.disabled) f.values = f.values.includes(o.value) ? f.values.filter((v) => v !== o.value) : [...f.values, o.value];
            f.messages = f.messages?.filter((m) => m.level === 'info');
            return { type: 'edited', field: f };
          }
          f.value = f.options[h]!.value;
          return { type: 'edited', field: f };
        default:
          return { type: 'none' };
      }
    } else {
      return { type: 'none' };
    }
    f.highlight = h;
    if (f.kind === 'select' && !f.options[h]!.disabled && f.value !== f.options[h]!.value) {
      f.value = f.options[h]!.value;
      f.messages = f.messages?.filter((m) => m.level === 'info');
      return { type: 'edited', field: f };
    }
    return { type: 'none' };
  }

  /** The page as lines of `width` columns. */
  render(width: number): Line[] {
    const out: Line[] = [];
    const wide = width >= 60;
    const labelW = wide ? Math.min(24, Math.max(...this.fields().map((f) => textWidth(f.label)), 8) + 2) : 0;
    this.items.forEach((item, i) => {
      const focused = i === this.focus;
      if (item.kind === 'static') {
        for (const l of item.lines) {
          if (typeof l === 'string') for (const w of wrap(l, width)) out.push({ segs: [{ text: w }] });
          else out.push({ segs: l });
        }
        return;
      }
      const start = out.length;
      if (item.kind === 'text') this.renderText(item, focused, width, labelW, out);
      else this.renderList(item, focused, width, out);
      for (const m of item.messages ?? []) {
        const mark = m.level === 'error' ? '! ' : m.level === 'warning' ? '* ' : '  ';
        wrap(m.text, Math.max(1, width - 2)).forEach((w, j) => out.push({ segs: [{ text: (j === 0 ? mark : '  ') + w, attr: m.level === 'error' ? ATTR_BOLD : 0 }] }));
      }
      if (focused && item.note) for (const w of wrap(item.note, width)) out.push({ segs: [{ text: w }] });
      if (focused) for (let j = start; j < out.length; j++) out[j]!.focused = true;
      out.push({ segs: [] });
    });
    return out;
  }

  private renderText(f: TextField, focused: boolean, width: number, labelW: number, out: Line[]): void {
    const labelAttr = focused ? ATTR_BOLD : 0;
    const boxW = Math.max(4, (labelW ? width - labelW : width) - 2);
    const chars = [...(f.secret ? '*'.repeat([...f.value].length) : f.value)];
    const cur = Math.min(f.cursor ?? chars.length, chars.length);
    let scroll = f.scroll ?? 0;
    if (cur < scroll) scroll = cur;
    while (textWidth(chars.slice(scroll, cur).join('')) > boxW - 1) scroll++;
    f.scroll = scroll;
    const shown = cut(chars.slice(scroll).join(''), boxW);
    const box: Segment[] = [{ text: '[' }, { text: padTo(shown, boxW), attr: focused ? ATTR_REVERSE : 0 }, { text: ']' }];
    const cursorCol = 1 + textWidth(chars.slice(scroll, cur).join(''));
    if (labelW) {
      out.push({ segs: [{ text: padTo(ellipsis(f.label, labelW - 2), labelW), attr: labelAttr }, ...box], cursor: focused ? labelW + cursorCol : undefined, anchor: focused });
    } else {
      out.push({ segs: [{ text: ellipsis(f.label, width), attr: labelAttr }] });
      out.push({ segs: box, cursor: focused ? cursorCol : undefined, anchor: focused });
    }
  }

  private renderList(f: SelectField | MultiField, focused: boolean, width: number, out: Line[]): void {
    if (f.label) out.push({ segs: [{ text: ellipsis(f.label, width), attr: focused ? ATTR_BOLD : 0 }] });
    if (!focused && f.label && f.options.length > 1) {
      // Folded like a drop-down: only what is chosen, until the field has focus.
      const chosen = f.options.filter((o) => (f.kind === 'select' ? f.value === o.value : f.values.includes(o.value)));
      for (const o of chosen) for (const w of wrap(o.label, Math.max(1, width - 4))) out.push({ segs: [{ text: `    ${w}` }] });
      if (chosen.length === 0) out.push({ segs: [{ text: '    (none chosen)' }] });
      return;
    }
    f.options.forEach((o, i) => {
      const lit = focused && i === (f.highlight ?? 0);
      const chosen = f.kind === 'select' ? f.value === o.value : f.values.includes(o.value);
      const mark = f.kind === 'select' ? (chosen ? '(*)' : '( )') : chosen ? '[x]' : '[ ]';
      const lead = `${lit ? '>' : ' '} ${o.disabled ? '   ' : mark} `;
      const indent = ' '.repeat(lead.length);
      wrap(o.label, Math.max(1, width - lead.length)).forEach((w, j) => {
        out.push({ segs: [{ text: j === 0 ? lead : indent }, { text: w, attr: lit ? ATTR_REVERSE : 0 }], anchor: lit && j === 0 });
      });
      for (const d of o.detail ?? []) for (const w of wrap(d, Math.max(1, width - indent.length - 2))) out.push({ segs: [{ text: indent + '  ' + w }] });
      if (o.disabled) for (const w of wrap(`cannot be used: ${o.disabled}`, Math.max(1, width - indent.length - 2))) out.push({ segs: [{ text: indent + '  ' + w }] });
    });
    if (f.options.length === 0) out.push({ segs: [{ text: '  (none)' }] });
  }
}
