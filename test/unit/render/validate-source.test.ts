/**
 * `hvinstall validate --source` fails exactly where `hvinstall render --source` fails: the same
 * config and OS image pass both or fail both, with the same message.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import render from '../../../installer/commands/render.js';
import validate from '../../../installer/commands/validate.js';
import { CASES, RELEASE_TEXT, TEMPLATES } from './cases.js';
import { goEmbedElf } from './go-embed-elf.js';

let dir: string;
let out: string[];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'hv-validate-src-'));
  out = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => (out.push(String(s)), true));
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

/** An OS tree with rancherd and, as asked, the release file and harvester-installer's templates. */
function tree(name: string, opts: { release: boolean; templates: boolean }): string {
  const root = path.join(dir, name);
  const files: Record<string, string | Buffer> = { 'usr/bin/rancherd': '#!/bin/sh\n', 'usr/lib/systemd/system/rancherd.service': '[Service]\n' };
  if (opts.release) files['etc/harvester-release.yaml'] = RELEASE_TEXT;
  if (opts.templates) files['usr/bin/harvester-installer'] = goEmbedElf({ 'templates/rancherd-22-addons.yaml': TEMPLATES.addons, 'templates/rancherd-12-monitoring-dashboard.yaml': TEMPLATES.dashboards });
  for (const [p, c] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    writeFileSync(path.join(root, p), c);
  }
  return root;
}

async function outcome(cmd: (argv: string[]) => Promise<number>, argv: string[]): Promise<{ code: number; text: string }> {
  out = [];
  let code: number;
  try {
    code = await cmd(argv);
  } catch (e) {
    out.push(String((e as Error).message));
    code = (e as { exitCode?: number }).exitCode ?? -1;
  }
  return { code, text: out.join('') };
}

describe('validate --source and render --source agree', () => {
  const config = () => {
    const f = path.join(dir, 'config.json');
    const c = structuredClone(CASES.find((k) => k.name === 'rancherd-create')!.config);
    // An addon the old render left out and then refused when enabled: now rendered from the release's template.
    c.install!.addons = { ...c.install!.addons, harvester_vm_import_controller: { enabled: true } };
    writeFileSync(f, JSON.stringify(c));
    return f;
  };

  it.each([
    ['a Harvester image (release, templates)', { release: true, templates: true }, 0, undefined],
    ['rancherd without Harvester installer templates', { release: true, templates: false }, 1, "the OS image carries rancherd, but not Harvester's installer with its addon and dashboard templates"],
    ['rancherd without release metadata', { release: false, templates: true }, 1, 'the OS image carries rancherd, but no version is known for kubernetes'],
  ] as const)('%s', async (_name, shape, want, message) => {
    const cfg = config();
    const src = tree('src', shape);
    const v = await outcome(validate, [cfg, '--source', src]);
    const r = await outcome(render, ['--config', cfg, '--out', path.join(dir, 'out'), '--source', src]);
    expect(v.code).toBe(want);
    expect(r.code === 0 ? 0 : 1).toBe(want);
    if (message) {
      expect(v.text).toContain(message);
      expect(r.text).toContain(message);
    }
  });

  it('--release without --source is a usage error; --source that does not exist too', async () => {
    expect((await outcome(validate, [config(), '--release', path.join(dir, 'r.yaml')])).code).toBe(2);
    expect((await outcome(validate, [config(), '--source', path.join(dir, 'nope')])).code).toBe(2);
  });
});
