/**
 * Shell completion scripts generated from a program's definition (the same one its parser and
 * --help use). zsh loads the bash function through bashcompinit, so the two cannot drift apart.
 */
import type { CommandDef, ProgramDef } from './definition.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface Node {
  path: string;
  def: CommandDef;
}

/** Every command and subcommand, by its path ("fetch iso"). */
function walk(commands: CommandDef[], prefix = ''): Node[] {
  return commands.flatMap((c) => {
    const path = prefix ? `${prefix} ${c.name}` : c.name;
    return [{ path, def: c }, ...walk(c.subcommands ?? [], path)];
  });
}

const flag = (name: string): string => `--${name}`;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const fnName = (prog: string): string => `_${prog.replace(/[^A-Za-z0-9]/g, '_')}_complete`;

function bash(p: ProgramDef): string {
  const nodes = walk(p.commands);
  const top = [...p.commands.map((c) => c.name), 'help', 'version', 'completion'];
  const lines: string[] = [
    `# bash completion for ${p.name}, generated from its command definitions (${p.name} completion bash).`,
    `${fnName(p.name)}() {`,
    '  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path="" cand w i',
    '  for ((i = 1; i < COMP_CWORD; i++)); do',
    '    w=${COMP_WORDS[i]}',
    '    [[ $w == -* ]] && continue',
    '    cand=${path:+$path }$w',
    '    case $cand in',
    `      ${nodes.map((n) => q(n.path)).join('|')}) path=$cand ;;`,
    '    esac',
    '  done',
    '  case "$path|$prev" in',
  ];
  for (const n of nodes) {
    for (const [name, o] of Object.entries(n.def.options)) {
      if (o.type !== 'string') continue;
      const reply = o.choices ? `COMPREPLY=($(compgen -W ${q(o.choices.join(' '))} -- "$cur"))` : 'compopt -o default 2>/dev/null; COMPREPLY=()';
      lines.push(`    ${q(`${n.path}|${flag(name)}`)}) ${reply}; return ;;`);
    }
  }
  lines.push('    "|completion") COMPREPLY=($(compgen -W \'bash zsh fish\' -- "$cur")); return ;;');
  lines.push(`    "|help") COMPREPLY=($(compgen -W ${q(p.commands.map((c) => c.name).join(' '))} -- "$cur")); return ;;`);
  lines.push('  esac', '  local words', '  case $path in');
  lines.push(`    '') words=${q([...top, '--help', '--version'].join(' '))} ;;`);
  for (const n of nodes) {
    const words = [...(n.def.subcommands ?? []).map((s) => s.name), ...Object.keys(n.def.options).map(flag), '--help'];
    lines.push(`    ${q(n.path)}) words=${q(words.join(' '))} ;;`);
  }
  lines.push(
    '  esac',
    '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
    '  [[ $cur != -* ]] && compopt -o default 2>/dev/null',
    '  return 0',
    '}',
    `complete -F ${fnName(p.name)} ${p.name}`,
  );
  return lines.join('\n') + '\n';
}

function zsh(p: ProgramDef): string {
  return [`#compdef ${p.name}`, `# zsh completion for ${p.name}: the bash completion, through bashcompinit.`, 'autoload -U +X bashcompinit && bashcompinit', bash(p)].join('\n');
}

function fish(p: ProgramDef): string {
  const c = `complete -c ${p.name}`;
  const lines = [`# fish completion for ${p.name}, generated from its command definitions (${p.name} completion fish).`, `${c} -f`];
  lines.push(`${c} -n __fish_use_subcommand -a help -d ${q('show the help of a command')}`);
  lines.push(`${c} -n __fish_use_subcommand -a version -d ${q('print the version and commit')}`);
  lines.push(`${c} -n __fish_use_subcommand -a completion -d ${q('print a shell completion script')}`);
  lines.push(`${c} -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'`);
  lines.push(`${c} -l version -d ${q('print the version and commit')}`);
  for (const n of walk(p.commands)) {
    const parts = n.path.split(' ');
    const parent = parts.slice(0, -1);
    const name = parts[parts.length - 1]!;
    const cond = parent.length === 0 ? '__fish_use_subcommand' : `'__fish_seen_subcommand_from ${parent.join(' ')}'`;
    lines.push(`${c} -n ${cond} -a ${q(name)} -d ${q(n.def.summary)}`);
    const here = `'__fish_seen_subcommand_from ${name}'`;
    for (const [opt, o] of Object.entries(n.def.options)) {
      const value = o.type === 'boolean' ? '' : o.choices ? ` -x -a ${q(o.choices.join(' '))}` : ' -r -F';
      lines.push(`${c} -n ${here} -l ${opt}${o.short ? ` -s ${o.short}` : ''}${value}`);
    }
    lines.push(`${c} -n ${here} -s h -l help`);
  }
  return lines.join('\n') + '\n';
}

export function completionScript(p: ProgramDef, shell: Shell): string {
  return shell === 'bash' ? bash(p) : shell === 'zsh' ? zsh(p) : fish(p);
}
