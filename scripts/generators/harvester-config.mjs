// Build-time code generation for the config schema (schemas/harvester-config.v1.schema.json):
//  - config/generated/harvester-config.validator.js: ajv standalone (ESM), so validation
//    compiles no schema at run time;
//  - config/generated/harvester-config.fields.js: the field tree the normaliser walks
//    (kinds, spellings, order, secrets), derived from the same schema;
//  - config/generated/harvester-config.schema-types.ts: TypeScript types of the schema,
//    checked against config/types.ts at compile time (config/schema-check.ts).
// Output is deterministic, so regenerating an unchanged schema leaves the tree clean.
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { bundleForNode } from '../node-bundle.mjs';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import standaloneModule from 'ajv/dist/standalone/index.js';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;
const standaloneCode = standaloneModule.default ?? standaloneModule;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const schemaPath = path.join(root, 'schemas/harvester-config.v1.schema.json');
const outDir = path.join(root, 'config/generated');

/** Annotation keywords the schema carries for our messages; ajv must know them in strict mode. */
export const ANNOTATIONS = [
  ['x-message', 'string'],
  ['x-hint', 'string'],
  ['x-secret', 'boolean'],
  ['x-kind', 'string'],
  // The Go field name where yaml.v3's key for it (the name lowercased) is not the json tag lowercased.
  ['x-go-name', 'string'],
  // A Go pointer field: yaml.v3 writes its zero value as null.
  ['x-go-pointer', 'boolean'],
  // A finding of this node is a warning: Harvester installs anyway (docs/config.md, the compatibility rule).
  ['x-severity', 'string'],
  // Findings of this node only in this install.mode (Harvester checks it only there).
  ['x-only-in-mode', 'string'],
  // hvinstall, beyond Harvester's struct: /oem/harvester.config carries it only when set.
  ['x-hvinstall', 'boolean'],
];

export function createAjv() {
  const ajv = new Ajv2020({
    allErrors: true,
    verbose: true,
    strict: true,
    allowUnionTypes: true,
    unicode: false,
    // The deprecation notice for `unicode` is expected: it keeps the standalone code free of require().
    logger: { log() {}, warn() {}, error: console.error },
    code: { source: true, esm: true, optimize: true, lines: false },
  });
  for (const [keyword, schemaType] of ANNOTATIONS) ajv.addKeyword({ keyword, schemaType });
  addFormats(ajv, ['ipv4']);
  return ajv;
}

function resolveRef(schema, node) {
  if (!node.$ref) return node;
  const name = node.$ref.replace('#/$defs/', '');
  const target = schema.$defs[name];
  if (!target) throw new Error(`unresolved $ref ${node.$ref}`);
  return { ...target, $defName: name };
}

/**
 * Field tree: {k: kind, f?: {name: node} (ordered), i?: item node, v?: value node, s?: secret,
 * g?: {name: yaml.v3 key} where that key is not the name lowercased, z?: written as null when unset,
 * h?: not in Harvester's struct, written only when set}.
 */
function fieldNode(schema, raw, seen = new Map()) {
  const node = resolveRef(schema, raw);
  if (node.$defName && seen.has(node.$defName)) return seen.get(node.$defName);
  const out = {};
  if (node['x-secret']) out.s = 1;
  if (raw['x-go-pointer']) out.z = 1;
  if (node['x-hvinstall']) out.h = 1;
  if (node['x-kind'] === 'multipath') {
    out.k = 'multipath';
    out.i = fieldNode(schema, node.then.items, seen);
    out.o = fieldNode(schema, node.else, seen);
    return out;
  }
  const type = node.type;
  if (type === 'string') out.k = 'string';
  else if (type === 'boolean') out.k = 'bool';
  else if (type === 'integer') out.k = 'int';
  else if (type === 'array') {
    const item = resolveRef(schema, node.items);
    if (item.type === 'string') out.k = 'stringList';
    else {
      out.k = 'structList';
      out.i = fieldNode(schema, node.items, seen);
    }
  } else if (type === 'object' && node.properties) {
    out.k = 'struct';
    out.f = {};
    if (node.$defName) seen.set(node.$defName, out);
    for (const [name, child] of Object.entries(node.properties)) {
      out.f[name] = fieldNode(schema, child, seen);
      if (child['x-go-name']) (out.g ??= {})[name] = child['x-go-name'].toLowerCase();
    }
  } else if (type === 'object' && node.additionalProperties) {
    const value = resolveRef(schema, node.additionalProperties);
    if (value.type === 'string') out.k = 'stringMap';
    else if (value.type === 'array') out.k = 'stringListMap';
    else {
      out.k = 'structMap';
      out.v = fieldNode(schema, node.additionalProperties, seen);
    }
  } else throw new Error(`cannot derive a field kind for ${JSON.stringify(raw).slice(0, 120)}`);
  return out;
}

