/**
 * RKE2 registries.yaml from Harvester's `containerd-registry` setting, parsed by
 * config/containerd-registry.ts (the parser validate uses too). The agent's registries
 * guard renders through this same function.
 */
import { stringify } from 'yaml';
import { parseContainerdRegistry, registriesHoldCredentials } from '../config/containerd-registry.js';

export { parseContainerdRegistry, registriesHoldCredentials, registryCredentials } from '../config/containerd-registry.js';
export type { RegistriesDocument, RegistryAuth, RegistryMirror, RegistryTls } from '../config/containerd-registry.js';

/** Renders /etc/rancher/rke2/registries.yaml. Deterministic: hosts and rewrites are sorted. */
export function renderRegistriesYaml(containerdRegistrySetting: string | object): string {
  return renderRegistriesFile(containerdRegistrySetting).content;
}

/** registries.yaml content plus its mode: 0600 when it holds credentials, else 0644. */
export function renderRegistriesFile(containerdRegistrySetting: string | object): { content: string; mode: number; secret: boolean } {
  const doc = parseContainerdRegistry(containerdRegistrySetting);
  const secret = registriesHoldCredentials(doc);
  return { content: stringify(doc, { lineWidth: 0, defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'QUOTE_DOUBLE' }), mode: secret ? 0o600 : 0o644, secret };
}
