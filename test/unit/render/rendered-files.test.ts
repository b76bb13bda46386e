/**
 * Every rendered file, checked without root: by a real tool where one runs here (openssl's SHA-512
 * crypt for the password hash), else against the format's schema (this project's schemas of yip,
 * RKE2's config and registries.yaml; kubernetes-models' Pod for kube-vip: see format-schemas.ts), and
 * harvester.config through this project's own loader (a round trip, not Harvester's reader). The
 * real consumers that run only as root are in the integration tests: nmcli reads the keyfiles,
 * containerd the hosts.toml RKE2 writes from registries.yaml. Secrets only in 0600 files.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import { renderNode } from '../../../installer/render/index.js';
import { validateConfig } from '../../../config/index.js';
import { ADMIN_PASSWORD, CASES, PASSWORD } from './cases.js';
import { assertKubernetesPod, assertSchema, parseYamlStrict, ourRegistriesSchema, ourRke2ConfigSchema, ourYipSchema } from './format-schemas.js';

const text = (c: string | Uint8Array) => (typeof c === 'string' ? c : Buffer.from(c).toString('utf8'));

describe.each(CASES)('rendered files of $name', (c) => {
  const report = renderNode(c.config, c.facts, c.seeds);
  const byPath = new Map(report.files.map((f) => [f.path, f]));

  it("90_custom.yaml matches this project's yip schema (schemas/yip.schema.json; yip does not run here)", () => {
    assertSchema(ourYipSchema, parseYamlStrict(text(byPath.get('/oem/90_custom.yaml')!.content)), '90_custom.yaml');
  });

  it('write_files decode the way yip decodes them (base64, gzip, gzip+base64) to the intended content', () => {
    const yip = parseYamlStrict(text(byPath.get('/oem/90_custom.yaml')!.content)) as { stages: { initramfs: Array<{ files: Array<{ path: string; content: string; encoding?: string }> }> } };
    const files = yip.stages.initramfs[0]!.files;
    for (const w of c.config.os?.writeFiles ?? []) {
      const f = files.find((x) => x.path === w.path)!;
      const enc = f.encoding ?? '';
      const raw = enc === '' ? Buffer.from(f.content) : enc.startsWith('gz') && enc.includes('b') ? gunzipSync(Buffer.from(f.content, 'base64')) : Buffer.from(f.content, 'base64');
      const decodedOriginal = !w.encoding ? Buffer.from(w.content ?? '') : w.encoding.startsWith('gz') ? gunzipSync(Buffer.from(w.content!, 'base64')) : Buffer.from(w.content!, 'base64');
      expect(raw.equals(decodedOriginal), w.path).toBe(true);
    }
    if (c.name === 'create-static') {
      expect(files.find((f) => f.path === '/etc/gz.txt')).toMatchObject({ encoding: 'gz+b64' });
      expect(gunzipSync(Buffer.from(files.find((f) => f.path === '/etc/gz.txt')!.content, 'base64')).toString()).toBe('hello world');
    }
  });

  it("every RKE2 drop-in parses and matches this project's RKE2 config schema; the audit policy is an audit Policy", () => {
    const dropIns = report.files.filter((f) => f.path.startsWith('/etc/rancher/rke2/config.yaml.d/'));
    // Install-only nodes get none; with rancherd the token, server and cluster-init drop-ins are rancherd's.
    expect(dropIns.length).toBeGreaterThanOrEqual(c.config.install?.mode === 'install' ? 0 : c.facts.image?.bootstrapper === 'rancherd' ? 4 : 6);
    if (c.config.install?.mode === 'install') expect(dropIns).toEqual([]);
    for (const f of dropIns) {
      const doc = parseYamlStrict(text(f.content)) as Record<string, unknown>;
      if (f.path.endsWith('92-harvester-kube-audit-policy.yaml')) {
        expect(doc).toMatchObject({ apiVersion: 'audit.k8s.io/v1', kind: 'Policy' });
        expect(Array.isArray(doc.rules) && doc.rules.length > 0).toBe(true);
        continue;
      }
      assertSchema(ourRke2ConfigSchema, doc, f.path);
    }
  });

  it("registries.yaml (when rendered) matches this project's registries schema (containerd reads what RKE2 makes of it in the integration tests)", () => {
    const f = byPath.get('/etc/rancher/rke2/registries.yaml');
    if (!c.config.systemSettings?.['containerd-registry']) {
      expect(f).toBeUndefined();
      return;
    }
    assertSchema(ourRegistriesSchema, parseYamlStrict(text(f!.content)), 'registries.yaml');
  });

  it("the kube-vip manifest (create nodes without rancherd) validates as a core/v1 Pod (kubernetes-models, from Kubernetes' OpenAPI)", async () => {
    const f = byPath.get('/var/lib/rancher/rke2/agent/pod-manifests/kube-vip.yaml');
    if (c.config.install?.mode !== 'create' || c.facts.image?.bootstrapper === 'rancherd') {
      expect(f).toBeUndefined();
      return;
    }
    await assertKubernetesPod(parseYamlStrict(text(f!.content)));
  });

  it("the rancher password hash verifies with openssl's SHA-512 crypt", () => {
    const yip = parseYamlStrict(text(byPath.get('/oem/90_custom.yaml')!.content)) as { stages: { initramfs: Array<{ users?: { rancher: { passwd: string } } }> } };
    const hash = yip.stages.initramfs[0]!.users!.rancher.passwd;
    if (c.config.os?.password?.startsWith('$')) {
      expect(hash).toBe(c.config.os.password);
      return;
    }
    const salt = hash.split('$')[2]!;
    const openssl = execFileSync('openssl', ['passwd', '-6', '-salt', salt, '-stdin'], { input: PASSWORD + '\n' }).toString().trim();
    expect(hash).toBe(openssl);
  });

  it('harvester.config loads back through config (our loader: a round trip) to the same node', async () => {
    const parsed = parseYamlStrict(text(byPath.get('/oem/harvester.config')!.content));
    const back = await validateConfig(parsed, { source: '/oem/harvester.config', alreadyInstalled: true });
    expect(back.errors).toEqual([]);
    expect(back.config.token).toBe(c.config.token);
    expect(back.config.install?.mode).toBe(c.config.install?.mode);
    expect(back.config.install?.managementInterface?.interfaces).toEqual(c.config.install?.managementInterface?.interfaces);
    // The node's hostname (given, DHCP or generated) is saved, as Harvester saves it.
    expect(back.config.os?.hostname).toBe(report.hostname.name);
    // Rendering what the agent will read back gives the same node files.
    const again = renderNode(back.config, c.facts, c.seeds).files.filter((f) => !f.path.startsWith('/oem/hvinstall/') && f.path !== '/oem/harvester.config');
    const first = report.files.filter((f) => !f.path.startsWith('/oem/hvinstall/') && f.path !== '/oem/harvester.config');
    expect(again.map((f) => [f.path, text(f.content)])).toEqual(first.map((f) => [f.path, text(f.content)]));
  });

  it('the clear-text passwords (rancher, UI admin) are in no file at all: the persisted configs carry their hashes', () => {
    for (const f of [...report.files, ...report.yipFiles]) {
      expect(text(f.content).includes(PASSWORD), f.path).toBe(false);
      expect(text(f.content).includes(ADMIN_PASSWORD), f.path).toBe(false);
    }
  });

  it('each secret appears only in 0600 files marked secret, on disk and among the files yip writes at boot', () => {
    for (const secret of c.secrets) {
      const holders = [...report.files, ...report.yipFiles].filter((f) => text(f.content).includes(secret));
      for (const f of holders) {
        expect({ path: f.path, mode: f.mode.toString(8), secret: f.secret }).toEqual({ path: f.path, mode: '600', secret: true });
      }
    }
  });
});

describe("this project's yip schema", () => {
  it("rejects keys yip would silently ignore, such as owner_string (yip's key is ownerstring)", () => {
    const doc = { name: 'x', stages: { initramfs: [{ files: [{ path: '/etc/x', content: 'x', permissions: 420, owner_string: 'root:root' }] }] } };
    expect(() => assertSchema(ourYipSchema, doc, 'doc')).toThrow(/must NOT have additional properties/);
    doc.stages.initramfs[0]!.files[0] = { path: '/etc/x', content: 'x', permissions: 420, ownerstring: 'root:root' } as never;
    expect(() => assertSchema(ourYipSchema, doc, 'doc')).not.toThrow();
  });

  it('rejects an unknown stage name', () => {
    expect(() => assertSchema(ourYipSchema, { stages: { initramfz: [] } }, 'doc')).toThrow(/stages must match pattern/);
  });
});
