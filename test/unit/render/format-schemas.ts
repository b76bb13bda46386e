/**
 * Checks of the rendered formats that stand in for their consumers where those do not run here:
 * this project's own JSON Schemas of yip, RKE2's config and registries.yaml (schemas/*.json, each
 * written from the upstream source it cites), compiled with ajv, and kubernetes-models' core/v1 Pod
 * (generated from Kubernetes' OpenAPI). They are only as right as the schemas. The real consumers
 * run where this machine has them: nmcli (test/integration/render), containerd reading the
 * hosts.toml RKE2 writes (test/integration/agent/registries), openssl (rendered-files.test.ts).
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { ValidateFunction } from 'ajv';

const require = createRequire(import.meta.url);
const Ajv = require('ajv') as typeof import('ajv').default;

const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
function compile(name: string): ValidateFunction {
  return ajv.compile(JSON.parse(readFileSync(new URL(`../../../schemas/${name}`, import.meta.url), 'utf8')));
}
export const ourYipSchema = compile('yip.schema.json');
export const ourRke2ConfigSchema = compile('rke2-config.schema.json');
export const ourRegistriesSchema = compile('registries.schema.json');
export const ourRancherdConfigSchema = compile('rancherd-config.schema.json');
export const ourRancherdResourceSchema = compile('rancherd-resources.schema.json');

/** Throws with ajv's messages when `doc` does not match. */
export function assertSchema(validate: ValidateFunction, doc: unknown, what: string): void {
  if (!validate(doc)) throw new Error(`${what}: ${ajv.errorsText(validate.errors, { separator: '; ' })}`);
}

/** YAML as RKE2/yip read it (YAML 1.2 core, one document); duplicate keys are errors. */
export function parseYamlStrict(text: string): unknown {
  return parse(text, { uniqueKeys: true, strict: true });
}

/** Validates a manifest with kubernetes-models' core/v1 Pod (the Kubernetes OpenAPI schema). */
export async function assertKubernetesPod(doc: unknown): Promise<void> {
  const { Pod } = await import('kubernetes-models/v1/Pod');
  const d = doc as { apiVersion?: string; kind?: string };
  if (d.apiVersion !== 'v1' || d.kind !== 'Pod') throw new Error(`not a v1 Pod: ${d.apiVersion}/${d.kind}`);
  new Pod(doc as ConstructorParameters<typeof Pod>[0]).validate();
}
