/**
 * The one-file bundle of hvinstall that the live system runs (scripts/generators/live-cli-bundle.mjs,
 * made by make build): it must be the same program as dist/installer/cli.js. Every command is
 * reachable, our errors keep their hint and exit code (one HvError class, not two), and the pieces
 * loaded at run time by path (the release schema, the validate bundle) are found from its location.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { liveEntry, liveLauncher, LIVE_CLI_BUNDLE } from '../../../iso-build/live/build-live.js';
import { RELEASE_TEXT } from '../render/cases.js';

const repo = path.resolve(__dirname, '../../..');
const bundle = path.join(repo, LIVE_CLI_BUNDLE);
const modules = path.join(repo, 'dist/installer/cli.js');
const tmp = mkdtempSync('/tmp/hv-live-bundle-');

beforeAll(() => {
  for (const f of [bundle, modules]) if (!existsSync(f)) throw new Error(`${f} is missing: run make build first`);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function run(entry: string, args: string[]) {
  const r = spawnSync(process.execPath, [entry, ...args], { encoding: 'utf8', cwd: tmp, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The bundle's answer, checked to be the modules' answer too. */
function both(args: string[]) {
  const b = run(bundle, args);
  expect(b).toEqual(run(modules, args));
  return b;
}

describe('the live CLI bundle', () => {
  it('is self-contained: our modules, yaml and undici inside, no import of dist/ modules by path', () => {
    const text = readFileSync(bundle, 'utf8');
    expect(text).not.toMatch(/from\s*"(undici|yaml)"|require\("(undici|yaml)"\)/);
    expect(text).not.toMatch(/from\s*"\.\.?\//);
    expect(text).toContain('EnvHttpProxyAgent');
  });

  it('runs every command (each one answers --help with its own usage)', () => {
    for (const cmd of ['validate', 'preflight', 'plan', 'install', 'image', 'console', 'render', 'fetch', 'config-volume']) {
      const r = both([cmd, '--help']);
      expect(r.code, cmd).toBe(0);
      expect(r.stdout, cmd).toContain(`usage: hvinstall ${cmd}`);
    }
    expect(both(['--version']).stdout).toMatch(/^hvinstall \d+\.\d+\.\d+ \(commit /);
  });

  it('keeps the hint and exit code of our errors (one HvError class), and an unknown command is a usage error', () => {
    const missing = both(['install', '--config', path.join(tmp, 'absent.yaml'), '--device', '/dev/null', '--yes']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('config file not found');
    expect(missing.stderr).toContain('hint: check the path');
    expect(missing.stderr).not.toMatch(/\n\s+at /);
    const unknown = both(['instal']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("did you mean 'install'");
  });

  it('validates a config with the compiled schema (valid and invalid)', () => {
    expect(both(['validate', path.join(repo, 'examples/config-create.yaml')]).code).toBe(0);
    const bad = both(['validate', path.join(repo, 'test/fixtures/config/invalid/bond-mode-unknown.yaml')]);
    expect(bad.code).toBe(1);
    expect(bad.stdout + bad.stderr).toMatch(/error: .*bond/i);
  });

  it("finds the release schema from its own location: an image's good harvester-release.yaml renders, a bad one is refused by the schema", () => {
    const image = (name: string, release: string) => {
      const dir = path.join(tmp, name);
      mkdirSync(path.join(dir, 'etc'), { recursive: true });
      writeFileSync(path.join(dir, 'etc/harvester-release.yaml'), release);
      return dir;
    };
    const config = path.join(repo, 'examples/config-create.yaml');
    const ok = both(['render', '--config', config, '--out', path.join(tmp, 'out-good'), '--source', image('good', RELEASE_TEXT)]);
    expect(ok.code).toBe(0);
    const refused = both(['render', '--config', config, '--out', path.join(tmp, 'out-bad'), '--source', image('bad', 'kubernetes:\n  - v1.35.6+rke2r1\n')]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('kubernetes: must be string');
  });
});

describe('the live launcher', () => {
  it('runs the bundle when make build made it, else the modules', async () => {
    expect(await liveEntry(repo)).toBe(LIVE_CLI_BUNDLE);
    expect(await liveEntry(tmp)).toBe('dist/installer/cli.js');
    expect(liveLauncher(LIVE_CLI_BUNDLE)).toBe(`#!/bin/sh\nexec node /opt/hvinstall/${LIVE_CLI_BUNDLE} "$@"\n`);
  });
});
