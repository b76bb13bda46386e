/**
 * The rendered files checked by the real tools that read them: NetworkManager (`nmcli --offline`
 * reads a keyfile and prints it normalised, failing on invalid content), GRUB (`grub-editenv`), and
 * the built `hvinstall render` command end to end: modes on disk, byte-identical re-runs, stale files
 * removed, the output usable as hvagent's --root, and no secret in any wider-than-0600 file or log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, existsSync, lstatSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { renderNode } from '../../../installer/render/index.js';
import { CASES, PASSWORD } from '../../unit/render/cases.js';
import { fuzzSeed } from '../../fuzz-seed.js';

const REPO = path.resolve(new URL('../../../', import.meta.url).pathname);
const CLI = path.join(REPO, 'dist/installer/cli.js');
const text = (c: string | Uint8Array) => (typeof c === 'string' ? c : Buffer.from(c).toString('utf8'));

/** NM settings that NetworkManager leaves out of its output because they equal its defaults. */
const NM_DEFAULTS_OMITTED = new Set(['bridge.vlan-default-pvid=1']);

function parseKeyfile(s: string): Map<string, string> {
  const out = new Map<string, string>();
  let section = '';
  for (const line of s.split('\n')) {
    const h = /^\[(.+)\]$/.exec(line);
    if (h) section = h[1]!;
    else if (line.includes('=')) {
      const i = line.indexOf('=');
      out.set(`${section}.${line.slice(0, i)}`, line.slice(i + 1));
    }
  }
  return out;
}

function nmcliNormalise(keyfile: string): { ok: boolean; out: string; err: string } {
  const r = spawnSync('nmcli', ['--offline', 'connection', 'modify'], { input: keyfile, encoding: 'utf8', timeout: 60_000 });
  return { ok: r.status === 0, out: r.stdout, err: r.stderr };
}

describe('NetworkManager keyfiles round-trip through nmcli --offline unchanged', () => {
  const profiles = CASES.flatMap((c) => renderNode(c.config, c.facts, c.seeds).files.filter((f) => f.path.endsWith('.nmconnection')).map((f) => ({ name: `${c.name}: ${path.basename(f.path)}`, content: text(f.content) })));

  it.each(profiles)('$name', ({ content }) => {
    const first = nmcliNormalise(content);
    expect(first.err).toBe('');
    expect(first.ok).toBe(true);
    expect(settingDifferences(content, first.out)).toEqual([]);
    // And its normalised form is a fixed point.
    expect(nmcliNormalise(first.out).out).toBe(first.out);
  });

  it('the comparison catches a value NetworkManager does not accept (nmcli drops it silently)', () => {
    const bond = profiles.find((p) => p.name.endsWith('bond-mgmt.nmconnection'))!.content;
    const broken = bond.replace(/^mode=.*$/m, 'mode=not-a-mode');
    const r = nmcliNormalise(broken);
    expect(settingDifferences(broken, r.out)).toContain('bond.mode: wrote not-a-mode, NetworkManager has balance-rr');
  });
});

/** Settings we wrote that NetworkManager changed or dropped, and settings it added (empty sections like [proxy] are fine). */
function settingDifferences(ours: string, normalised: string): string[] {
  const mine = parseKeyfile(ours);
  const theirs = parseKeyfile(normalised);
  const diffs: string[] = [];
  for (const [k, v] of mine) {
    if (NM_DEFAULTS_OMITTED.has(`${k}=${v}`) && !theirs.has(k)) continue;
    if (theirs.get(k) !== v) diffs.push(`${k}: wrote ${v}, NetworkManager has ${theirs.get(k) ?? '(nothing)'}`);
  }
  for (const [k, v] of theirs) if (!mine.has(k)) diffs.push(`${k}: added by NetworkManager as ${v}`);
  return diffs;
}

