import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GRUBENV_SIZE, parseGrubenv, renderGrubenv, updateGrubenv } from '../../../node/grubenv.js';
import { renderAssessmentHook, renderAssessmentScript, IMAGE_CHAIN_ENTRIES, OWN_CHAIN_ENTRIES } from '../../../node/boot-assessment.js';
import { renderDebugGrubcustom, renderGrubCfg, renderStateGrubcustom } from '../../../installer/bootloader/index.js';

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-grubenv-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('grub environment blocks (node/grubenv.ts) against grub-editenv', () => {
  const vars = { hv_assessment_enabled: 'yes', hv_assessment_state: 'trying', odd: 'back\\slash and\nnewline', empty: '' };

  it('reads what grub-editenv writes, escapes included', async () => {
    await withDir(async (dir) => {
      const f = path.join(dir, 'env');
      await execa('grub-editenv', [f, 'set', ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)]);
      expect(Object.fromEntries(parseGrubenv(await readFile(f)))).toEqual(vars);
    });
  });

  it('writes a 1024-byte block grub-editenv lists back byte for byte as it would have written it', async () => {
    await withDir(async (dir) => {
      const ours = path.join(dir, 'ours');
      const theirs = path.join(dir, 'theirs');
      await writeFile(ours, renderGrubenv(vars));
      await execa('grub-editenv', [theirs, 'set', ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)]);
      expect((await readFile(ours)).length).toBe(GRUBENV_SIZE);
      expect(await readFile(ours)).toEqual(await readFile(theirs));
    });
  });

  it('updates one variable and unsets another, keeping the rest and the size', () => {
    const block = updateGrubenv(renderGrubenv({ a: '1', hv_assessment_state: 'fallback', b: '2' }), { hv_assessment_state: '', b: undefined });
    expect(block.length).toBe(GRUBENV_SIZE);
    expect(Object.fromEntries(parseGrubenv(block))).toEqual({ a: '1', hv_assessment_state: '' });
  });

  it('refuses what is not a block, a bad name, and variables that do not fit', () => {
    expect(() => parseGrubenv('hello=1\n')).toThrow(/not a grub environment block/);
    expect(() => renderGrubenv({ 'a-b': '1' })).toThrow(/not \[A-Za-z0-9_\]\+/);
    expect(() => renderGrubenv({ big: 'x'.repeat(1000) })).toThrow(/block is full/);
  });
});

describe('the rendered grub scripts pass grub-script-check (read back from disk)', () => {
  const scripts: Record<string, string> = {
    'hv_assessment.cfg': renderAssessmentScript(),
    'grubcustom (image chain)': renderStateGrubcustom(renderDebugGrubcustom()),
    'hook (image chain)': renderAssessmentHook(IMAGE_CHAIN_ENTRIES),
    'hook (own chain)': renderAssessmentHook(OWN_CHAIN_ENTRIES, '($hv_dev_state)'),
    'grub.cfg (own chain)': renderGrubCfg({ tty: 'ttyS0' }),
  };
  for (const [name, text] of Object.entries(scripts)) {
    it(name, async () => {
      await withDir(async (dir) => {
        const f = path.join(dir, 'script.cfg');
        await writeFile(f, text);
        const r = await execa('grub-script-check', [f], { reject: false });
        expect(`${r.stdout}${r.stderr}`).toBe('');
        expect(r.exitCode).toBe(0);
        expect(await readFile(f, 'utf8')).toBe(text);
      });
    });
  }

  it("grubcustom names Elemental's hook, so elemental upgrade's after-upgrade stage does not append it", () => {
    // 08_boot_assessment.yaml: `if: ! grep -q "grub_boot_assessment" /tmp/mnt/STATE/grubcustom`
    expect(renderStateGrubcustom(renderDebugGrubcustom())).toContain('grub_boot_assessment');
    expect(renderStateGrubcustom(renderDebugGrubcustom())).toContain('--id debug');
  });
});
