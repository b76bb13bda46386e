/**
 * The status document's writer: a write that fails, however it fails, is logged and never stops the
 * next one (hvpxe's history writer stopped for good once JSON.stringify threw, and its flush spun).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StatusStore } from '../../../agent/status.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { Redactor } from '../../../lib/redact.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function store() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hv-status-'));
  dirs.push(dir);
  const sink = new MemorySink();
  const file = path.join(dir, 'status.json');
  return { file, sink, s: new StatusStore(file, ['network-online', 'rke2'], 'run', new Redactor(), new Logger(sink)) };
}

describe('StatusStore', () => {
  it('a document that cannot be serialised is logged, and the next change is written', async () => {
    const { file, sink, s } = store();
    // A BigInt: JSON.stringify throws on it.
    s.update('rke2', { detail: 10n as unknown as string });
    await s.flush();
    expect(sink.lines.join('')).toContain('cannot write the status document');
    s.update('rke2', { detail: 'ok', phase: 'succeeded' });
    await s.flush();
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { guards: Array<{ name: string; phase: string }> };
    expect(doc.guards.find((g) => g.name === 'rke2')!.phase).toBe('succeeded');
  });

  it('a path it cannot write (a directory stands there) is logged; once it can, writes resume', async () => {
    const { file, sink, s } = store();
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(file);
    writeFileSync(path.join(file, 'keep'), 'x');
    s.update('network-online', { phase: 'running' });
    await s.flush();
    expect(sink.lines.join('')).toContain('cannot write the status document');
    rmSync(file, { recursive: true, force: true });
    s.update('network-online', { phase: 'succeeded' });
    await s.flush();
    expect(JSON.parse(readFileSync(file, 'utf8')).guards[0].phase).toBe('succeeded');
  });

  it('changes made while a write is in flight are all written', async () => {
    const { file, s } = store();
    s.update('network-online', { phase: 'running' });
    s.update('rke2', { phase: 'running' });
    s.update('rke2', { phase: 'failed' });
    await s.flush();
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { guards: Array<{ name: string; phase: string }> };
    expect(doc.guards.map((g) => g.phase)).toEqual(['running', 'failed']);
  });
});
