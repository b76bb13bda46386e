/**
 * The seed of a fast-check property: HV_FUZZ_SEED when set (to replay a failure), else a new one
 * per run, so every CI run explores other inputs. The seed is printed either way; fast-check adds it
 * (with the shrunk counterexample's path) to any failure.
 */
import { randomInt } from 'node:crypto';

export function fuzzSeed(property: string): number {
  const given = process.env.HV_FUZZ_SEED;
  const seed = given !== undefined && given !== '' ? Number(given) : randomInt(2 ** 31 - 1);
  process.stdout.write(`fast-check seed ${seed} for "${property}" (replay: HV_FUZZ_SEED=${seed})\n`);
  return seed;
}

/**
 * The number of runs of a property: `n`, scaled by HV_FUZZ_SCALE (mutation testing runs the suite
 * once per mutant and sets it below 1; the properties still run, on fewer inputs).
 */
export function fuzzRuns(n: number): number {
  const scale = Number(process.env.HV_FUZZ_SCALE ?? 1);
  return Math.max(5, Math.round(n * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}
