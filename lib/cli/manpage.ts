/** A program's man page (section 1), generated from the definition its parser and --help use. */
import type { CommandDef, ProgramDef } from './definition.js';

/** roff-escapes text: backslashes, and a leading . or ' that would start a request. */
function roff(text: string): string {
  return text
    .replace(/\\/g, '\\e')
    .replace(/-/g, '\\-')
    // troff reads bytes: a non-ASCII character goes in as its Unicode escape.
    .replace(/[^\x00-\x7f]/gu, (c) => `\\[u${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`)
    .split('\n')
    .map((l) => (/^[.']/.test(l) ? `\\&${l}` : l))
    .join('\n');
}

function commandSection(c: CommandDef, prefix: string): string[] {
  const path = `${prefix} ${c.name}`;
  const out = ['.SS ' + roff(path), roff(c.summary) + '.', '.PP', '.nf', roff(c.usage), '.fi'];
  const opts = Object.entries(c.options);
  if (opts.length) {
    out.push('.PP', 'Options:');
    for (const [name, o] of opts) {
      const arg = o.type === 'string' ? ` \\fI${o.choices ? roff(o.choices.join('|')) : 'VALUE'}\\fR` : '';
      out.push('.TP', `\\fB${o.short ? `\\-${o.short}, ` : ''}\\-\\-${roff(name)}\\fR${arg}${o.multiple ? ' (repeatable)' : ''}`);
    }
  }
  for (const s of c.subcommands ?? []) out.push(...commandSection(s, path));
  return out;
}

export function manPage(p: ProgramDef, version: string): string {
  return [
    `.TH ${p.name.toUpperCase()} 1 "" "${p.name} ${roff(version)}" "hvinstall manual"`,
    '.SH NAME',
    `${p.name} \\- ${roff(p.summary)}`,
    '.SH SYNOPSIS',
    '.nf',
    roff(p.usage),
    '.fi',
    '.SH COMMANDS',
    ...p.commands.flatMap((c) => commandSection(c, p.name)),
    '.SH CONVENTIONS',
    `Every command answers \\fB\\-h\\fR, \\fB\\-\\-help\\fR and \\fB${p.name} help\\fR \\fICOMMAND\\fR;`,
    `\\fB${p.name} \\-\\-version\\fR (or \\fBversion \\-\\-json\\fR) prints the version and the git commit it was built from;`,
    `\\fB${p.name} completion bash|zsh|fish\\fR prints a completion script.`,
    '.SH EXIT STATUS',
    '0 ok, 1 a check failed, 2 usage or environment error, 3 the install failed.',
    '',
  ].join('\n');
}
