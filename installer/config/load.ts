// Placeholder until issue #2 lands the implementation.
export function loadConfig(..._args: unknown[]): never {
  throw new Error('installer/config/load.ts: not implemented yet (issue #2)');
}
