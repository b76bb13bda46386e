/**
 * Objects built from keys someone else chose (a config file, a kernel command line that came over
 * PXE, profiles.yaml): every key is data. Plain `o[k]` reads inherited members (`constructor`,
 * `toString`) and `o[k] = v` with `__proto__` replaces the prototype, or pollutes Object.prototype
 * one level down. These two read and write own properties only.
 */

/** Sets an own enumerable property, even for `__proto__`. */
export function setOwn(o: Record<string, unknown>, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/** The own property `k` of `o`, or undefined (never an inherited member). */
export function ownValue(o: Record<string, unknown>, k: string): unknown {
  return Object.hasOwn(o, k) ? o[k] : undefined;
}