describe('NetworkManager keyfiles for generated management networks', () => {
  it('every generated bond/VLAN/MTU/static combination round-trips through nmcli unchanged', async () => {
    const fc = (await import('fast-check')).default;
    const base = CASES.find((c) => c.name === 'create-dhcp')!;
    const nicArb = fc.subarray(base.facts.nics, { minLength: 1, maxLength: 3 }).chain((nics) =>
      fc.tuple(...nics.map((n) => fc.constantFrom({ name: n.name }, { hwAddr: n.mac }, { name: n.name, hwAddr: n.mac.toUpperCase() }))),
    );
    const bondArb = fc.oneof(
      fc.constant(undefined),
      fc.record({ mode: fc.constant('802.3ad'), miimon: fc.constantFrom('100', '200'), lacp_rate: fc.constantFrom('fast', 'slow'), xmit_hash_policy: fc.constantFrom('layer2', 'layer2+3', 'layer3+4') }),
      fc.record({ mode: fc.constantFrom('active-backup', 'balance-tlb', 'balance-alb', 'balance-rr', 'broadcast'), miimon: fc.constantFrom('100', '50') }),
      fc.record({ mode: fc.constant('balance-xor'), miimon: fc.constant('100'), xmit_hash_policy: fc.constantFrom('layer2', 'layer3+4') }),
    );
    const octet = fc.integer({ min: 1, max: 254 });
    const staticArb = fc.record({ a: octet, b: octet, c: octet, prefix: fc.integer({ min: 8, max: 30 }) });
    const dnsArb = fc.array(fc.tuple(octet, octet).map(([x, y]) => `10.${x}.${y}.53`), { maxLength: 3 });
    fc.assert(
      fc.property(nicArb, bondArb, fc.option(staticArb, { nil: undefined }), fc.constantFrom(0, 576, 1500, 9000), fc.integer({ min: 0, max: 4094 }), dnsArb, (interfaces, bondOptions, st, mtu, vlanId, dns) => {
        const c = structuredClone(base.config);
        c.os!.dnsNameservers = dns;
        const mask = st ? [24, 16, 8, 0].map((sh) => ((0xffffffff << (32 - st.prefix)) >>> sh) & 255).join('.') : undefined;
        c.install!.managementInterface = {
          interfaces,
          method: st ? 'static' : 'dhcp',
          ...(st ? { ip: `10.${st.a}.${st.b}.${st.c}`, subnetMask: mask, gateway: `10.${st.a}.${st.b}.1` } : {}),
          ...(bondOptions ? { bondOptions } : {}),
          mtu,
          vlanId,
        };
        for (const f of renderNode(c, base.facts, base.seeds).files.filter((x) => x.path.endsWith('.nmconnection'))) {
          const content = text(f.content);
          const r = nmcliNormalise(content);
          if (!r.ok) throw new Error(`${f.path}: nmcli failed: ${r.err}`);
          const diffs = settingDifferences(content, r.out);
          if (diffs.length) throw new Error(`${f.path}: ${diffs.join('; ')}\n${content}`);
        }
      }),
      { numRuns: 25, seed: fuzzSeed('generated management networks round-trip through nmcli') },
    );
  });
});

// hvagent drives RKE2 only on cluster nodes whose image has no rancherd; there its guard reads these drop-ins.
describe("the agent's RKE2 guard accepts the rendered drop-ins", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'hv-render-rke2-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(CASES.filter((c) => c.config.install?.mode !== 'install' && c.facts.image?.bootstrapper !== 'rancherd'))('$name', async (c) => {
    const { writeRenderedTree } = await import('../../../installer/commands/render.js');
    const { readMergedDropIns, checkDropIns } = await import('../../../agent/rke2/dropins.js');
    const { desiredRole } = await import('../../../agent/rke2/role.js');
    const root = path.join(dir, c.name);
    await writeRenderedTree(root, renderNode(c.config, c.facts, c.seeds).files);
    const { merged, errors, files } = await readMergedDropIns(path.join(root, 'etc/rancher/rke2/config.yaml.d'));
    expect(errors).toEqual([]);
    expect(files.length).toBeGreaterThanOrEqual(6);
    const joining = c.config.install?.mode === 'join';
    const check = checkDropIns(desiredRole(c.config, false)!, merged, c.config, joining);
    expect(check).toEqual({ missing: [], toWrite: {} });
    expect(merged.token).toBe(c.config.token);
    // kubelet-arg+ from the reserved-resources drop-in lands after the agent drop-in's args.
    expect((merged['kubelet-arg'] as string[]).slice(0, 1)).toEqual(['max-pods=200']);
    expect((merged['kubelet-arg'] as string[]).some((a) => a.startsWith('system-reserved=cpu='))).toBe(true);
  });
});

