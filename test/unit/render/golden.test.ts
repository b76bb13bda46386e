/**
 * Golden files: every case renders to exactly the bytes and modes under test/fixtures/render/<case>/:
 * the files the install writes (`install` in modes.txt) and those the initramfs stage of
 * 90_custom.yaml writes at every boot (`boot`: rancherd's config and bootstrap resources), each as it
 * lands on the node. Regenerate after a deliberate change with
 * `UPDATE_GOLDEN=1 npx vitest run test/unit/render/golden.test.ts` and review the diff.
 * /oem/harvester.config is config's serialisation and is checked by round trip in
 * rendered-files.test.ts instead.
 */
import { describe, expect, it } from 'vitest';
import { mkdirSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { renderNode } from '../../../installer/render/index.js';
import { CASES } from './cases.js';

const FIXTURES = new URL('../../fixtures/render/', import.meta.url).pathname;
const UPDATE = process.env.UPDATE_GOLDEN === '1';
const SKIP_PATHS = new Set(['/oem/harvester.config', '/oem/hvinstall/config.json']);

function listTree(dir: string, base = dir): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((n) => {
    const p = path.join(dir, n);
    return statSync(p).isDirectory() ? listTree(p, base) : ['/' + path.relative(base, p)];
  });
}

describe.each(CASES)('golden $name', (c) => {
  const report = renderNode(c.config, c.facts, c.seeds);
  const boot = new Set(report.yipFiles);
  const files = [...report.files.filter((f) => !SKIP_PATHS.has(f.path)), ...report.yipFiles].sort((a, b) => (a.path < b.path ? -1 : 1));
  const caseDir = path.join(FIXTURES, c.name);
  const treeDir = path.join(caseDir, 'tree');
  const modes = files.map((f) => `0${f.mode.toString(8)} ${f.owner} ${f.secret ? 'secret' : 'plain'} ${boot.has(f) ? 'boot' : 'install'} ${f.path}`).join('\n') + '\n';

  if (UPDATE) {
    rmSync(caseDir, { recursive: true, force: true });
    for (const f of files) {
      const p = path.join(treeDir, f.path);
      mkdirSync(path.dirname(p), { recursive: true });
      writeFileSync(p, f.content);
    }
    writeFileSync(path.join(caseDir, 'modes.txt'), modes);
    writeFileSync(path.join(caseDir, 'report.json'), JSON.stringify({ hostname: report.hostname, warnings: report.warnings, bootstrap: report.bootstrap }, null, 2) + '\n');
  }

  it('renders the same set of files with the same modes', () => {
    expect(modes).toBe(readFileSync(path.join(caseDir, 'modes.txt'), 'utf8'));
    expect(files.map((f) => f.path).sort()).toEqual(listTree(treeDir).sort());
  });

  it('renders every file byte for byte', () => {
    for (const f of files) {
      const want = readFileSync(path.join(treeDir, f.path));
      expect(Buffer.from(typeof f.content === 'string' ? Buffer.from(f.content) : f.content).equals(want), f.path).toBe(true);
    }
  });

  it('reports the same hostname, warnings and bootstrap decision', () => {
    expect({ hostname: report.hostname, warnings: report.warnings, bootstrap: report.bootstrap }).toEqual(JSON.parse(readFileSync(path.join(caseDir, 'report.json'), 'utf8')));
  });

  it('is deterministic: a second render is identical', () => {
    const again = renderNode(structuredClone(c.config), structuredClone(c.facts), { ...c.seeds });
    expect(again).toEqual(report);
  });
});
