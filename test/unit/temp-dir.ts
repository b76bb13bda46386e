/**
 * Temp directories for tests that remove themselves, even when the test fails: an assertion that
 * throws before a trailing rm would otherwise leave the directory in /tmp for every run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, onTestFinished } from 'vitest';

function make(prefix: string): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

// Retries: a child the test just killed may still be closing files in the directory.
function remove(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
}

/** A fresh directory removed when the running test finishes; call it in a test or a beforeEach. */
export function testTempDir(prefix: string): string {
  const dir = make(prefix);
  onTestFinished(() => remove(dir));
  return dir;
}

/** A fresh directory for the whole file, removed after its last test; call it at the file's top level. */
export function fileTempDir(prefix: string): string {
  const dir = make(prefix);
  afterAll(() => remove(dir));
  return dir;
}
