/** The real consumers' checks, shared by unit and integration tests: JSON schemas (ajv), the Kubernetes Pod model. */
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
export const validateYip = compile('yip.schema.json');
export const validateRke2 = compile('rke2-config.schema.json');
export const validateRegistries = compile('registries.schema.json');
export const validateRancherdConfig = compile('rancherd-config.schema.json');
export const validateRancherdResource = compile('rancherd-resources.schema.json');

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
