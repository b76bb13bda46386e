import { afterAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkStateDir, HostRecord } from '../../../installer/steps/host-record.js';
import { newJournal } from '../../../installer/steps/journal.js';
import { InstallLog } from '../../../installer/steps/install-log.js';
import { Logger } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';
import type { EventBus } from '../../../installer/steps/progress.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'hv-hostrec-'));
  dirs.push(d);
  return d;
}

describe('checkStateDir', () => {
  it('accepts a writable directory with room (and creates it)', async () => {
    expect(await checkStateDir(path.join(await tmp(), 'state'))).toBeUndefined();
  });
  it('names the directory and the cause when it cannot be written', async () => {
    const d = await tmp();
    await writeFile(path.join(d, 'file'), '');
    const err = await checkStateDir(path.join(d, 'file', 'state'));
    expect(err?.message).toMatch(new RegExp(`^cannot write the install's journal and log in ${d}/file/state: .*ENOTDIR`));
    expect(err?.hint).toContain('nothing was changed on any disk');
  });
});

describe('HostRecord', () => {
  function record(file: string) {
    const events: Array<{ level?: string; message?: string }> = [];
    const bus = { emit: (e: { level?: string; message?: string }) => events.push(e) } as unknown as EventBus;
    const log = new Logger({ write: () => undefined }, new Redactor(), 'debug');
    const r = new HostRecord(file, newJournal('d', '/dev/x', ['guard', 'deploy']), new InstallLog(), bus, log);
    return { r, events };
  }

  it('writes the journal', async () => {
    const file = path.join(await tmp(), 'x.journal.json');
    const { r } = record(file);
    await r.save();
    expect(JSON.parse(await readFile(file, 'utf8')).device).toBe('/dev/x');
    expect(r.problem).toBeUndefined();
  });

  it('a journal that can no longer be written is a warning, once, and the install goes on', async () => {
    const d = await tmp();
    await writeFile(path.join(d, 'file'), ''); // a file where the directory should be: every write fails
    const { r, events } = record(path.join(d, 'file', 'x.journal.json'));
    await r.save();
    await r.save();
    expect(r.problem).toMatch(/^cannot write the journal .*x\.journal\.json/);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ level: 'warn' });
    expect(events[0]!.message).toContain('the install goes on and keeps its record on the disk');
    await expect(r.saveOrThrow()).rejects.toThrow();
  });

  it('the final journal (for COS_OEM) says succeeded with finish done', async () => {
    const { r } = record(path.join(await tmp(), 'j.json'));
    expect(r.final().status).toBe('succeeded');
    expect(r.journal.status).toBe('running');
  });
});
