/** How findings are printed, compiler style: `config.yaml:14:5: error: install.vip_mode: must be ...` then `  hint: ...`. */
import type { Finding } from './types.js';

export function formatFinding(f: Finding): string {
  const where = [f.source ?? '', f.line ?? '', f.line !== undefined ? (f.column ?? '') : ''].filter((x) => x !== '').join(':');
  const head = `${where ? where + ': ' : ''}${f.severity}: ${f.path ? f.path + ': ' : ''}${f.message}`;
  return f.hint ? `${head}\n  hint: ${f.hint}` : head;
}
