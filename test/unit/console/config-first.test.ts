/**
 * A config up front, before Harvester's first question: config media found at start (ISO images
 * made with xorriso, read by blkid and, without root, by xorriso), listed and offered; a config that
 * fails validation is refused with its line numbers and nothing is taken; one that passes fills the
 * pages, which are then only reviewed, and the written config holds its values. With no medium the
 * walk starts on the mode page as Harvester's does, and F2 there pastes a config or names a volume.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KEYS, type Session } from './session.js';
import { TITLES, fill, ntpResponder, startDryRun, tempDir, toPage } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());

const CONFIG_PAGE = 'Optional: start from a Harvester config';
const PASTE = 'Paste a Harvester config';
const F2 = '\x1b[12~';
const CTRL_D = '\x04';

/** An ISO 9660 medium labelled `label` holding `files` (what hvinstall config-volume writes, made here by xorriso itself). */
function medium(dir: string, label: string, files: Record<string, string>): string {
  const staging = path.join(dir, `${label}-files`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(staging, name)), { recursive: true });
    writeFileSync(path.join(staging, name), text);
  }
  const out = path.join(dir, `${label}.iso`);
  execFileSync('xorriso', ['-no_rc', '-as', 'mkisofs', '-quiet', '-V', label, '-J', '-R', '-o', out, staging], { stdio: 'ignore' });
  return out;
}

const goodConfig = (ntp: string): string =>
  [
    '#cloud-config',
    'scheme_version: 1',
    'token: vol-token-123',
    'os:',
    '  hostname: vol-node-7',
    '  password: Vol-Passw0rd!',
    '  dns_nameservers: [10.9.9.9]',
    `  ntp_servers: ["${ntp}"]`,
    '  labels:',
    '    rack: r7',
    'install:',
    '  mode: create',
    '  vip: 10.0.0.77',
    '  vip_mode: static',
    '',
  ].join('\n');

/** Two errors at known places: line 3 column 28, line 5 column 17. */
const BAD_CONFIG = 'scheme_version: 1\nos:\n  persistent_state_paths: [var/x]\n  labels:\n    "bad key!": x\n  hostname: bad-node\n';

/** Without whitespace: a long path wraps mid-word on an 80-column screen. */
const squash = (t: string): string => t.replace(/\s+/g, '');

const title = (s: Session): string => s.rows()[1]?.trim() ?? '';

/** Reviews a page: Enter on each of its `fields` as shown (the values already there). */
async function review(s: Session, page: string, seen: string[], fields = 1): Promise<string> {
  const shown = await s.page(page);
  seen.push(page);
  for (let i = 0; i < fields; i++) await s.keys(KEYS.enter);
  return shown;
}

