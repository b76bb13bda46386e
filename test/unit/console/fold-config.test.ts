/**
 * A config taken up front, checked under the kernel command line's keys: its own errors (what it
 * wrote, with their line numbers) refuse it; what it lacks is left to the pages; the command line
 * wins where both say something, as an install merges them.
 */
import { describe, expect, it } from 'vitest';
import { foldConfig } from '../../../installer/console/config-first.js';
import type { HarvesterConfig } from '../../../config/types.js';

const at = (r: Awaited<ReturnType<typeof foldConfig>>): string[] => (r.ok ? [] : r.findings.map((f) => `${f.source}:${f.line}:${f.column} ${f.path}`));

describe('a config taken up front', () => {
  it('what it lacks (a disk, a NIC, a VIP, a token) is not its error: the pages ask for it', async () => {
    const r = await foldConfig({}, { url: 'X', text: 'scheme_version: 1\nos:\n  hostname: node-a\ninstall:\n  mode: create\n  vip_mode: static\n' });
    expect(r).toMatchObject({ ok: true, base: { os: { hostname: 'node-a' }, install: { mode: 'create', vipMode: 'static' } } });
  });

  it('what it wrote wrong refuses it, each finding at its line and column; a config that is not YAML or not a mapping too', async () => {
    expect(at(await foldConfig({}, { url: 'X', text: 'scheme_version: 1\nos:\n  hostname: Node_A\ninstall:\n  vip: 1.2.3\n' }))).toEqual(['X:3:13 os.hostname', 'X:5:8 install.vip']);
    expect(at(await foldConfig({}, { url: 'X', text: 'os: [\n' }))).toHaveLength(1);
    expect(at(await foldConfig({}, { url: 'X', text: '- a\n- b\n' }))).toEqual(['X:1:1 ']);
  });

  it('the command line wins over it, and keys no page asks for are kept', async () => {
    const cmdline: HarvesterConfig = { os: { hostname: 'from-cmdline' }, install: { mode: 'join' } };
    const r = await foldConfig(cmdline, { url: 'X', text: 'os:\n  hostname: from-file\n  labels: {rack: r1}\ninstall:\n  mode: create\n' });
    expect(r).toMatchObject({ ok: true, base: { os: { hostname: 'from-cmdline', labels: { rack: 'r1' } }, install: { mode: 'join' } } });
  });
});
