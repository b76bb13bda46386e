/** lib/exec.ts run() on real commands: output, input, exit codes, deadline, abort, not found, env, redaction. */
import { describe, expect, it } from 'vitest';
import { CommandError, hasCommand, run } from '../../../lib/exec.js';
import { Redactor } from '../../../lib/redact.js';

async function failure(p: Promise<unknown>): Promise<CommandError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(CommandError);
  return e as CommandError;
}

describe('run', () => {
  it('returns stdout and stderr whole (final newline kept) and feeds input on stdin', async () => {
    expect(await run('sh', ['-c', 'printf "a\\nb\\n"; printf warn >&2'])).toEqual({ command: `sh -c 'printf "a\\nb\\n"; printf warn >&2'`, exitCode: 0, stdout: 'a\nb\n', stderr: 'warn' });
    expect((await run('cat', [], { input: 'fed\n' })).stdout).toBe('fed\n');
    // Without input, stdin is empty (a reader gets EOF, not a hang).
    expect((await run('cat', [], { timeoutMs: 10_000 })).stdout).toBe('');
  });

  it('a non-zero exit: CommandError with the command, the status and stderr; allowFailure returns it', async () => {
    const e = await failure(run('sh', ['-c', 'echo broken pipe >&2; exit 3']));
    expect(e.message).toBe("exited with status 3: sh -c 'echo broken pipe >&2; exit 3'\n    broken pipe");
    expect(e.exitCode_).toBe(3);
    expect((await run('sh', ['-c', 'exit 4'], { allowFailure: true })).exitCode).toBe(4);
  });

  it('killed by a signal, timed out, aborted, not found: each says so', async () => {
    expect((await failure(run('sh', ['-c', 'kill -9 $$']))).message).toMatch(/^killed by SIGKILL: /);
    expect((await failure(run('sleep', ['30'], { timeoutMs: 100 }))).message).toBe('timed out after 100 ms: sleep 30');
    const ac = new AbortController();
    const p = run('sleep', ['30'], { signal: ac.signal });
    ac.abort(new Error('agent stopping'));
    expect((await failure(p)).message).toBe('stopped (agent stopping): sleep 30');
    const gone = await failure(run('hv-no-such-command-x', ['a']));
    expect(gone.message).toBe('command not found (install the package that provides hv-no-such-command-x): hv-no-such-command-x a');
  });

  it('env adds to the inherited environment; undefined removes a variable', async () => {
    process.env.HV_EXEC_TEST_DROP = 'present';
    try {
      const r = await run('sh', ['-c', 'echo "$HV_EXEC_TEST_ADD|${HV_EXEC_TEST_DROP:-gone}|${PATH:+path}"'], { env: { HV_EXEC_TEST_ADD: 'added', HV_EXEC_TEST_DROP: undefined } });
      expect(r.stdout).toBe('added|gone|path\n');
    } finally {
      delete process.env.HV_EXEC_TEST_DROP;
    }
  });

  it('secrets in the command line and stderr are redacted in the error', async () => {
    const redactor = new Redactor();
    redactor.add('s3cr3t-token-value');
    const e = await failure(run('sh', ['-c', 'echo s3cr3t-token-value >&2; exit 1', 's3cr3t-token-value'], { redactor }));
    expect(e.message).not.toContain('s3cr3t-token-value');
    expect(e.message).toMatch(/^exited with status 1: sh -c/);
  });

  it('hasCommand', async () => {
    expect(await hasCommand('sh')).toBe(true);
    expect(await hasCommand('hv-no-such-command-x')).toBe(false);
    expect(await hasCommand('sh; touch /tmp/hv-should-not-exist')).toBe(false);
  });
});