describe('grubenv is a GRUB environment block', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'hv-render-grubenv-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(CASES)('$name: grub-editenv lists third_party_kernel_args', (c) => {
    const f = renderNode(c.config, c.facts, c.seeds).files.find((x) => x.path === '/oem/grubenv')!;
    const file = path.join(dir, `${c.name}.grubenv`);
    writeFileSync(file, f.content);
    const listed = execFileSync('grub-editenv', [file, 'list'], { encoding: 'utf8' });
    const multipathOn = c.config.os?.externalStorageConfig?.enabled === true;
    // Create and join nodes pin each management NIC's name by its MAC (docs/render.md).
    const nics = c.config.install?.mode === 'install' ? [] : (c.config.install?.managementInterface?.interfaces ?? []).map((i) => c.facts.nics.find((n) => n.name === i.name || n.mac === i.hwAddr?.toLowerCase())!);
    const pins = nics.map((n) => `ifname=${n.name}:${n.mac}`).join(' ');
    const want = [multipathOn ? '' : 'multipath=off', c.config.os?.additionalKernelArguments ?? '', pins].filter(Boolean).join(' ');
    expect(listed).toBe(want ? `third_party_kernel_args=${want}\n` : '');
    // grub-editenv writing the same variable produces the same bytes we rendered.
    const mine = path.join(dir, `${c.name}.editenv`);
    execFileSync('grub-editenv', [mine, 'create']);
    if (want) execFileSync('grub-editenv', [mine, 'set', `third_party_kernel_args=${want}`]);
    expect(readFileSync(mine).equals(Buffer.from(f.content))).toBe(true);
  });
});

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = path.join(dir, n);
    return lstatSync(p).isDirectory() ? walk(p) : [p];
  });
}

