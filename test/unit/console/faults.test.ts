/**
 * Machines that cannot take an install as they are, and remote inputs that fail: no disk, no usable
 * disk, no NIC with a link (each said on screen, F5 rescans once it is fixed), a remote config that
 * is unreachable or invalid (its findings shown, nothing merged) or valid (merged under the
 * answers), and SSH keys fetched from a URL.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CLI, KEYS, type Session } from './session.js';
import { FIXTURES, TITLES, fill, httpServer, startDryRun, tempDir, toPage, walkCreate } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());

/** A fixture machine's facts as `hvinstall preflight --json` writes them, changed by `edit`. */
function factsFile(sysroot: string, edit: (f: Record<string, any>) => void): string {
  const out = execFileSync(process.execPath, [CLI, 'preflight', '--sysroot', path.join(FIXTURES, sysroot), '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const facts = JSON.parse(out);
  edit(facts);
  const file = path.join(tempDir(), 'facts.json');
  writeFileSync(file, JSON.stringify(facts));
  return file;
}


describe('hvinstall console: faults', () => {
  it('no disk: says so and cannot go on; F5 after a disk appears lists it', async () => {
    const original = JSON.parse(execFileSync(process.execPath, [CLI, 'preflight', '--sysroot', path.join(FIXTURES, 'prod-nvme'), '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const file = factsFile('prod-nvme', (f) => (f.disks = []));
    ({ s } = startDryRun({ facts: file }));
    await toPage(s, TITLES.disk);
    await s.waitForText('No disk detected. Harvester requires at least one disk.');
    await s.keys(KEYS.enter, KEYS.tab);
    await s.page(TITLES.disk);
    writeFileSync(file, JSON.stringify(original));
    await s.keys(KEYS.f5);
    await s.waitForText('Installation disk');
    expect(s.flat()).toContain('/dev/disk/by-id/nvme-Dell_Ent_NVMe_P5600_MU_U.2_3.2TB_PHAB112300001');
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.network);
  }, 30_000);

  it('no usable disk: every disk says why it cannot be used', async () => {
    const file = factsFile('prod-nvme', (f) => {
      f.disks[0].inUse.mountpoints = ['/mnt/data'];
      f.disks[1].readOnly = true;
    });
    ({ s } = startDryRun({ facts: file }));
    await toPage(s, TITLES.disk);
    const text = await s.waitForText('No disk can take the install');
    expect(text).toContain('cannot be used: /dev/nvme0n1 is in use: mounted at /mnt/data.');
    expect(text).toContain('cannot be used: /dev/nvme1n1 is read-only (write-protected or an optical drive).');
    await s.keys(KEYS.enter);
    await s.page(TITLES.disk);
  }, 30_000);

  it('no NIC with a link: says so, a NIC without link is refused; F5 after the cable is in goes on', async () => {
    const down = (f: Record<string, any>): void => {
      for (const n of f.nics) if (!n.loopback) Object.assign(n, { operState: 'down', carrier: false });
    };
    const file = factsFile('prod-nvme', down);
    ({ s } = startDryRun({ facts: file }));
    await toPage(s, TITLES.network);
    const text = await s.waitForText('No NIC has a link');
    expect(text).toContain('ens1f0np0 (b8:ce:f6:10:00:01, no link (cable not plugged in?), 25 Gb/s)');
    await s.keys(KEYS.enter); // ticks ens1f0np0
    await s.waitForText('! None of the management NICs has a link: the node cannot reach the network.');
    expect(s.flat()).toContain("NIC ens1f0np0 is down. Network cable isn't plugged in.");
    writeFileSync(file, readFileSync(factsFile('prod-nvme', () => undefined)));
    await s.keys(KEYS.f5);
    await s.waitForText('ens1f0np0 (b8:ce:f6:10:00:01, link up, 25 Gb/s)');
    expect(s.flat()).not.toContain('No NIC has a link');
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.clusterNetwork);
  }, 30_000);

  it('a remote config that is unreachable, then invalid, is shown with its findings and nothing is merged; a valid one is merged under the answers', async () => {
    const http = await httpServer({
      // Alone it would also lack a device, a NIC and a mode: those the answers give. Its own errors remain.
      '/bad.yaml': { body: 'scheme_version: 1\nos:\n  persistent_state_paths: [var/x]\n  labels:\n    "bad key!": x\n' },
      '/good.yaml': { body: 'scheme_version: 1\nos:\n  hostname: remote-name\n  labels:\n    rack: r42\n  ntp_servers: [10.9.9.9]\n' },
    });
    const { s: sess, configFile } = startDryRun({ sysroot: 'prod-nvme' });
    s = sess;
    try {
      await walkCreate(s, { configUrl: 'http://127.0.0.1:1/nothing.yaml', stopAfter: 'configUrl' });
      await s.page(TITLES.configUrl);
      await s.waitForText('cannot fetch config', 40_000);
      expect(s.flat()).toContain('Nothing was merged.');
      await fill(s, `${http.url}/bad.yaml`);
      const bad = await s.waitForText('is not a valid config');
      expect(bad).toContain(`${http.url}/bad.yaml is not a valid config (2 error(s)); nothing was merged:`);
      expect(bad).toContain(`! ${http.url}/bad.yaml:3:28: error: os.persistent_state_paths[0]: Invalid path. PersistentStatePath must be an absolute path hint: write it from the root, e.g. /var/x`);
      expect(bad).toContain(`! ${http.url}/bad.yaml:5:17: error: os.labels["bad key!"]: invalid label name 'bad key!'`);
      await fill(s, `${http.url}/good.yaml`);
      await s.page(TITLES.summary);
      await s.waitForText('Continue?');
      expect(await s.scrolledText()).toContain(`remote config: ${http.url}/good.yaml (merged under the answers)`);
      await s.keys(KEYS.down, KEYS.up, KEYS.enter);
      await s.page('Dry run complete');
      await s.keys(KEYS.enter);
      expect(await s.exit()).toBe(0);
    } finally {
      await http.close();
    }
    const cfg = parse(readFileSync(configFile, 'utf8'));
    expect(cfg.os.hostname).toBe('node-1'); // typed wins
    expect(cfg.os.labels).toEqual({ rack: 'r42' }); // the remote's own keys come in
    expect(cfg.install.configUrl).toBe(`${http.url}/good.yaml`);
  }, 90_000);

  it('SSH keys from a URL: imported, then the password-auth choice; an empty answer is "no key found"', async () => {
    const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq1xzDK7UuPzWl6sUy8n2h8w3NVd4ZbRrEGRk1Xb3Vn ops@example';
    const http = await httpServer({ '/ops.keys': { body: `${key}\n` }, '/empty.keys': { body: '\n' } });
    const { s: sess, configFile } = startDryRun({ sysroot: 'prod-nvme' });
    s = sess;
    try {
      await walkCreate(s, { sshKeyUrl: `${http.url}/empty.keys`, stopAfter: 'ssh' });
      await s.page(TITLES.ssh);
      await s.waitForText('! fail to fetch SSH keys: no key found');
      await fill(s, `${http.url}/ops.keys`);
      const shown = await s.waitForText('1 key imported.');
      // Said once: the page's line, not a message repeating it.
      expect(shown.split('1 key imported.')).toHaveLength(2);
      await s.waitForText('Password auth');
      await s.keys(KEYS.down, KEYS.enter); // Disabled
      await s.page(TITLES.configUrl);
      await fill(s, '');
      await s.page(TITLES.summary);
      await s.waitForText('Continue?');
      await s.keys(KEYS.enter);
      await s.page('Dry run complete');
      await s.keys(KEYS.enter);
      await s.exit();
    } finally {
      await http.close();
    }
    const cfg = parse(readFileSync(configFile, 'utf8'));
    expect(cfg.os.sshAuthorizedKeys).toEqual([key]);
    expect(cfg.os.sshd).toEqual({ disablePasswordAuth: true });
  }, 60_000);
});