/** TypeScript type text for a schema node (the subset this schema uses). */
function tsType(schema, raw, indent = '') {
  const node = raw.$ref ? { ...schema.$defs[raw.$ref.replace('#/$defs/', '')] } : raw;
  if (raw.$ref) return `Schema${raw.$ref.replace('#/$defs/', '')}`;
  if (node['x-kind'] === 'multipath') {
    return `${tsType(schema, node.then.items)}[] | ${tsType(schema, node.else)}`;
  }
  if (node.enum) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (node.const !== undefined) return JSON.stringify(node.const);
  switch (node.type) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'boolean';
    case 'integer':
    case 'number':
      return 'number';
    case 'array':
      return `Array<${tsType(schema, node.items, indent)}>`;
    case 'object': {
      if (node.properties) {
        const req = new Set(node.required ?? []);
        const lines = Object.entries(node.properties).map(
          ([k, v]) => `${indent}  ${k}${req.has(k) ? '' : '?'}: ${tsType(schema, v, indent + '  ')};`,
        );
        return `{\n${lines.join('\n')}\n${indent}}`;
      }
      return `Record<string, ${tsType(schema, node.additionalProperties, indent)}>`;
    }
    default:
      throw new Error(`no TypeScript type for ${JSON.stringify(raw).slice(0, 120)}`);
  }
}

async function writeIfChanged(file, text) {
  let old = null;
  try {
    old = await readFile(file, 'utf8');
  } catch {
    // absent: written below
  }
  if (old !== text) await writeFile(file, text);
}

/** The schema without documentation keywords: the runtime validator does not need them. */
function withoutDocs(node) {
  if (Array.isArray(node)) return node.map(withoutDocs);
  if (!node || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'description' || k === 'title' || k === '$comment') continue;
    out[k] = k === 'properties' || k === '$defs' ? Object.fromEntries(Object.entries(v).map(([n, s]) => [n, withoutDocs(s)])) : withoutDocs(v);
  }
  return out;
}

/**
 * Bundles the validate command (our modules and yaml) into dist/installer/commands/validate.bundle.js:
 * one file loads far faster than ~100 (bench/validate.bench.mjs). The URL fetcher stays a separate,
 * lazily imported module so undici is loaded only for URLs. Skipped (with a notice) without esbuild.
 */
async function bundleValidateCommand() {
  // lib/errors stays shared so the CLI's `instanceof HvError` sees our errors (hint, exit code).
  const sharedLibExternal = {
    name: 'shared-lib-external',
    setup(build) {
      build.onResolve({ filter: /\/lib\/(http-fetch|errors)\.js$/ }, (args) => ({ path: `../../lib/${path.basename(args.path)}`, external: true }));
    },
  };
  await bundleForNode({
    entry: path.join(root, 'config/validate-command.ts'),
    outfile: path.join(root, 'dist/installer/commands/validate.bundle.js'),
    what: 'hvinstall validate',
    external: ['undici'],
    plugins: [sharedLibExternal],
  });
}

export default async function generate() {
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  await mkdir(outDir, { recursive: true });

  const ajv = createAjv();
  const validate = ajv.compile(withoutDocs(schema));
  let code = standaloneCode(ajv, validate);
  if (/\brequire\(/.test(code)) {
    // The ipv4 format is the only runtime dependency; inline it so the module is pure ESM.
    code = code.replace(/const (\w+) = require\("ajv-formats\/dist\/formats"\)\.fullFormats\.ipv4;/g,
      'const $1 = /^(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$/;');
    if (/\brequire\(/.test(code)) throw new Error(`standalone validator still needs require(): ${code.match(/require\([^)]*\)/g)}`);
  }
  const header = '// GENERATED by scripts/generators/harvester-config.mjs from schemas/harvester-config.v1.schema.json. Do not edit.\n';
  await writeIfChanged(path.join(outDir, 'harvester-config.validator.js'), header + '// @ts-nocheck\n' + code + '\n');
  await writeIfChanged(
    path.join(outDir, 'harvester-config.validator.d.ts'),
    header +
      "import type { ErrorObject } from 'ajv';\n" +
      'export interface StandaloneValidate {\n  (data: unknown): boolean;\n  errors?: ErrorObject[] | null;\n}\n' +
      'export declare const validate: StandaloneValidate;\nexport default validate;\n',
  );

  const tree = fieldNode(schema, schema);
  await writeIfChanged(
    path.join(outDir, 'harvester-config.fields.js'),
    header + `export const fieldTree = ${JSON.stringify(tree)};\n`,
  );
  await writeIfChanged(
    path.join(outDir, 'harvester-config.fields.d.ts'),
    header +
      "export type FieldKind = 'string' | 'bool' | 'int' | 'stringList' | 'stringMap' | 'stringListMap' | 'struct' | 'structList' | 'structMap' | 'multipath';\n" +
      '/**\n * k: kind; f: fields of a struct (Go struct order); i: item of a list; v: value of a map; o: object form of a union; s: secret;\n' +
      ' * g: the yaml.v3 key (Go field name lowercased) of the fields where it is not the json tag lowercased; z: a Go pointer (unset is null);\n * h: hvinstall\'s, not in Harvester\'s struct (written only when set).\n */\n' +
      'export interface FieldNode {\n  k: FieldKind;\n  f?: Record<string, FieldNode>;\n  i?: FieldNode;\n  v?: FieldNode;\n  o?: FieldNode;\n  s?: 1;\n  g?: Record<string, string>;\n  z?: 1;\n  h?: 1;\n}\n' +
      'export declare const fieldTree: FieldNode;\n',
  );

  const defs = Object.entries(schema.$defs)
    .map(([name, def]) => `export type Schema${name} = ${tsType(schema, def)};\n`)
    .join('\n');
  await writeIfChanged(
    path.join(outDir, 'harvester-config.schema-types.ts'),
    header + defs + `\nexport type SchemaHarvesterConfig = ${tsType(schema, { ...schema, $defs: undefined })};\n`,
  );
  await bundleValidateCommand();
}

if (import.meta.url === `file://${process.argv[1]}`) await generate();
