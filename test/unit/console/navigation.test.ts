/**
 * Moving through the console: Esc goes back with every answer kept, the pages follow the mode
 * (join asks for a role and the management address and has no VIP; binaries-only goes from the disk
 * straight to the confirmation), a machine that cannot take an install cannot be talked past, and
 * Ctrl-C asks before quitting.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { KEYS, type Session } from './session.js';
import { fill, startDryRun, TITLES } from './walk.js';
import { testTempDir } from '../temp-dir.js';

let s: Session | undefined;
afterEach(() => s?.kill());

describe('hvinstall console: navigation', () => {
  it('Esc goes back a page and keeps what was typed; Shift-Tab goes back a field', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await s.page(TITLES.mode);
    await s.keys(KEYS.enter);
    await s.page(TITLES.password);
    await fill(s, 'Passw0rd!');
    await fill(s, 'Passw0rd!');
    await s.page(TITLES.disk);
    await s.keys(KEYS.esc);
    await s.page(TITLES.password);
    // Both fields still hold 9 characters (shown masked).
    expect(s.flat()).toMatch(/Password \[\*{9} *\] Confirm password \[\*{9} *\]/);
    // The cursor moves when the console has redrawn, which a loaded host may delay past the keys' settle.
    await s.keys(KEYS.tab);
    await expect.poll(() => s!.cursor().row, { timeout: 5_000 }).toBe(5);
    await s.keys(KEYS.backtab);
    await expect.poll(() => s!.cursor().row, { timeout: 5_000 }).toBe(3);
    await s.keys(KEYS.esc);
    await s.page(TITLES.mode);
    expect(s.highlighted()).toContain('Create a new Harvester cluster');
    await s.keys(KEYS.esc); // the first page: nowhere further back
    await s.page(TITLES.mode);
  }, 30_000);

  it('join: role page, management address checked (format, then /ping with a second Enter to go on), token note, no VIP page', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await s.page(TITLES.mode);
    await s.keys(KEYS.down, KEYS.enter);
    await s.page(TITLES.role);
    expect(s.flat()).toContain('Default Role (Management or Worker) ( ) Management Role ( ) Witness Role ( ) Worker Role');
    await s.keys(KEYS.down, KEYS.down, KEYS.enter); // witness
    await s.page(TITLES.password);
    await fill(s, 'Passw0rd!');
    await fill(s, 'Passw0rd!');
    await s.page(TITLES.disk);
    // A witness node keeps no data: no data disk, no persistent size.
    expect(s.flat()).not.toContain('Data disk');
    expect(s.flat()).not.toContain('Persistent size');
    await s.keys(KEYS.enter);
    await s.page(TITLES.network);
    await s.keys(KEYS.enter, KEYS.enter, KEYS.enter, KEYS.enter);
    await s.page(TITLES.hostname); // no cluster network page when joining
    await fill(s, 'node-2');
    await s.page(TITLES.dns);
    await fill(s, '');
    await s.page(TITLES.serverUrl);
    expect(s.flat()).toContain('Note: Input VIP/domain name of the management node');
    await fill(s, 'https://10.0.0.100/dashboard');
    await s.waitForText('! server url invalid: path is not allowed in management address: /dashboard');
    await fill(s, '127.0.0.1');
    await s.waitForText('Failed to reach https://127.0.0.1:443/ping: ECONNREFUSED. Press Enter again to use it anyway');
    await s.keys(KEYS.enter);
    await s.page(TITLES.token);
    expect(s.flat()).toContain('Note: Input the token of the existing cluster');
  }, 40_000);

  it('binaries only: mode, password, disk, then the confirmation with Harvester\'s wording', async () => {
    const { s: sess, configFile } = startDryRun({ sysroot: 'prod-nvme' });
    s = sess;
    await s.page(TITLES.mode);
    await s.keys(KEYS.down, KEYS.down, KEYS.enter);
    await s.page(TITLES.password);
    await fill(s, 'Passw0rd!');
    await fill(s, 'Passw0rd!');
    await s.page(TITLES.disk);
    await s.keys(KEYS.enter);
    await s.page(TITLES.summary);
    const text = await s.waitForText('Continue?');
    expect(text).toContain('install mode: install');
    expect(text).toContain('Harvester will be copied to local disk. No configuration will be performed. Continue?');
    await s.keys(KEYS.enter);
    await s.page('Dry run complete');
    await s.keys(KEYS.enter);
    expect(await s.exit()).toBe(0);
    const { parse } = await import('yaml');
    const cfg = parse((await import('node:fs')).readFileSync(configFile, 'utf8'));
    expect(cfg.install.mode).toBe('install');
    expect(cfg.install.managementInterface).toBeUndefined();
    expect(cfg.token).toBeUndefined();
  }, 30_000);

  it('legacy BIOS: the hardware checks cannot be acknowledged; the key line says what Enter does, and Enter halts', async () => {
    ({ s } = startDryRun({ sysroot: 'legacy-bios' }, ['--no-reboot']));
    await s.page(TITLES.hardware);
    const text = await s.waitForText('nothing can override');
    expect(text).toContain('FAIL Legacy BIOS systems are no longer supported. Please reconfigure the system to use UEFI prior to installation.');
    expect(text).not.toContain('Do you wish to proceed?');
    // The key line, the screen's last row.
    expect(s.rows().at(-1)).toContain('Enter: halt and reboot');
    expect(s.rows().at(-1)).not.toContain('Enter: next');
    await s.keys(KEYS.enter);
    await s.page('Installation halted');
    expect(s.flat()).toContain('This machine cannot take a Harvester install: nothing can override the failed checks.');
    expect(s.flat()).toContain('Not rebooting (--no-reboot).');
    await s.keys(KEYS.enter);
    expect(await s.exit()).toBe(1);
  }, 30_000);

  it('legacy BIOS with hvinstall.legacy_bios on the kernel command line: acknowledged like the other checks', async () => {
    const { writeFileSync } = await import('node:fs');
    const dir = testTempDir('hv-console-cmdline-');
    writeFileSync(`${dir}/cmdline`, 'console=ttyS0 hvinstall.legacy_bios\n');
    ({ s } = startDryRun({ sysroot: 'legacy-bios' }, ['--cmdline-file', `${dir}/cmdline`]));
    await s.page(TITLES.hardware);
    const text = await s.waitForText('Do you wish to proceed?');
    expect(text).toContain('FAIL Legacy BIOS systems are no longer supported.');
    expect(text).not.toContain('nothing can override');
    await s.keys(KEYS.enter);
    await s.page(TITLES.mode);
  }, 30_000);

  it('legacy BIOS: Ctrl-C asks, No stays, Yes quits', async () => {
    ({ s } = startDryRun({ sysroot: 'legacy-bios' }));
    await s.page(TITLES.hardware);
    await s.waitForText('nothing can override');
    await s.keys(KEYS.ctrlC);
    await s.waitForText('Quit the installer? Nothing has been written to any');
    expect(s.highlighted()).toContain('[ No ]');
    await s.keys(KEYS.enter);
    // No: the dialog closes (redrawn when the program gets to it) and the hardware page stays, running.
    await s.waitForTextGone('Quit the installer?');
    await s.page(TITLES.hardware);
    expect(s.flat()).toContain('nothing can override');
    expect(s.exitCode).toBeUndefined();
    await s.keys(KEYS.ctrlC);
    await s.waitForText('Quit the installer?');
    await s.keys(KEYS.right, KEYS.enter);
    expect(await s.exit()).toBe(130);
    // The terminal is given back: auto-wrap on and the cursor shown; never a stack trace.
    expect(s.raw.endsWith('\x1b[0m\x1b[?7h\x1b[?25h\x1b[H\x1b[2J')).toBe(true);
    expect(s.raw).not.toMatch(/\n\s+at .+:\d+:\d+/);
  }, 30_000);

  it('hardware checks: No halts the install and, with --no-reboot, quits without rebooting', async () => {
    ({ s } = startDryRun({ sysroot: 'lab-vm' }, ['--no-reboot']));
    await s.page(TITLES.hardware);
    await s.waitForText('Do you wish to proceed?');
    await s.keys(KEYS.down, KEYS.enter);
    await s.page('Installation halted');
    expect(s.flat()).toContain('Not rebooting (--no-reboot).');
    await s.keys(KEYS.enter);
    expect(await s.exit()).toBe(1);
  }, 30_000);

  it('booted from a USB stick: the stick is not offered as a data disk (the installation disk is the only choice)', async () => {
    ({ s } = startDryRun({ sysroot: 'usb-boot' }));
    await s.page('Hardware Checks'); // this lab machine is below the testing profile: proceed anyway
    await s.keys(KEYS.enter);
    await s.page(TITLES.mode);
    await s.keys(KEYS.enter);
    await s.page(TITLES.password);
    await fill(s, 'Passw0rd!');
    await fill(s, 'Passw0rd!');
    await s.page(TITLES.disk);
    expect(s.flat()).toContain('Installation disk');
    expect(s.flat()).not.toContain('Data disk');
    expect(s.flat()).toContain('Persistent size');
  }, 30_000);
});
