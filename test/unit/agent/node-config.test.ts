/**
 * loadNodeConfig (agent/node-config.ts) on a temporary root: the node config is parsed again only
 * when its bytes change (the registries guard reads it at every check), every change is seen even
 * one that keeps the file's size and times, and each caller gets a copy of its own.
 */
import { mkdtemp, readFile, rm, stat, utimes, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

vi.mock('../../../config/index.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../../config/index.js')>();
  return { ...actual, loadConfig: vi.fn(actual.loadConfig) };
});
const { loadConfig } = await import('../../../config/index.js');
const { loadNodeConfig } = await import('../../../agent/node-config.js');

const REPO = path.resolve(import.meta.dirname, '../../..');
const FILE = '/oem/harvester.config';
let root = '';
let text = '';
const at = (p: string): string => path.join(root, p);

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hv-node-config-'));
  await mkdir(at('/oem'));
  text = await readFile(path.join(REPO, 'examples/config-create.yaml'), 'utf8');
  await writeFile(at(FILE), text);
  vi.mocked(loadConfig).mockClear();
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const load = () => loadNodeConfig(at, [FILE]);

describe('loadNodeConfig', () => {
  it('parses the file once while its bytes stay the same', async () => {
    const first = await load();
    const second = await load();
    expect(first.config?.os?.hostname).toBe('harvester-demo-1');
    expect(second).toEqual(first);
    expect(second.source).toBe(FILE);
    expect(loadConfig).toHaveBeenCalledTimes(1);
  });

  it('sees an edit that keeps the size, the times and the inode', async () => {
    const when = 1_780_000_000; // whole seconds: utimes sets them exactly
    await utimes(at(FILE), when, when);
    expect((await load()).config?.os?.hostname).toBe('harvester-demo-1');
    const before = await stat(at(FILE));
    const edited = text.replace('hostname: harvester-demo-1', 'hostname: harvester-demo-2');
    expect(edited).not.toBe(text);
    expect(edited.length).toBe(text.length);
    await writeFile(at(FILE), edited);
    await utimes(at(FILE), when, when);
    const after = await stat(at(FILE));
    expect([after.ino, after.size, after.mtimeMs]).toEqual([before.ino, before.size, before.mtimeMs]);
    expect((await load()).config?.os?.hostname).toBe('harvester-demo-2');
    expect(loadConfig).toHaveBeenCalledTimes(2);
  });

  it('gives each caller a copy of its own', async () => {
    const first = await load();
    first.config!.os!.hostname = 'changed-by-a-caller';
    first.problems.push('a caller added this');
    const second = await load();
    expect(second.config?.os?.hostname).toBe('harvester-demo-1');
    expect(second.problems).toEqual([]);
  });

  it('reports a file that stopped loading, and loads it again once fixed', async () => {
    expect((await load()).problems).toEqual([]);
    await writeFile(at(FILE), 'scheme_version: 1\nos: [unclosed\n');
    const broken = await load();
    expect(broken.problems.length).toBeGreaterThan(0);
    expect(broken.problems[0]).toContain(FILE);
    expect(broken.config?.os?.hostname).toBeUndefined();
    await writeFile(at(FILE), text);
    const fixed = await load();
    expect(fixed.problems).toEqual([]);
    expect(fixed.config?.os?.hostname).toBe('harvester-demo-1');
  });
});
