/** readGoEmbedded and templatesInBinary on a stand-in binary in Go's layout (go-embed-elf.ts). */
import { describe, expect, it } from 'vitest';
import { readGoEmbedded } from '../../../installer/render/go-embed.js';
import { templatesInBinary } from '../../../installer/render/harvester-templates.js';
import { goEmbedElf } from './go-embed-elf.js';

describe('readGoEmbedded', () => {
  const elf = goEmbedElf({ 'templates/a.yaml': 'first: 1\n', 'templates/b.yaml': Buffer.from([0, 1, 2, 255]), 'templates/empty': '' });

  it('finds each file by its //go:embed path, past a decoy copy of the name', () => {
    expect(readGoEmbedded(elf, 'templates/a.yaml')?.toString()).toBe('first: 1\n');
    expect([...readGoEmbedded(elf, 'templates/b.yaml')!]).toEqual([0, 1, 2, 255]);
  });

  it('a name that is not embedded, or only part of one, is not found', () => {
    expect(readGoEmbedded(elf, 'templates/c.yaml')).toBeUndefined();
    expect(readGoEmbedded(elf, 'a.yaml')).toBeUndefined();
  });

  it('not a 64-bit little-endian ELF: nothing', () => {
    expect(readGoEmbedded(Buffer.from('#!/bin/sh\necho templates/a.yaml\n'), 'templates/a.yaml')).toBeUndefined();
    const be = Buffer.from(elf);
    be[5] = 2;
    expect(readGoEmbedded(be, 'templates/a.yaml')).toBeUndefined();
    const elf32 = Buffer.from(elf);
    elf32[4] = 1;
    expect(readGoEmbedded(elf32, 'templates/a.yaml')).toBeUndefined();
  });

  it('a table entry whose data lies outside the loaded segment is not trusted', () => {
    const broken = Buffer.from(elf);
    const name = Buffer.from('templates/a.yaml');
    const at = broken.lastIndexOf(name);
    const entry = (() => {
      const w = Buffer.alloc(8);
      w.writeBigUInt64LE(BigInt(0x400000 + at));
      return broken.indexOf(w);
    })();
    broken.writeBigUInt64LE(0x10n, entry + 16);
    expect(readGoEmbedded(broken, 'templates/a.yaml')).toBeUndefined();
  });
});

describe('templatesInBinary', () => {
  it('both templates, or nothing when either is missing', () => {
    const both = goEmbedElf({ 'templates/rancherd-22-addons.yaml': 'resources: []\n', 'templates/rancherd-12-monitoring-dashboard.yaml': 'resources: []\n' });
    expect(templatesInBinary(both, '/x')).toEqual({ addons: 'resources: []\n', dashboards: 'resources: []\n', source: '/x' });
    expect(templatesInBinary(goEmbedElf({ 'templates/rancherd-22-addons.yaml': 'resources: []\n' }), '/x')).toBeUndefined();
  });
});
