import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Host } from '../../../lib/host.js';
import { gatherMachineFacts, runPreflightChecks, type MachineFacts, type PreflightReport, type Profile } from '../../../installer/preflight/index.js';
import type { HarvesterConfig } from '../../../config/types.js';

export const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/sysroot');

export function fixtureHost(name: string): Host {
  return new Host(path.join(FIXTURES, name));
}

export async function fixtureFacts(name: string): Promise<MachineFacts> {
  return gatherMachineFacts(fixtureHost(name));
}

/** `id subject: result` for every check, in order: asserting this list pins every outcome. */
export function outcomes(report: PreflightReport): string[] {
  return report.checks.map((c) => `${c.id}${c.subject ? ` ${c.subject}` : ''}: ${c.result}`);
}

export function check(report: PreflightReport, id: string, subject?: string) {
  const c = report.checks.find((x) => x.id === id && (subject === undefined || x.subject === subject));
  if (!c) throw new Error(`no check ${id}${subject ? ` ${subject}` : ''} in ${outcomes(report).join(', ')}`);
  return c;
}

export async function preflightOf(name: string, profile: Profile, config?: HarvesterConfig): Promise<PreflightReport> {
  return runPreflightChecks(await fixtureFacts(name), { profile, config });
}