describe('hvinstall console: a config up front', () => {
  it('lists the config media found at start, refuses an invalid one with its line numbers, takes another, and the walk reviews its values', async () => {
    const ntp = await ntpResponder();
    const dir = tempDir();
    const bad = medium(dir, 'HARVESTER_CONFIG', { 'config.yaml': BAD_CONFIG });
    const good = medium(dir, 'cidata', { 'user-data': goodConfig(ntp.address), 'meta-data': 'instance-id: t1\n' });
    const run = startDryRun({ sysroot: 'prod-nvme' }, ['--config-volume-devices', `${bad},${good}`]);
    s = run.s;
    try {
      await s.page(CONFIG_PAGE);
      const offer = s.flat();
      expect(offer).toContain('Config media are attached');
      expect(offer).toContain(`Use the config on ${bad} (iso9660 "HARVESTER_CONFIG")`);
      expect(offer).toContain(`Use the config on ${good} (iso9660 "cidata")`);
      expect(offer).toContain('Paste a config');
      expect(offer).toContain('Read the volume labelled...');
      expect(offer).toContain('Go on without a config');
      // The first found (in precedence order) is the default: it is refused, with its line numbers.
      await s.keys(KEYS.enter);
      const refused = await s.waitForText('is not a valid config');
      const src = `HARVESTER_CONFIG(${bad}):config.yaml`;
      expect(squash(refused)).toContain(squash(`${src} is not a valid config (2 error(s)); nothing was taken:`));
      expect(squash(refused)).toContain(squash(`${src}:3:28: error: os.persistent_state_paths[0]: Invalid path.`));
      expect(squash(refused)).toContain(squash(`${src}:5:17: error: os.labels["bad key!"]: invalid label name 'bad key!'`));
      expect(title(s)).toBe(CONFIG_PAGE);
      expect(refused).not.toContain('Taken:');
      // Another medium: taken, and the pages show its values.
      await s.keys(KEYS.down, KEYS.enter);
      const seen: string[] = [CONFIG_PAGE];
      await review(s, TITLES.mode, seen);
      await review(s, TITLES.password, seen, 2);
      await review(s, TITLES.disk, seen, 0);
      for (let i = 0; i < 6 && (await s.settle()).includes(TITLES.disk); i++) await s.keys(KEYS.enter);
      await review(s, TITLES.network, seen, 4); // the config names no NIC: asked (Enter ticks the first)
      await review(s, TITLES.clusterNetwork, seen, 3);
      expect(await review(s, TITLES.hostname, seen)).toContain('vol-node-7');
      expect(await review(s, TITLES.dns, seen)).toContain('10.9.9.9');
      expect(await review(s, TITLES.vip, seen, 2)).toContain('10.0.0.77');
      await review(s, TITLES.token, seen);
      expect(await review(s, TITLES.ntp, seen)).toContain(ntp.address);
      await review(s, TITLES.proxy, seen);
      await review(s, TITLES.ssh, seen);
      await review(s, TITLES.configUrl, seen);
      await s.page(TITLES.summary);
      seen.push(TITLES.summary);
      expect(seen).toEqual([
        CONFIG_PAGE, TITLES.mode, TITLES.password, TITLES.disk, TITLES.network, TITLES.clusterNetwork, TITLES.hostname,
        TITLES.dns, TITLES.vip, TITLES.token, TITLES.ntp, TITLES.proxy, TITLES.ssh, TITLES.configUrl, TITLES.summary,
      ]);
      await s.waitForText('Continue?');
      const summary = await s.scrolledText();
      expect(summary).toContain(`config taken at start: cidata(${good}):user-data (its values filled the pages)`);
      expect(summary).toContain('hostname: vol-node-7');
      await s.keys(KEYS.down, KEYS.up, KEYS.enter);
      await s.page('Dry run complete');
      await s.keys(KEYS.enter);
      expect(await s.exit()).toBe(0);
    } finally {
      ntp.close();
    }
    const cfg = parse(readFileSync(run.configFile, 'utf8'));
    expect(cfg.token).toBe('vol-token-123');
    expect(cfg.os).toMatchObject({ hostname: 'vol-node-7', dnsNameservers: ['10.9.9.9'], ntpServers: [ntp.address], labels: { rack: 'r7' } });
    expect(cfg.install).toMatchObject({ mode: 'create', vip: '10.0.0.77', vipMode: 'static' });
    // The NIC the config left open was asked, and answered.
    expect(cfg.install.managementInterface.interfaces).toHaveLength(1);
    const [, , salt] = (cfg.os.password as string).split('$');
    expect(execFileSync('openssl', ['passwd', '-6', '-salt', salt!, 'Vol-Passw0rd!'], { encoding: 'utf8' }).trim()).toBe(cfg.os.password);
    // Nothing of the refused medium.
    expect(JSON.stringify(cfg)).not.toContain('bad-node');
    const log = readFileSync(run.logFile, 'utf8');
    expect(log).toContain('"msg":"config refused"');
    expect(log).not.toContain('vol-token-123');
  }, 120_000);

  it('after the hardware checks, a medium with an invalid config only: refused, nothing taken, and "go on without" asks every page from scratch', async () => {
    const dir = tempDir();
    const bad = medium(dir, 'cidata', { 'user-data': BAD_CONFIG });
    ({ s } = startDryRun({ sysroot: 'lab-vm' }, ['--config-volume-devices', bad]));
    await s.page(TITLES.hardware);
    await s.waitFor('Do you wish to proceed?');
    await s.keys(KEYS.enter);
    await s.page(CONFIG_PAGE);
    expect(s.rows().at(-1)).toContain('F5: look again');
    expect(s.flat()).toContain('A config medium is attached');
    await s.keys(KEYS.enter);
    const refused = await s.waitForText('is not a valid config');
    expect(squash(refused)).toContain(squash(`cidata(${bad}):user-data:3:28: error: os.persistent_state_paths[0]: Invalid path.`));
    expect(squash(refused)).toContain(squash(`cidata(${bad}):user-data:5:17: error:`));
    await s.keys(KEYS.down, KEYS.down, KEYS.down); // paste, label, go on without
    expect(s.highlighted()).toContain('Go on without a config');
    await s.keys(KEYS.enter);
    await toPage(s, TITLES.clusterNetwork);
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.hostname);
    expect(s.flat()).not.toContain('bad-node');
    await s.keys(KEYS.enter);
    await s.waitForText('! Must specify hostname.');
  }, 60_000);

  it('no medium: the mode page comes first; F2 there pastes a config, refused with line numbers until valid, then its values fill the pages', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await s.page(TITLES.mode);
    expect(s.rows().at(-1)).toContain('F2: start from a config');
    await s.keys(F2);
    await s.page(CONFIG_PAGE);
    const offer = s.flat();
    expect(offer).toContain('No config medium found');
    expect(offer).not.toContain('Use the config on');
    expect(s.highlighted()).toContain('Paste a config');
    await s.keys(KEYS.enter);
    await s.page(PASTE);
    await s.type('scheme_version: 1\ros:\r  persistent_state_paths: [var/x]\r  labels:\r    "bad key!": x\r');
    await s.keys(CTRL_D);
    const bad = await s.waitForText('is not a valid config');
    expect(bad).toContain('<pasted> is not a valid config (2 error(s)); nothing was taken:');
    expect(bad).toContain('<pasted>:3:28: error: os.persistent_state_paths[0]: Invalid path.');
    await s.keys(KEYS.ctrlU);
    await s.type('scheme_version: 1\rtoken: paste-token-9\ros:\r  hostname: paste-node\r  labels:\r    rack: r9\r');
    await s.keys(CTRL_D);
    await s.page(TITLES.mode);
    await toPage(s, TITLES.clusterNetwork);
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.hostname);
    expect(s.flat()).toContain('paste-node');
    // Esc back to the config page: it says what was taken and offers to keep it.
    for (const t of [TITLES.clusterNetwork, TITLES.network, TITLES.disk, TITLES.password, TITLES.mode, CONFIG_PAGE]) {
      await s.keys(KEYS.esc);
      await s.page(t);
    }
    expect(s.flat()).toContain('Taken: <pasted>. Its values are the answers on the pages that follow.');
    expect(s.highlighted()).toContain('Keep the config taken (<pasted>)');
  }, 90_000);

  it('F2 then a volume named by its label: a label that is not one is refused, then the named medium is read and taken', async () => {
    const dir = tempDir();
    const mine = medium(dir, 'MYCONF', { 'config.yaml': 'scheme_version: 1\nos:\n  hostname: label-node\n' });
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }, ['--config-volume-devices', mine]));
    // MYCONF is none of the three labels looked for at start: no config page in the walk.
    await s.page(TITLES.mode);
    await s.keys(F2);
    await s.page(CONFIG_PAGE);
    await s.keys(KEYS.down);
    expect(s.highlighted()).toContain('Read the volume labelled...');
    await s.waitForText('Volume label');
    await s.keys(KEYS.enter);
    await fill(s, 'bad label!');
    await s.waitForText('! the label bad label! does not name a filesystem label');
    await fill(s, 'MYCONF');
    await s.page(TITLES.mode);
    await toPage(s, TITLES.clusterNetwork);
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.hostname);
    expect(s.flat()).toContain('label-node');
  }, 60_000);
});
