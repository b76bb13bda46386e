/**
 * Writes a config the way Harvester saves /oem/harvester.config (harvester/harvester-installer
 * pkg/config: its struct marshalled with Go's yaml.v3 defaults). yaml.v3 ignores json tags: a key is
 * the Go field name lowercased (go-yaml/yaml yaml.go getStructInfo), which for most fields is the
 * json tag lowercased (`serverurl`, `os: {sshauthorizedkeys: ...}`, `install: {managementinterface: ...}`)
 * and for a few is not (`os.externalstorage`, `os.writefiles[].rawfilepermissions`,
 * `kubeovnoperatorchartversion`). Every field is present in Go struct order with its zero value
 * (null for Go pointers and the multipath union), including `defaultroute` that Harvester's json
 * reader ignores, with yaml.v3's 4-space indentation. Tools that read the file (`yq .serverurl`, the
 * dashboard, our own loader) rely on exactly this spelling.
 */
import { stringify } from 'yaml';
import { fieldTree, type FieldNode } from './generated/harvester-config.fields.js';
import type { HarvesterConfig } from './types.js';

function zeroOf(node: FieldNode): unknown {
  switch (node.k) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'int':
      return node.z ? null : 0;
    case 'stringList':
    case 'structList':
      return [];
    case 'stringMap':
    case 'stringListMap':
    case 'structMap':
      return {};
    case 'struct':
      return lowercaseStruct(node, {});
    case 'multipath':
      return null;
  }
}

function lowercaseStruct(node: FieldNode, value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, child] of Object.entries(node.f ?? {})) {
    // A key of ours Harvester's struct lacks is written only when set (a zero selector would be a rule).
    if (child.h && (value[name] === undefined || value[name] === null)) continue;
    out[node.g?.[name] ?? name.toLowerCase()] = value[name] === undefined || value[name] === null ? zeroOf(child) : convert(child, value[name]);
  }
  return out;
}

function convert(node: FieldNode, value: unknown): unknown {
  switch (node.k) {
    case 'struct':
      return lowercaseStruct(node, value as Record<string, unknown>);
    case 'structList':
      return (value as unknown[]).map((v) => lowercaseStruct(node.i!, v as Record<string, unknown>));
    case 'structMap':
      return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, lowercaseStruct(node.v!, v as Record<string, unknown>)]));
    case 'multipath':
      return Array.isArray(value) ? convert({ k: 'structList', i: node.i }, value) : lowercaseStruct(node.o!, value as Record<string, unknown>);
    default:
      return value;
  }
}

/** The lowercase-keyed object Harvester would marshal (exported for tests and the PXE server). */
export function toHarvesterConfigObject(config: HarvesterConfig): Record<string, unknown> {
  return lowercaseStruct(fieldTree, config as Record<string, unknown>);
}

export function toHarvesterConfigYaml(config: HarvesterConfig): string {
  // version 1.1 quotes strings a YAML 1.1 reader would take as bool/number ("yes", "0644"), as yaml.v3 does.
  return stringify(toHarvesterConfigObject(config), { version: '1.1', indent: 4, indentSeq: true, lineWidth: 0, minContentWidth: 0 });
}
