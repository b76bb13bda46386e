/**
 * The subset of Go's text/template that Harvester's webhook URLs and payloads use: field references
 * on a flat string map (`{{.Hostname}}`, `{{ .MACAddr }}`, with `{{-`/`-}}` trim markers and
 * `{{/* comments *\/}}`). Harvester executes with `missingkey=zero`, so an unknown field renders as
 * the empty string. Anything else (pipelines, functions, conditionals) is refused with a message
 * rather than rendered wrongly.
 */
export class GoTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoTemplateError';
  }
}

const FIELD = /^\.([A-Za-z_][A-Za-z0-9_]*)$/;

export function renderGoTemplate(name: string, text: string, vars: Record<string, string | undefined>): string {
  let out = '';
  let pos = 0;
  for (;;) {
    const open = text.indexOf('{{', pos);
    if (open < 0) {
      out += text.slice(pos);
      return out;
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
    out += literal;
    pos = close + 2;
    if (trimRight) {
      const rest = text.slice(pos);
      pos += rest.length - rest.replace(/^\s+/, '').length;
    }
    const action = inner.trim();
    if (action.startsWith('/*') && action.endsWith('*/')) continue;
    const m = FIELD.exec(action);
    if (!m) {
      throw new GoTemplateError(
        `template ${name}: unsupported action '{{${inner}}}' (only field references such as {{.Hostname}} are supported)`,
      );
    }
    out += vars[m[1]] ?? '';
  }
}
