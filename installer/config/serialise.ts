// Placeholder until issue #2 lands the implementation.
export function toHarvesterConfigYaml(..._args: unknown[]): never {
  throw new Error('installer/config/serialise.ts: not implemented yet (issue #2)');
}
