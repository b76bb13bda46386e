/**
 * Guards are loaded by name at run time from agent/guards/<name>.js, so a build without one of them
 * (another engineer's guard not landed yet, or a trimmed build) still runs the others: the missing
 * guard is reported as failed, never a crash.
 */
import { access } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Guard, GuardName } from './guard.js';

export type GuardLoad = { ok: true; guard: Guard } | { ok: false; reason: string };
export type GuardLoader = (name: GuardName) => Promise<GuardLoad>;

export const NOT_AVAILABLE = 'not available in this build';

function isGuard(v: unknown, name: GuardName): v is Guard {
  const g = v as Partial<Guard> | undefined;
  return !!g && g.name === name && typeof g.reconcile === 'function' && Array.isArray(g.dependsOn) && typeof g.deadlineMs === 'number';
}

/** Loads `<dir>/<name>.js` (or `.ts` when running from source, as under vitest). */
export async function loadGuardModule(name: GuardName, dir: URL = new URL('./guards/', import.meta.url)): Promise<GuardLoad> {
  let url: URL | undefined;
  for (const ext of ['.js', '.ts']) {
    const candidate = new URL(`${name}${ext}`, dir);
    if (await access(fileURLToPath(candidate)).then(() => true, () => false)) {
      url = candidate;
      break;
    }
  }
  if (!url) return { ok: false, reason: NOT_AVAILABLE };
  let mod: { default?: unknown };
  try {
    mod = (await import(url.href)) as { default?: unknown };
  } catch (err) {
    // The module is there but one of its imports is not (or it throws on load).
    return { ok: false, reason: `cannot load ${fileURLToPath(url)}: ${(err as Error).message}` };
  }
  if (!isGuard(mod.default, name)) {
    return { ok: false, reason: `${fileURLToPath(url)} has no default export implementing Guard '${name}'` };
  }
  return { ok: true, guard: mod.default };
}

/** The guards of this build, statically imported (loaded on first use, so `hvagent status` does not pay for them). */
export const defaultGuardLoader: GuardLoader = async (name) => {
  const { GUARDS } = await import('./guards/all.js');
  return { ok: true, guard: GUARDS[name] };
};
