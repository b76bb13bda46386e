/**
 * hvinstall console on a real pseudo-terminal, read back as a person sees it: a whole create-mode
 * walk in Harvester's page order, the confirmation page, and the config the dry run writes, checked
 * with tools that are not the console (hvinstall validate, openssl's SHA-512 crypt, the YAML parser).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CLI, KEYS, type Session } from './session.js';
import { ntpResponder, startDryRun, TITLES, walkCreate } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());

describe('hvinstall console: a create-mode walk (dry run)', () => {
  it("walks Harvester's pages in Harvester's order, lists what will be destroyed, and writes exactly the config it confirmed", async () => {
    const ntp = await ntpResponder();
    const run = startDryRun({ sysroot: 'lab-vm' });
    s = run.s;
    try {
      await s.page(TITLES.hardware);
      await s.waitFor('Do you wish to proceed?');
      await s.keys('\x1b[5~'); // PgUp: the first checks scrolled out of view
      const hw = s.flat();
      expect(hw).toContain('FAIL Only 4 CPU cores detected. Harvester requires at least 8 cores for testing and 16 for production use.');
      expect(hw).toContain('What to do: Give the machine at least 8 CPUs');
      await s.keys(KEYS.enter);
      const seen: string[] = [TITLES.hardware];
      await walkCreate(s, { password: 'Sup3r-secret!', hostname: 'lab-node-1', vip: '192.168.122.50', token: 'my-cluster-token-42', ntp: ntp.address, proxy: 'http://proxy.lab:3128' }, seen);
      expect(seen).toEqual([
        TITLES.hardware, TITLES.mode, TITLES.password, TITLES.disk, TITLES.network, TITLES.clusterNetwork, TITLES.hostname,
        TITLES.dns, TITLES.vip, TITLES.token, TITLES.ntp, TITLES.proxy, TITLES.ssh, TITLES.configUrl, TITLES.summary,
      ]);
      await s.waitForText('Continue?');
      const summary = await s.scrolledText();
      expect(summary).toContain('install mode: create');
      expect(summary).toContain('hostname: lab-node-1');
      expect(summary).toContain('proxy address: http://proxy.lab:3128');
      // The management NIC's line carries its MTU (the default, unless the network page set one).
      expect(summary).toMatch(/management NIC: .*\(dhcp, bond active-backup, MTU 1500 \(default\)\)/);
      expect(summary).toContain('EVERYTHING ON THESE DISKS WILL BE DESTROYED:');
      expect(summary).toMatch(/- \/dev\/vda \(300 GiB/);
      expect(summary).toContain('Your disk will be formatted and Harvester will be installed with the above configuration. Continue?');
      expect(summary).toContain('check failed: Only 4 CPU cores detected.');
      expect(summary).toContain('(Continuing acknowledges the failed checks above.)');
      await s.keys(KEYS.down, KEYS.up); // back on the choice: Yes
      expect(s.highlighted()).toContain('Yes');
      await s.keys(KEYS.enter);
      await s.page('Dry run complete');
      expect(s.screen()).toContain('No disk was touched (--dry-run).');
      await s.keys(KEYS.enter);
      expect(await s.exit()).toBe(0);
    } finally {
      ntp.close();
    }

    const text = readFileSync(run.configFile, 'utf8');
    expect(statSync(run.configFile).mode & 0o777).toBe(0o600);
    const cfg = parse(text);
    expect(cfg.schemeVersion).toBe(1);
    expect(cfg.token).toBe('my-cluster-token-42');
    expect(cfg.os.hostname).toBe('lab-node-1');
    expect(cfg.os.ntpServers).toEqual([ntp.address]);
    // The validator adds the VIP to no_proxy (the node must reach it directly; config/no-proxy.ts).
    expect(cfg.os.environment).toEqual({ http_proxy: 'http://proxy.lab:3128', https_proxy: 'http://proxy.lab:3128', no_proxy: '192.168.122.50' });
    expect(cfg.install).toMatchObject({ mode: 'create', device: '/dev/disk/by-id/virtio-lab-disk-0', vip: '192.168.122.50', vipMode: 'static', persistentPartitionSize: '150Gi' });
    expect(cfg.install.managementInterface).toMatchObject({ interfaces: [{ name: 'enp1s0', hwAddr: '52:54:00:12:34:56' }], method: 'dhcp', bondOptions: { mode: 'active-backup', miimon: '100' } });
    // The password is stored as Harvester's console stores it: a SHA-512 crypt hash, never the clear text.
    expect(text).not.toContain('Sup3r-secret!');
    const [, , salt] = (cfg.os.password as string).split('$');
    expect(execFileSync('openssl', ['passwd', '-6', '-salt', salt!, 'Sup3r-secret!'], { encoding: 'utf8' }).trim()).toBe(cfg.os.password);
    // The same validator the CLI runs accepts the file as it is.
    const v = spawnSync(process.execPath, [CLI, 'validate', run.configFile], { encoding: 'utf8' });
    expect(v.status, v.stderr).toBe(0);
    // The log has the config, redacted: no token, no password hash, no clear text.
    const log = readFileSync(run.logFile, 'utf8');
    expect(log).toContain('"msg":"config written"');
    expect(log).toContain('lab-node-1');
    for (const secret of ['my-cluster-token-42', 'Sup3r-secret!', cfg.os.password]) expect(log).not.toContain(secret);
    expect(s.raw).not.toMatch(/\n\s+at .+:\d+:\d+/); // never a stack trace
  }, 60_000);
});
