import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../../agent/cli.js';
import { renderGrubenv, parseGrubenv } from '../../../node/grubenv.js';

let root: string;
const envFile = () => path.join(root, 'run/initramfs/cos-state/hv_assessment');
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hv-assess-cli-'));
  await mkdir(path.dirname(envFile()), { recursive: true });
  await writeFile(envFile(), renderGrubenv({ hv_assessment_enabled: 'yes', hv_assessment_state: 'trying' }));
});
afterEach(() => rm(root, { recursive: true, force: true }));

async function capture(argv: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((c: string) => ((out += c), true)) as typeof process.stdout.write;
  try {
    return { code: await main(argv), out };
  } finally {
    process.stdout.write = write;
  }
}

describe('hvagent assessment', () => {
  it('disarm cancels what is pending and switches it off; arm switches it on; grub reads the block', async () => {
    expect((await capture(['assessment', 'disarm', '--root', root])).code).toBe(0);
    expect(Object.fromEntries(parseGrubenv(await readFile(envFile())))).toEqual({ hv_assessment_enabled: 'no', hv_assessment_state: '' });
    expect((await execa('grub-editenv', [envFile(), 'list'])).stdout).toContain('hv_assessment_enabled=no');
    const status = await capture(['assessment', '--root', root]);
    expect(status.out).toMatch(/DISABLED/);
    await capture(['assessment', 'arm', '--root', root]);
    expect(Object.fromEntries(parseGrubenv(await readFile(envFile()))).hv_assessment_enabled).toBe('yes');
  });

  it('status exits 1 after a fallback and prints the record as JSON with --json', async () => {
    await mkdir(path.join(root, 'oem/hvinstall'), { recursive: true });
    await writeFile(path.join(root, 'oem/hvinstall/assessment.json'), JSON.stringify({ version: 1, outcome: 'fell-back', updatedAt: 'x', message: 'UPGRADE FAILED: v3' }));
    const r = await capture(['assessment', 'status', '--json', '--root', root]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out)).toMatchObject({ enabled: true, state: 'trying', record: { outcome: 'fell-back' } });
  });

  it('refuses an unknown action', async () => {
    await expect(main(['assessment', 'explode', '--root', root])).rejects.toThrow(/unknown assessment action/);
  });
});