describe('hvinstall render (built CLI)', () => {
  let work: string;
  beforeAll(() => {
    // make test builds first; a lone run of this file builds dist/ itself.
    // tsc emits even when someone else's file has a type error, so only the result is checked.
    if (!existsSync(CLI) || !existsSync(path.join(REPO, 'dist/agent/cli.js'))) spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: REPO, stdio: 'ignore' });
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run make build`);
    work = mkdtempSync(path.join(os.tmpdir(), 'hv-render-cli-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  function hvinstall(...args: string[]) {
    const r = spawnSync(process.execPath, [CLI, 'render', ...args], { encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  const registries = CASES.find((c) => c.name === 'create-registries-auth')!;

  it('writes the tree with modes, prints a table, re-renders byte-identically, and leaks no secret', () => {
    const cfg = path.join(work, 'config.json');
    const facts = path.join(work, 'facts.json');
    writeFileSync(cfg, JSON.stringify(registries.config));
    writeFileSync(facts, JSON.stringify(registries.facts));
    const out = path.join(work, 'root');
    const first = hvinstall('--config', cfg, '--out', out, '--facts', facts);
    // Without --source the render says, first, which kind of node it previewed (no rancherd).
    expect(first.stderr).toMatch(/^warning: no --source: rendered for an OS image without rancherd .*pass --source with the OS image .*\n$/);
    expect(first.stderr.split('\n')).toHaveLength(2);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^ASSUMED: no --source: rendered for an OS image without rancherd .*\n\nMODE\s+OWNER\s+SIZE\s+SECRET\s+BY\s+PATH$/m);
    expect(first.stdout).toMatch(/^0600\s+root:root\s+\d+\s+yes\s+install\s+\/etc\/rancher\/rke2\/registries\.yaml$/m);

    const files = walk(out);
    const snapshot = new Map(files.map((f) => [f, { bytes: readFileSync(f), mode: statSync(f).mode & 0o777 }]));
    expect(snapshot.get(path.join(out, 'etc/rancher/rke2/config.yaml.d/10-hvinstall-token.yaml'))!.mode).toBe(0o600);
    expect(snapshot.get(path.join(out, 'var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml'))!.mode).toBe(0o644);
    for (const f of files.filter((x) => x.endsWith('.nmconnection'))) expect(snapshot.get(f)!.mode).toBe(0o600);

    const second = hvinstall('--config', cfg, '--out', out, '--facts', facts);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    const again = walk(out);
    expect(again.sort()).toEqual([...snapshot.keys()].sort());
    for (const f of again) {
      expect(readFileSync(f).equals(snapshot.get(f)!.bytes), f).toBe(true);
      expect(statSync(f).mode & 0o777).toBe(snapshot.get(f)!.mode);
    }

    // The clear-text password is nowhere; every other secret only in 0600 files; none in any log line.
    for (const f of again) expect(readFileSync(f).includes(PASSWORD), f).toBe(false);
    for (const secret of registries.secrets) {
      expect(first.stdout + first.stderr + second.stdout + second.stderr).not.toContain(secret);
      for (const f of again) {
        if (readFileSync(f).includes(secret)) expect({ f, mode: (statSync(f).mode & 0o777).toString(8) }).toEqual({ f, mode: '600' });
      }
    }
  });

  it('a rendered tree is a valid hvagent --root: the agent loads its config and renders the same registries.yaml', async () => {
    const out = path.join(work, 'root');
    const { loadNodeConfig } = await import('../../../agent/node-config.js');
    const loaded = await loadNodeConfig((p: string) => path.join(out, p), ['/oem/harvester.config']);
    expect(loaded.problems).toEqual([]);
    expect(loaded.config?.token).toBe(registries.config.token);
    // Without harvester.config the agent falls back to the canonical JSON copy.
    const copy = path.join(work, 'root-canonical-only');
    execFileSync('cp', ['-a', out, copy]);
    rmSync(path.join(copy, 'oem/harvester.config'));
    const fallback = await loadNodeConfig((p: string) => path.join(copy, p), ['/oem/harvester.config', '/oem/hvinstall/config.json']);
    expect(fallback.source).toBe('/oem/hvinstall/config.json');
    expect(fallback.problems).toEqual([]);
    expect(fallback.config?.systemSettings).toEqual(loaded.config?.systemSettings);
    const { renderRegistriesYaml } = await import('../../../installer/render/index.js');
    expect(renderRegistriesYaml(loaded.config!.systemSettings!['containerd-registry']!)).toBe(readFileSync(path.join(out, 'etc/rancher/rke2/registries.yaml'), 'utf8'));
  });

  it('the built hvagent, run once on the rendered tree, keeps registries.yaml byte for byte and logs no secret', () => {
    const out = path.join(work, 'root');
    const file = path.join(out, 'etc/rancher/rke2/registries.yaml');
    const before = readFileSync(file);
    const agentCli = path.join(REPO, 'dist/agent/cli.js');
    const r = spawnSync(process.execPath, [agentCli, 'once', '--guard', 'registries', '--root', out], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr + r.stdout).toMatch(/guard succeeded/);
    expect(r.status).toBe(0);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    for (const secret of registries.secrets) expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('removes files an earlier render wrote that the new config no longer needs', () => {
    const out = path.join(work, 'shrink');
    const vlan = CASES.find((c) => c.name === 'create-vlan-bond-mtu')!;
    const cfg = path.join(work, 'vlan.json');
    const facts = path.join(work, 'vlan-facts.json');
    writeFileSync(cfg, JSON.stringify(vlan.config));
    writeFileSync(facts, JSON.stringify(vlan.facts));
    expect(hvinstall('--config', cfg, '--out', out, '--facts', facts).code).toBe(0);
    expect(existsSync(path.join(out, 'etc/NetworkManager/system-connections/vlan-mgmt.nmconnection'))).toBe(true);
    const plain = structuredClone(vlan.config);
    plain.install!.managementInterface!.vlanId = 0;
    writeFileSync(cfg, JSON.stringify(plain));
    expect(hvinstall('--config', cfg, '--out', out, '--facts', facts).code).toBe(0);
    expect(existsSync(path.join(out, 'etc/NetworkManager/system-connections/vlan-mgmt.nmconnection'))).toBe(false);
  });

  it('an invalid config writes nothing and exits 1 with the finding', () => {
    const cfg = path.join(work, 'bad.json');
    writeFileSync(cfg, JSON.stringify({ ...registries.config, install: { ...registries.config.install, mode: 'sideways' } }));
    const out = path.join(work, 'bad-out');
    const r = hvinstall('--config', cfg, '--out', out);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/mode/);
    expect(r.stderr).toMatch(/nothing was written/);
    expect(existsSync(out)).toBe(false);
    for (const s of registries.secrets) expect(r.stdout + r.stderr).not.toContain(s);
  });
});
