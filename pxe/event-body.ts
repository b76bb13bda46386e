/**
 * What hvpxe keeps of an event body posted to /events/<machine>: a bounded, redacted summary, never
 * the body itself. A body is read up to 64 KiB; its nesting is measured on the text before anything
 * parses or walks it (a body nested thousands of levels deep overflowed the stack of whatever
 * walked it, and its pretty-printed copy grew a thousandfold); what is kept is the top level's
 * scalar fields, each string cut to a fixed length after redaction. Pure.
 */
import type { Redactor } from '../lib/redact.js';
import { setOwn } from '../lib/own-keys.js';

export const EVENT_BODY = {
  /** Bytes read from a request; a larger body is refused (413). */
  maxBytes: 64 * 1024,
  /** Deeper bodies keep only their event name, when it can be seen. */
  maxDepth: 8,
  /** Top-level fields kept per event. */
  maxFields: 16,
  /** Characters kept of a field name. */
  maxKey: 64,
  /** Characters kept of a string value (and of a text body). */
  maxString: 200,
  /** Characters of an event's name. */
  maxEventName: 64,
} as const;

/** A kept field: scalars only (a nested value is described, not kept). */
export type EventScalar = string | number | boolean | null;
export type EventData = Record<string, EventScalar> | string;

export interface EventSummary {
  /** The event's name: `event` (Harvester's webhooks), else `type` (hvinstall's), else `event`. */
  event: string;
  data: EventData;
  /** Why part of the body was not kept. */
  note?: string;
}

/**
 * The deepest nesting of arrays and objects in a JSON text, counted outside strings; stops counting
 * once past `limit` (the answer is then limit + 1). Pure, linear, no recursion.
 */
export function jsonDepth(text: string, limit: number = EVENT_BODY.maxDepth): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > deepest) deepest = depth;
      if (deepest > limit) return limit + 1;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

function cut(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** A nested value as one word: what it was, not what it held. */
function describe(v: unknown): string {
  return Array.isArray(v) ? `<list of ${v.length}>` : '<object>';
}

/** The top level's fields as scalars (full length: redaction must see whole secrets before any cut). */
function flatten(obj: Record<string, unknown>): { fields: Record<string, EventScalar>; dropped: number } {
  const fields: Record<string, EventScalar> = {};
  const keys = Object.keys(obj);
  for (const k of keys.slice(0, EVENT_BODY.maxFields)) {
    const v = obj[k];
    const scalar = v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : describe(v);
    setOwn(fields, cut(k, EVENT_BODY.maxKey), scalar);
  }
  return { fields, dropped: Math.max(0, keys.length - EVENT_BODY.maxFields) };
}

function cutStrings(fields: Record<string, EventScalar>): Record<string, EventScalar> {
  const out: Record<string, EventScalar> = {};
  for (const [k, v] of Object.entries(fields)) setOwn(out, k, typeof v === 'string' ? cut(v, EVENT_BODY.maxString) : v);
  return out;
}

function nameOf(fields: Record<string, EventScalar>): string {
  const named = typeof fields.event === 'string' ? fields.event : typeof fields.type === 'string' ? fields.type : 'event';
  return cut(named, EVENT_BODY.maxEventName);
}

/** The bounded, redacted summary of one event body (at most EVENT_BODY.maxBytes of it). Pure. */
export function summariseEventBody(body: Buffer, redactor: Redactor): EventSummary {
  const text = body.toString('utf8');
  if (jsonDepth(text) > EVENT_BODY.maxDepth) {
    return { event: 'event', data: {}, note: `body nested deeper than ${EVENT_BODY.maxDepth} levels: not kept` };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { event: 'event', data: cut(redactor.redactString(text), EVENT_BODY.maxString) };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return { event: 'event', data: cut(redactor.redactString(typeof parsed === 'string' ? parsed : JSON.stringify(parsed)), EVENT_BODY.maxString) };
  }
  const { fields, dropped } = flatten(parsed as Record<string, unknown>);
  const kept = cutStrings(redactor.redact(fields));
  return { event: nameOf(kept), data: kept, ...(dropped > 0 ? { note: `${dropped} more field${dropped === 1 ? '' : 's'} not kept` } : {}) };
}

/** One line for /machines from an installer event (ours or a Harvester webhook payload). Pure. */
export function summariseEvent(e: Record<string, EventScalar>): string | undefined {
  const s = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  switch (e.type) {
    case 'install':
      return `install ${s(e.phase)}${e.device ? ` on ${s(e.device)}` : ''}${e.message ? `: ${s(e.message)}` : ''}`;
    case 'step':
      return `step ${s(e.index)}/${s(e.total)} ${s(e.step)} ${s(e.phase)}${e.message ? `: ${s(e.message)}` : ''}`;
    case 'bytes': {
      const done = Number(e.done);
      const total = Number(e.total);
      return `${s(e.step)}: ${total > 0 ? Math.floor((done * 100) / total) : 0}% of ${Math.round(total / 1048576)} MiB`;
    }
    case 'message':
      return `${s(e.level)}: ${s(e.message)}`;
    default:
      return typeof e.event === 'string' ? `webhook ${e.event}` : undefined;
  }
}
