/**
 * The operator conventions of hvinstall, hvagent and hvpxe: every command answers --help (exit 0,
 * stdout) naming every option its parser accepts; the parser really accepts each of them; usage
 * errors exit 2 on stderr; help CMD, did-you-mean, --version with the commit the build was made
 * from; completion that completes (run in bash) and man pages groff accepts without a warning.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CommandDef, ProgramDef } from '../../../lib/cli/definition.js';
import type { Program } from '../../../lib/cli/program.js';
import { program as hvinstall } from '../../../installer/cli.js';
import { program as hvagent } from '../../../agent/cli.js';
import { program as hvpxe } from '../../../pxe/cli.js';
import { runProgram } from '../../../lib/cli/program.js';
import { suggest } from '../../../lib/cli/suggest.js';

const REPO = path.resolve(__dirname, '../../..');
const PROGRAMS: Program[] = [hvinstall, hvagent, hvpxe];

/** Runs a program in-process and captures what it writes. */
async function call(p: Program, argv: string[]): Promise<{ code: number | string; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => ((stdout += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => ((stderr += String(s)), true));
  try {
    const code = await runProgram(p, argv);
    return { code, stdout, stderr };
  } catch (err) {
    return { code: `threw ${(err as { exitCode?: number }).exitCode}: ${(err as Error).message}`, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}
afterEach(() => vi.restoreAllMocks());

/** Every command and subcommand, as the argv path that reaches it. */
function paths(commands: CommandDef[], prefix: string[] = []): Array<{ argv: string[]; def: CommandDef }> {
  return commands.flatMap((c) => [{ argv: [...prefix, c.name], def: c }, ...paths(c.subcommands ?? [], [...prefix, c.name])]);
}

const defs = new Map<string, ProgramDef>();
async function define(p: Program): Promise<ProgramDef> {
  if (!defs.has(p.name)) defs.set(p.name, await p.define());
  return defs.get(p.name)!;
}

describe.each(PROGRAMS.map((p) => [p.name, p] as const))('%s', (_name, p) => {
  it('every command and subcommand answers --help, -h and help CMD with exit 0 on stdout, naming every option', async () => {
    const cmds = paths((await define(p)).commands);
    expect(cmds.length).toBeGreaterThan(2);
    for (const { argv, def } of cmds) {
      for (const ask of [[...argv, '--help'], [...argv, '-h'], ['help', ...argv]]) {
        const r = await call(p, ask);
        expect({ ask, code: r.code, stderr: r.stderr }).toEqual({ ask, code: 0, stderr: '' });
        expect(r.stdout).toContain('usage:');
        for (const opt of Object.keys(def.options)) if (opt !== 'help') expect(r.stdout, `${p.name} ${ask.join(' ')}`).toContain(`--${opt}`);
      }
    }
  });

  it("the parser accepts exactly the defined options: each one with --help exits 0, an unknown one exits 2 on stderr", async () => {
    for (const { argv, def } of paths((await define(p)).commands)) {
      if (def.subcommands?.length) continue;
      for (const [opt, o] of Object.entries(def.options)) {
        const given = o.type === 'string' ? [`--${opt}`, o.choices?.[0] ?? 'x'] : [`--${opt}`];
        const r = await call(p, [...argv, ...given, '--help']);
        expect({ cmd: argv.join(' '), opt, code: r.code }).toEqual({ cmd: argv.join(' '), opt, code: 0 });
      }
      const bad = await call(p, [...argv, '--no-such-flag']);
      // Thrown (runCli prints it, exit 2) or printed and returned: either way 2, the flag named, nothing on stdout.
      expect(`${bad.code} ${bad.stderr}`, argv.join(' ')).toMatch(/^(threw )?2\b[^]*unknown option --no-such-flag\b/);
      // Every program words parseArgs's errors itself (lib/cli/parse-error.ts), not Node's text.
      expect(bad.stderr).not.toMatch(/positional argument|Unknown option '/);
      expect(bad.stdout).toBe('');
    }
  });

  it('-V and -v print the version, as --version does', async () => {
    const want = await call(p, ['--version']);
    for (const flag of ['-V', '-v']) expect(await call(p, [flag])).toEqual(want);
  });

  it('bare: the usage on stderr, exit 2; --help and help: on stdout, exit 0', async () => {
    const bare = await call(p, []);
    expect(bare).toMatchObject({ code: 2, stdout: '' });
    expect(bare.stderr).toContain(`usage: ${p.name}`);
    for (const h of [['--help'], ['-h'], ['help']]) {
      const r = await call(p, h);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout).toContain(`usage: ${p.name}`);
      expect(r.stdout).toContain('Exit codes: 0 ok, 1 a check failed, 2 usage or environment error, 3 the install failed.');
    }
  });

  it('an unknown command: exit 2, stderr, a did-you-mean for a typo of each command', async () => {
    for (const name of p.commandNames) {
      const typo = name.length > 3 ? name[1] + name[0] + name.slice(2) : name + 'x';
      const r = await call(p, [typo]);
      expect(r).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toContain(`unknown command '${typo}' (did you mean '${name}'?)`);
      const h = await call(p, ['help', typo]);
      expect(h).toMatchObject({ code: 2, stdout: '' });
    }
    const far = await call(p, ['zzzzzzzz']);
    expect(far.stderr).not.toContain('did you mean');
  });

  it('completion: bash, zsh and fish on stdout; a missing or unknown shell is a usage error', async () => {
    for (const sh of ['bash', 'zsh', 'fish']) expect(await call(p, ['completion', sh])).toMatchObject({ code: 0, stderr: '' });
    expect(await call(p, ['completion'])).toMatchObject({ code: 2, stdout: '' });
    expect(await call(p, ['completion', 'tcsh'])).toMatchObject({ code: 2, stdout: '' });
  });

  it('the bash completion completes every command, subcommand, option and option value of the definition', async () => {
    const def = await define(p);
    const script = (await call(p, ['completion', 'bash'])).stdout;
    const cases: Array<{ words: string[]; want: string[] }> = [{ words: [''], want: def.commands.map((c) => c.name) }];
    for (const { argv, def: c } of paths(def.commands)) {
      cases.push({ words: [...argv, '--'], want: Object.keys(c.options).map((o) => `--${o}`) });
      if (c.subcommands?.length) cases.push({ words: [...argv, ''], want: c.subcommands.map((s) => s.name) });
      for (const [opt, o] of Object.entries(c.options)) if (o.choices) cases.push({ words: [...argv, `--${opt}`, ''], want: [...o.choices] });
    }
    const dir = mkdtempSync('/tmp/hv-completion-');
    try {
      const driver = [script, ...cases.map((k) => {
        const words = [p.name, ...k.words].map((w) => `'${w}'`).join(' ');
        return `COMP_WORDS=(${words}); COMP_CWORD=${k.words.length}; COMPREPLY=(); ${'_' + p.name + '_complete'}; echo "$(IFS=,; echo "\${COMPREPLY[*]}")"`;
      })].join('\n');
      writeFileSync(path.join(dir, 'drive.sh'), driver);
      const lines = execFileSync('bash', [path.join(dir, 'drive.sh')], { encoding: 'utf8' }).split('\n');
      cases.forEach((k, i) => expect({ words: k.words, got: lines[i]!.split(',').filter(Boolean).sort() }).toEqual({ words: k.words, got: expect.arrayContaining(k.want) }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the man page from make build: groff reads it without a warning; it names every command and option', async () => {
    const page = readFileSync(path.join(REPO, 'dist/share/man/man1', `${p.name}.1`), 'utf8');
    const r = spawnSync('groff', ['-man', '-ww', '-z'], { input: page, encoding: 'utf8' });
    expect({ code: r.status, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    for (const { argv, def } of paths((await define(p)).commands)) {
      expect(page).toContain(`.SS ${[p.name, ...argv].join(' ').replace(/-/g, '\\-')}`);
      for (const opt of Object.keys(def.options)) expect(page).toContain(`\\-\\-${opt.replace(/-/g, '\\-')}`);
    }
  });
});

// Every program words parseArgs's errors itself (lib/cli/parse-error.ts).
describe.each([hvinstall, hvagent, hvpxe].map((p) => [p.name, p] as const))('%s options', (_name, p) => {
  it('a typo of an option names the option it was probably meant to be', async () => {
    for (const { argv, def } of paths((await define(p)).commands)) {
      if (def.subcommands?.length) continue;
      for (const opt of Object.keys(def.options).filter((o) => o.length >= 4)) {
        // The last two letters swapped: one edit away from this option.
        const typo = `--${opt.slice(0, -2)}${opt.at(-1)}${opt.at(-2)}`;
        if (typo === `--${opt}`) continue;
        const r = await call(p, [...argv, typo]);
        expect(`${r.code} ${r.stderr}`, `${argv.join(' ')} ${typo}`).toMatch(new RegExp(`^(threw )?2\\b[^]*unknown option ${typo} \\(did you mean --${opt}\\?\\)`));
      }
    }
  });

  it('a letter left out of an option (--jsn, as in validate --jsn) names the option too, in our words, not Node\'s', async () => {
    const withJson = paths((await define(p)).commands).filter(({ def }) => !def.subcommands?.length && 'json' in def.options);
    if (p.name === 'hvinstall') expect(withJson.map((c) => c.argv.join(' '))).toContain('validate');
    for (const { argv } of withJson) {
      const r = await call(p, [...argv, '--jsn']);
      expect(`${r.code} ${r.stderr}`, argv.join(' ')).toMatch(/^(threw )?2\b[^]*unknown option --jsn \(did you mean --json\?\)/);
      expect(r.stderr).not.toMatch(/Unknown option '|To specify a positional argument/);
      expect(r.stdout).toBe('');
    }
  });

});

describe('version', () => {
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim();
  const { version } = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string };

  it.each(['hvinstall', 'hvagent', 'hvpxe'])('%s --version and version --json: the package version and the built commit, without git at run time', (prog) => {
    const env = { PATH: '/nonexistent', HOME: '/nonexistent' };
    const text = spawnSync(path.join(REPO, 'bin', prog), ['--version'], { encoding: 'utf8', cwd: '/', env: { ...env, PATH: '/usr/bin:/bin' } });
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^${prog} ${version.replace(/\./g, '\\.')} \\(commit ${head}(-dirty)?, node v\\d+`));
    // node straight away, with no git (nor anything else) on PATH.
    const cli = { hvinstall: 'installer', hvagent: 'agent', hvpxe: 'pxe' }[prog];
    const json = spawnSync(process.execPath, [path.join(REPO, 'dist', cli!, 'cli.js'), 'version', '--json'], { encoding: 'utf8', cwd: '/', env });
    expect(json.status).toBe(0);
    const v = JSON.parse(json.stdout) as { program: string; version: string; commit: string };
    expect({ ...v, commit: v.commit.replace(/-dirty$/, '') }).toMatchObject({ program: prog, version, commit: head });
    expect(spawnSync(process.execPath, [path.join(REPO, 'dist', cli!, 'cli.js'), 'version', '--yaml'], { encoding: 'utf8', env }).status).toBe(2);
  });
});

describe('did you mean', () => {
  it('suggests a typo (swap, missing, extra letter) or a unique prefix, and nothing for a far word', () => {
    const known = ['validate', 'preflight', 'plan', 'install', 'render', 'fetch'];
    expect(suggest('instal', known)).toBe('install');
    expect(suggest('valdiate', known)).toBe('validate');
    expect(suggest('renderr', known)).toBe('render');
    expect(suggest('pre', known)).toBe('preflight');
    expect(suggest('p', known)).toBeUndefined();
    expect(suggest('kubectl', known)).toBeUndefined();
  });
});
