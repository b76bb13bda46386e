/**
 * Merging two normalised configs the way Harvester does (mergo.Merge(dst, src, WithAppendSlice)):
 * the higher-priority config keeps every non-zero value, zero values are filled from the lower one,
 * lists are appended (higher first), maps gain the keys they lack. So a bool cannot be forced back
 * to false by the higher source, and the kernel command line wins over the file (harvester/harvester-installer pkg/console/install_panels.go, mergo WithAppendSlice).
 * hvinstall's one addition: a disk's path and its rule (install.device_selector) are one key.
 */
import type { HarvesterConfig } from './types.js';
import type { Origins } from './findings.js';
import { ownValue, setOwn } from '../lib/own-keys.js';
import { keepOneDiskName } from './disk-selector.js';

export interface Mergeable {
  config: HarvesterConfig;
  origins: Origins;
}

function isZero(v: unknown): boolean {
  return v === undefined || v === null || v === '' || v === 0 || v === false;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Copies the origins under `from` (re-rooted at `to`) from one map into another. */
function copyOrigins(src: Origins, from: string, to: string, into: Origins): void {
  for (const [ptr, o] of src) {
    if (ptr === from || ptr.startsWith(from + '/')) into.set(to + ptr.slice(from.length), o);
  }
}

export function mergeConfigs(high: Mergeable, low: Mergeable): Mergeable {
  const origins: Origins = new Map();
  const merged = (mergeValue(high.config, low.config, '', high.origins, low.origins, origins) as HarvesterConfig | undefined) ?? {};
  keepOneDiskName(high.config, merged);
  return { config: merged, origins };
}

function mergeValue(h: unknown, l: unknown, ptr: string, ho: Origins, lo: Origins, out: Origins): unknown {
  if (Array.isArray(h) || Array.isArray(l)) {
    const hs = Array.isArray(h) ? h : [];
    const ls = Array.isArray(l) ? l : [];
    if (hs.length === 0 && ls.length === 0) {
      copyOrigins(h !== undefined ? ho : lo, ptr, ptr, out);
      return h ?? l;
    }
    const own = ho.get(ptr) ?? lo.get(ptr);
    if (own) out.set(ptr, own);
    hs.forEach((_, i) => copyOrigins(ho, `${ptr}/${i}`, `${ptr}/${i}`, out));
    ls.forEach((_, i) => copyOrigins(lo, `${ptr}/${i}`, `${ptr}/${hs.length + i}`, out));
    return [...hs, ...ls];
  }
  if (isObject(h) && isObject(l)) {
    const result: Record<string, unknown> = {};
    const own = ho.get(ptr) ?? lo.get(ptr);
    if (own) out.set(ptr, own);
    const keys = [...Object.keys(h), ...Object.keys(l).filter((k) => !Object.hasOwn(h, k))];
    for (const k of keys) {
      const childPtr = `${ptr}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      const v = mergeValue(ownValue(h, k), ownValue(l, k), childPtr, ho, lo, out);
      if (v !== undefined) setOwn(result, k, v);
    }
    return result;
  }
  if (!isZero(h) || (h !== undefined && l === undefined)) {
    copyOrigins(ho, ptr, ptr, out);
    return h;
  }
  copyOrigins(lo, ptr, ptr, out);
  return l;
}
