/** `hvinstall render` usage and input errors: exit code, message, and nothing written. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import render, { formatTable, parseFacts } from '../../../installer/commands/render.js';
import { HvError } from '../../../lib/errors.js';
import { CASES, RELEASE_TEXT, TEMPLATES } from './cases.js';
import { goEmbedElf } from './go-embed-elf.js';

/** A source tree shaped like Harvester's image: rancherd's binary and unit, and optionally its release metadata. */
/** A Harvester-like OS tree: rancherd, its unit, harvester-installer carrying the release's templates, and a release file when given. */
function harvesterTree(root: string, release?: string): string {
  const installer = goEmbedElf({ 'templates/rancherd-22-addons.yaml': TEMPLATES.addons, 'templates/rancherd-12-monitoring-dashboard.yaml': TEMPLATES.dashboards });
  for (const [p, content] of Object.entries({ 'usr/bin/rancherd': '#!/bin/sh\n', 'usr/lib/systemd/system/rancherd.service': '[Service]\n', 'usr/bin/harvester-installer': installer, ...(release ? { 'etc/harvester-release.yaml': release } : {}) })) {
    mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    writeFileSync(path.join(root, p), content);
  }
  return root;
}

let dir: string;
let out: string[];
let err: string[];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'hv-render-cmd-'));
  out = [];
  err = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

function writeSeeds(): string {
  const f = path.join(dir, 'seeds.json');
  writeFileSync(f, JSON.stringify({ seed: 'cmd-seed' }));
  return f;
}

