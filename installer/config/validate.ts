// Placeholder until issue #2 lands the implementation.
export function validateRawConfig(..._args: unknown[]): never {
  throw new Error('installer/config/validate.ts: not implemented yet (issue #2)');
}
