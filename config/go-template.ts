/**
 * Go's text/template, the two subsets Harvester's files use, rendered as Go renders them:
 *  - `renderGoTemplate`: webhook URLs and payloads, field references on a flat string map
 *    (`{{.Hostname}}`, `{{ .MACAddr }}`). Harvester executes with `missingkey=zero`, so an unknown
 *    field renders as the empty string. Anything else (pipelines, functions, conditionals) is
 *    refused with a message rather than rendered wrongly.
 *  - `renderGoTemplateData`: the installer's build-time templates (rancherd-22-addons.yaml):
 *    field chains on nested data (`{{ .Addons.rancher_logging.Enabled }}`), `{{if}}`/`{{else}}`/
 *    `{{end}}` over a field chain or `and`/`or`/`not` of field chains. A missing map key is Go's
 *    invalid value: false in a condition, `<no value>` when printed.
 * Both share Go's lexing: `{{-`/`-}}` trim markers and `{{/* comments *\/}}`.
 */
export class GoTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoTemplateError';
  }
}

type Token = { kind: 'text'; text: string } | { kind: 'action'; action: string; raw: string };

/** Splits a template into literal text and trimmed actions, comments dropped. */
function lex(name: string, text: string): Token[] {
  const tokens: Token[] = [];
  let pos = 0;
  for (;;) {
    const open = text.indexOf('{{', pos);
    if (open < 0) {
      tokens.push({ kind: 'text', text: text.slice(pos) });
      return tokens;
    }
    let literal = text.slice(pos, open);
    const close = text.indexOf('}}', open + 2);
    if (close < 0) throw new GoTemplateError(`template ${name}: unclosed action (a '{{' without '}}')`);
    let inner = text.slice(open + 2, close);
    const trimLeft = /^-\s/.test(inner);
    const trimRight = /\s-$/.test(inner);
    if (trimLeft) {
      inner = inner.slice(1);
      literal = literal.replace(/\s+$/, '');
    }
    if (trimRight) inner = inner.slice(0, -1);
    tokens.push({ kind: 'text', text: literal });
    pos = close + 2;
    if (trimRight) {
      const rest = text.slice(pos);
      pos += rest.length - rest.replace(/^\s+/, '').length;
    }
    const action = inner.trim();
    if (!(action.startsWith('/*') && action.endsWith('*/'))) tokens.push({ kind: 'action', action, raw: inner });
  }
}

const FIELD = /^\.([A-Za-z_][A-Za-z0-9_]*)$/;

export function renderGoTemplate(name: string, text: string, vars: Record<string, string | undefined>): string {
  let out = '';
  for (const t of lex(name, text)) {
    if (t.kind === 'text') {
      out += t.text;
      continue;
    }
    const m = FIELD.exec(t.action);
    if (!m) {
      throw new GoTemplateError(`template ${name}: unsupported action '{{${t.raw}}}' (only field references such as {{.Hostname}} are supported)`);
    }
    out += vars[m[1]] ?? '';
  }
  return out;
}

/** Go's invalid value: what a missing map key or field gives. */
const MISSING = Symbol('missing');
type Value = unknown;

const CHAIN = /^\.([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)?$/;

function field(name: string, data: unknown, chain: string): Value {
  if (!CHAIN.test(chain)) throw new GoTemplateError(`template ${name}: unsupported operand '${chain}' (field chains such as .Addons.rancher_logging.Enabled only)`);
  let v: Value = data;
  for (const key of chain.split('.').slice(1)) {
    if (v === MISSING || v === null || v === undefined || typeof v !== 'object') return MISSING;
    v = Object.prototype.hasOwnProperty.call(v, key) ? (v as Record<string, unknown>)[key] : MISSING;
  }
  return v;
}

/** text/template's truth: false, 0, "", nil, an empty map or slice, and the invalid value are false; any struct is true. */
function truth(v: Value): boolean {
  if (v === MISSING || v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  return true;
}

/** A pipeline: a field chain, or `and`/`or`/`not` of field chains (Go's short-circuit results). */
function evaluate(name: string, data: unknown, pipeline: string): Value {
  const words = pipeline.split(/\s+/).filter(Boolean);
  const [fn, ...args] = words;
  if (fn === 'and' || fn === 'or') {
    if (args.length < 1) throw new GoTemplateError(`template ${name}: ${fn} needs operands`);
    let last: Value = MISSING;
    for (const a of args) {
      last = field(name, data, a);
      if (truth(last) !== (fn === 'and')) return last;
    }
    return last;
  }
  if (fn === 'not') {
    if (args.length !== 1) throw new GoTemplateError(`template ${name}: not takes one operand`);
    return !truth(field(name, data, args[0]!));
  }
  if (words.length !== 1) throw new GoTemplateError(`template ${name}: unsupported pipeline '${pipeline}'`);
  return field(name, data, fn!);
}

function print(v: Value): string {
  if (v === MISSING) return '<no value>';
  if (v === null || v === undefined) return '<nil>';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

interface Frame {
  /** Whether this branch writes. */
  on: boolean;
  /** Whether a branch of this if has been taken. */
  taken: boolean;
  inElse: boolean;
}

export function renderGoTemplateData(name: string, text: string, data: Record<string, unknown>): string {
  let out = '';
  const stack: Frame[] = [];
  const writing = (): boolean => stack.every((f) => f.on);
  for (const t of lex(name, text)) {
    if (t.kind === 'text') {
      if (writing()) out += t.text;
      continue;
    }
    const [keyword] = t.action.split(/\s+/, 1);
    if (keyword === 'if') {
      const on = writing() && truth(evaluate(name, data, t.action.slice(2)));
      stack.push({ on, taken: on, inElse: false });
    } else if (keyword === 'else') {
      const f = stack.at(-1);
      if (!f || f.inElse || t.action !== 'else') throw new GoTemplateError(`template ${name}: unexpected '{{${t.raw}}}'`);
      f.on = !f.taken;
      f.inElse = true;
    } else if (keyword === 'end') {
      if (!stack.pop()) throw new GoTemplateError(`template ${name}: unexpected {{end}}`);
    } else if (['range', 'with', 'define', 'template', 'block'].includes(keyword!)) {
      throw new GoTemplateError(`template ${name}: unsupported action '{{${t.raw}}}'`);
    } else if (writing()) out += print(evaluate(name, data, t.action));
  }
  if (stack.length) throw new GoTemplateError(`template ${name}: an {{if}} without {{end}}`);
  return out;
}