describe('hvinstall render', () => {
  it('exits 2 with usage when --config or --out is missing, or an option is unknown', async () => {
    expect(await render(['--out', dir])).toBe(2);
    expect(err.join('')).toMatch(/--config and --out are required/);
    expect(await render(['--config', 'x', '--out', dir, '--bogus'])).toBe(2);
    expect(err.join('')).toMatch(/usage: hvinstall render/);
  });

  it('without --source and --facts: says first, on stderr and atop the table, what it assumed and how to render the node Harvester makes', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES[0]!.config));
    expect(await render(['--config', cfg, '--out', path.join(dir, 'out'), '--seeds', writeSeeds()])).toBe(0);
    expect(err[0]).toMatch(/^warning: no --source: rendered for an OS image without rancherd \(hvagent drives RKE2, a static kube-vip pod announces the VIP/);
    expect(err[0]).toContain('pass --source with the OS image');
    expect(err[1]).toMatch(/^warning: no --facts: kubelet's reserved CPU is computed for this machine's \d+ CPUs/);
    const stdout = out.join('');
    expect(stdout.startsWith('ASSUMED: no --source: rendered for an OS image without rancherd')).toBe(true);
    expect(stdout.split('\n')[1]).toMatch(/^ASSUMED: no --facts/);
  });

  it('prints help with exit 0', async () => {
    expect(await render(['--help'])).toBe(0);
    expect(out.join('')).toMatch(/--facts FILE/);
  });

  it('a facts file that is not JSON is a usage error and nothing is written', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES[0]!.config));
    const facts = path.join(dir, 'facts.json');
    writeFileSync(facts, '{cpuCount: 8');
    const target = path.join(dir, 'out');
    const e = await render(['--config', cfg, '--out', target, '--facts', facts]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(HvError);
    expect((e as HvError).message).toMatch(/facts file .* is not JSON/);
    expect((e as HvError).exitCode).toBe(2);
    expect(existsSync(target)).toBe(false);
  });

  it.each([
    [{ nics: [] }, 'cpuCount must be a positive integer'],
    [{ cpuCount: 4, nics: [{ name: 'eno1', mac: 'nope' }] }, 'nics[0].mac must be a MAC'],
    [{ cpuCount: 4, nics: [{ name: 'eno1', mac: '52:54:00:00:00:01', permMac: 'eno1' }] }, 'nics[0].permMac must be a MAC'],
    [{ cpuCount: 4, nic: [] }, 'unknown key "nic"'],
    [{ cpuCount: 4, hasDataPartition: 'yes' }, 'hasDataPartition must be true or false'],
  ])('rejects facts %j', (facts, message) => {
    expect(() => parseFacts(facts, 'facts.json')).toThrow(message);
  });

  it('a bond member\'s permanent MAC (permMac) is read, lowercased, beside its current one', () => {
    const f = parseFacts({ cpuCount: 4, nics: [{ name: 'eno1', mac: '0C:42:A1:00:00:01', permMac: '0C:42:A1:00:00:02' }, { name: 'eno2', mac: '0c:42:a1:00:00:01' }] }, 'facts.json');
    expect(f.nics).toEqual([{ name: 'eno1', mac: '0c:42:a1:00:00:01', permMac: '0c:42:a1:00:00:02' }, { name: 'eno2', mac: '0c:42:a1:00:00:01' }]);
  });

  it('an invalid config (bad mask) exits 1 with the finding and writes nothing', async () => {
    const c = structuredClone(CASES.find((k) => k.name === 'create-static')!.config);
    c.install!.managementInterface!.subnetMask = '255.0.255.0';
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(c));
    const target = path.join(dir, 'out');
    const e = await render(['--config', cfg, '--out', target]).catch((x: unknown) => x);
    expect(e).toBe(1);
    expect(err.join('')).toMatch(/subnetMask: .*255\.0\.255\.0/);
    expect(err.join('')).toMatch(/nothing was written/);
    expect(existsSync(target)).toBe(false);
  });

  it('a render error (NIC not on this machine) surfaces as HvError and writes nothing', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES[0]!.config));
    const facts = path.join(dir, 'facts.json');
    writeFileSync(facts, JSON.stringify({ cpuCount: 4, nics: [{ name: 'eth9', mac: '52:54:00:00:00:09' }] }));
    const target = path.join(dir, 'out');
    const e = await render(['--config', cfg, '--out', target, '--facts', facts]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(HvError);
    expect((e as HvError).message).toBe('no interface matching name eno1 found');
    expect((e as HvError).hint).toBe('this machine has: eth9');
    expect(existsSync(target)).toBe(false);
  });

  it('an --out that is a file is a usage error and the file is left alone', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES[0]!.config));
    const target = path.join(dir, 'afile');
    writeFileSync(target, 'keep');
    const e = await render(['--config', cfg, '--out', target]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(HvError);
    expect((e as HvError).message).toBe(`--out ${target} exists and is not a directory`);
    expect((e as HvError).exitCode).toBe(2);
    expect(readFileSync(target, 'utf8')).toBe('keep');
  });

  it('--source with rancherd: the boot-written rancherd files are shown (BY boot) and written 0600, with the versions and where they came from', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES.find((k) => k.name === 'rancherd-create')!.config));
    const src = harvesterTree(path.join(dir, 'src'), RELEASE_TEXT);
    const target = path.join(dir, 'out');
    expect(await render(['--config', cfg, '--out', target, '--source', src, '--seeds', writeSeeds()])).toBe(0);
    const table = out.join('');
    expect(table).toMatch(/^MODE\s+OWNER\s+SIZE\s+SECRET\s+BY\s+PATH$/m);
    for (const p of ['/etc/rancher/rancherd/config.yaml', '/etc/rancher/rancherd/config.yaml.d/10-harvester.yaml', '/etc/rancher/rancherd/config.yaml.d/60-hvinstall-admin-password.yaml']) {
      expect(table).toMatch(new RegExp(`^0600\\s+root:root\\s+\\d+\\s+(yes|no)\\s+boot\\s+${p.replace(/\./g, '\\.')}$`, 'm'));
      expect(statSync(path.join(target, p)).mode & 0o777).toBe(0o600);
    }
    expect(table).toMatch(/^0600\s+root:root\s+\d+\s+yes\s+install\s+\/oem\/90_custom\.yaml$/m);
    expect(table).toContain(`bootstrap: the image carries rancherd (/usr/bin/rancherd, /usr/lib/systemd/system/rancherd.service)`);
    expect(table).toContain(`kubernetes v1.35.6+rke2r1 (${path.join(src, 'etc/harvester-release.yaml')} kubernetes)`);
    expect(existsSync(path.join(target, 'var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml'))).toBe(false);
  });

  it('--source with rancherd but no release and no versions in the config: refused, nothing written', async () => {
    const cfg = path.join(dir, 'c.json');
    writeFileSync(cfg, JSON.stringify(CASES[0]!.config));
    const target = path.join(dir, 'out');
    const e = await render(['--config', cfg, '--out', target, '--source', harvesterTree(path.join(dir, 'src'))]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(HvError);
    expect((e as HvError).message).toMatch(/^the OS image carries rancherd, but no version is known for kubernetes/);
    expect((e as HvError).exitCode).toBe(1);
    expect(existsSync(target)).toBe(false);
  });

  it('--release without --source is a usage error', async () => {
    const e = await render(['--config', 'c', '--out', path.join(dir, 'out'), '--release', 'r.yaml']).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(HvError);
    expect((e as HvError).message).toMatch(/--release needs --source/);
    expect((e as HvError).exitCode).toBe(2);
  });

  it('formats the table with aligned columns', () => {
    expect(
      formatTable([
        { path: '/etc/rancher/rancherd/config.yaml', mode: '0600', owner: 'root:root', secret: true, size: 412, sha256: '', by: 'boot' },
        { path: '/oem/a', mode: '0644', owner: 'root:root', secret: false, size: 12, sha256: '', by: 'install' },
      ]),
    ).toBe(
      'MODE  OWNER      SIZE  SECRET  BY       PATH\n0600  root:root  412   yes     boot     /etc/rancher/rancherd/config.yaml\n0644  root:root  12    no      install  /oem/a',
    );
  });
});
