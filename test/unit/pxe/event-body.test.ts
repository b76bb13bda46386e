/**
 * What hvpxe keeps of an event body: the nesting measured on the text before anything parses it,
 * the top-level scalars only, redaction before any cut, and bounded sizes whatever was sent.
 */
import { describe, expect, it } from 'vitest';
import { EVENT_BODY, jsonDepth, summariseEventBody } from '../../../pxe/event-body.js';
import { Redactor } from '../../../lib/redact.js';

const redactor = new Redactor().add('cluster-token-xyz123', 'p'.repeat(300));
const body = (v: unknown): Buffer => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));

describe('jsonDepth', () => {
  it('counts nesting outside strings, brackets in strings and escapes ignored', () => {
    expect(jsonDepth('1')).toBe(0);
    expect(jsonDepth('{}')).toBe(1);
    expect(jsonDepth('{"a":[1,{"b":[]}]}')).toBe(4);
    expect(jsonDepth('{"a":"[[[[[[[[[[[[[["}')).toBe(1);
    expect(jsonDepth('{"a":"\\"[[[[[[[[[[[[[["}')).toBe(1);
    expect(jsonDepth('["\\\\",[[]]]')).toBe(3);
    expect(jsonDepth('[]{}[]')).toBe(1);
  });

  it('stops once past the limit (linear, however deep the text goes)', () => {
    expect(jsonDepth('['.repeat(100_000), 8)).toBe(9);
    expect(jsonDepth('['.repeat(8) + ']'.repeat(8), 8)).toBe(8);
    expect(jsonDepth('['.repeat(9), 8)).toBe(9);
  });
});

describe('summariseEventBody', () => {
  it("keeps Harvester's webhook and hvinstall's events as their fields", () => {
    expect(summariseEventBody(body({ event: 'SUCCEEDED', hostname: 'n1', mac: '52:54:00:00:00:01' }), redactor)).toEqual({ event: 'SUCCEEDED', data: { event: 'SUCCEEDED', hostname: 'n1', mac: '52:54:00:00:00:01' } });
    expect(summariseEventBody(body({ type: 'step', step: 'deploy', index: 4, total: 9, ok: true, x: null }), redactor)).toEqual({ event: 'step', data: { type: 'step', step: 'deploy', index: 4, total: 9, ok: true, x: null } });
  });

  it('keeps nothing of a body nested deeper than the limit, without parsing it', () => {
    expect(summariseEventBody(body('['.repeat(7000) + ']'.repeat(7000)), redactor)).toEqual({ event: 'event', data: {}, note: `body nested deeper than ${EVENT_BODY.maxDepth} levels: not kept` });
    expect(summariseEventBody(body({ event: 'x', a: JSON.parse('['.repeat(8) + ']'.repeat(8)) }), redactor).note).toMatch(/nested deeper/);
  });

  it('describes nested values instead of keeping them, and keeps at most 16 fields', () => {
    const wide: Record<string, unknown> = { event: 'progress', list: [1, 2, 3], obj: { a: { b: 1 } } };
    for (let i = 0; i < 30; i++) wide[`f${i}`] = i;
    const s = summariseEventBody(body(wide), redactor);
    expect(s.data).toMatchObject({ event: 'progress', list: '<list of 3>', obj: '<object>', f0: 0 });
    expect(Object.keys(s.data as object)).toHaveLength(EVENT_BODY.maxFields);
    expect(s.note).toBe('17 more fields not kept');
  });

  it('redacts by key and by value before cutting (a long secret is never half kept)', () => {
    const s = summariseEventBody(body({ event: 'x', token: 'anything', message: `the token is cluster-token-xyz123 and ${'p'.repeat(300)}` }), redactor);
    expect(s.data).toEqual({ event: 'x', token: '<redacted>', message: 'the token is <redacted> and <redacted>' });
    const text = summariseEventBody(body(`plain text with cluster-token-xyz123 ${'p'.repeat(300)}`), redactor);
    expect(text.data).toBe('plain text with <redacted> <redacted>');
  });

  it('cuts long strings, keys and names, so what is kept stays small whatever is sent', () => {
    const s = summariseEventBody(body({ event: 'e'.repeat(500), ['k'.repeat(500)]: 'v'.repeat(5000) }), redactor);
    expect(s.event).toBe(`${'e'.repeat(EVENT_BODY.maxEventName)}…`);
    const [[k, v]] = Object.entries(s.data as object).slice(1);
    expect(k).toBe(`${'k'.repeat(EVENT_BODY.maxKey)}…`);
    expect(v).toBe(`${'v'.repeat(EVENT_BODY.maxString)}…`);
    const worst: Record<string, string> = {};
    for (let i = 0; i < 16; i++) worst[`${i}`.padEnd(100, 'k')] = 'v'.repeat(3000);
    expect(JSON.stringify(summariseEventBody(body(worst), redactor)).length).toBeLessThan(16 * (EVENT_BODY.maxKey + EVENT_BODY.maxString + 20));
  });

  it('keeps text, arrays and scalars as a cut string, and names the event by event, then type', () => {
    expect(summariseEventBody(body('started the install'), redactor)).toEqual({ event: 'event', data: 'started the install' });
    expect(summariseEventBody(body([1, 2]), redactor)).toEqual({ event: 'event', data: '[1,2]' });
    expect(summariseEventBody(body('"SUCCEEDED"'), redactor)).toEqual({ event: 'event', data: 'SUCCEEDED' });
    expect(summariseEventBody(body({ type: 'install', event: 'SUCCEEDED' }), redactor).event).toBe('SUCCEEDED');
    expect(summariseEventBody(body({ type: 5 }), redactor).event).toBe('event');
  });

  it('keeps keys named like Object.prototype members as plain fields', () => {
    const s = summariseEventBody(Buffer.from('{"__proto__":{"polluted":1},"constructor":"c","event":"x"}'), redactor);
    expect(Object.getPrototypeOf(s.data)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(s.data as object)).toEqual(['__proto__', 'constructor', 'event']);
  });
});

describe('event-body limits, exactly', () => {
  it('are these', () => {
    expect(EVENT_BODY).toEqual({ maxBytes: 64 * 1024, maxDepth: 8, maxFields: 16, maxKey: 64, maxString: 200, maxEventName: 64 });
  });

  it('keeps a string of exactly the limit whole, and 16 fields without a note', () => {
    const fields: Record<string, string> = { event: 'x'.repeat(EVENT_BODY.maxEventName), s: 's'.repeat(EVENT_BODY.maxString) };
    for (let i = 0; i < 14; i++) fields[`f${i}`] = 'v';
    const s = summariseEventBody(body(fields), redactor);
    expect(s.event).toBe('x'.repeat(EVENT_BODY.maxEventName));
    expect((s.data as Record<string, string>).s).toBe('s'.repeat(EVENT_BODY.maxString));
    expect(s.note).toBeUndefined();
    expect(summariseEventBody(body({ ...fields, one: 1 }), redactor).note).toBe('1 more field not kept');
  });

  it('keeps null and numbers as text when they are the whole body', () => {
    expect(summariseEventBody(body('null'), redactor)).toEqual({ event: 'event', data: 'null' });
    expect(summariseEventBody(body('42'), redactor)).toEqual({ event: 'event', data: '42' });
  });
});
