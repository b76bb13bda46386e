/**
 * The key spellings Harvester accepts (its FuzzyNames mapper, harvester/harvester-installer pkg/config/rename.go): for a field whose
 * json tag is `serverUrl`: `serverUrl`, `server_url`, `serverurl`, and for names ending in s/es the
 * singular forms (`sysctl` for `sysctls`, `dns_nameserver` for `dnsNameservers`). Also the key
 * yaml.v3 writes to /oem/harvester.config for a field, its Go field name lowercased (go-yaml/yaml
 * yaml.go getStructInfo ignores json tags), where that differs from the json tag: `externalstorage`
 * (ExternalStorage, json externalStorageConfig), `rawfilepermissions`, `kubeovnoperatorchartversion`.
 */
import type { FieldNode } from './generated/harvester-config.fields.js';

/** Go's convert.ToYAMLKey: an underscore before an upper-case letter that follows a lower-case one. */
export function toSnakeCase(name: string): string {
  let out = '';
  let prevUpper = true;
  for (const ch of name) {
    const upper = ch >= 'A' && ch <= 'Z';
    if (upper && !prevUpper) out += '_';
    out += ch.toLowerCase();
    prevUpper = upper;
  }
  return out;
}

function addSpellings(into: Map<string, string>, name: string, canonical: string): void {
  for (const s of [name, name.toLowerCase(), toSnakeCase(name), toSnakeCase(name).toLowerCase()]) {
    if (!into.has(s) || s === canonical) into.set(s, canonical);
  }
}

const cache = new WeakMap<FieldNode, Map<string, string>>();

/** Every accepted spelling of every field of a struct node -> the canonical (json tag) name. */
export function spellingsOf(node: FieldNode): Map<string, string> {
  let map = cache.get(node);
  if (map) return map;
  map = new Map();
  const fields = Object.keys(node.f ?? {});
  // Exact names first so a singular spelling never shadows a real field.
  for (const name of fields) addSpellings(map, name, name);
  for (const name of fields) {
    if (name.length > 2 && name.endsWith('es')) addSpellings(map, name.slice(0, -2), name);
    if (name.length > 1 && name.endsWith('s')) addSpellings(map, name.slice(0, -1), name);
  }
  for (const name of fields) map.set(name, name);
  // After the json-tag spellings: a yaml.v3 key never shadows another field's spelling.
  for (const [name, key] of Object.entries(node.g ?? {})) if (!map.has(key)) map.set(key, name);
  cache.set(node, map);
  return map;
}

/** Edit distance with adjacent transpositions counted as one edit (optimal string alignment). */
export function editDistance(a: string, b: string, max = 8): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    let rowMin = i; // d[i][0]: the row's minimum counts its first column too (b may be empty)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > max) return max + 1;
  }
  return d[a.length][b.length];
}

/** The closest candidate to a misspelt word, compared without case, `_` or `-`; undefined if none is close. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[_-]/g, '');
  const w = norm(word);
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = editDistance(w, norm(c), 4);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  const limit = Math.max(1, Math.min(3, Math.floor(w.length / 3)));
  return bestD <= limit ? best : undefined;
}
