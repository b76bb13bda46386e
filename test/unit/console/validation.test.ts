/**
 * The message under each field as it is left, on a real pseudo-terminal: Harvester's console-only
 * messages, the validator's (the same words `hvinstall validate` prints), preflight's and the
 * planner's; a field in error keeps the focus, so the page does not move on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { KEYS, type Session } from './session.js';
import { TITLES, fill, startDryRun, toPage } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());


describe('hvinstall console: field checks', () => {
  it('password: required, then typed twice (Harvester\'s console messages)', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await toPage(s, TITLES.password);
    await s.keys(KEYS.enter);
    await s.waitForText('! Password is required');
    expect(s.cursor().row).toBe(3); // still on the first field
    await s.type('abc123!');
    await s.keys(KEYS.enter);
    await fill(s, 'abc123?');
    await s.waitForText('! Password mismatching');
    await fill(s, 'abc123!');
    await s.page(TITLES.disk);
  }, 30_000);

  it('static network: console-only number checks, then the validator\'s own messages', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await toPage(s, TITLES.network);
    await s.keys(KEYS.enter); // tick the first NIC
    await fill(s, 'abc');
    await s.waitForText('! VLAN ID should be a number 1 ~ 4094.');
    await fill(s, '5000');
    await s.waitForText('! VLAN ID should be a number 1 ~ 4094.');
    await fill(s, '');
    await s.keys(KEYS.enter); // bond mode
    await s.keys(KEYS.down); // IPv4 Method: Static (the static fields appear)
    await s.waitForText('IPv4 Address');
    await s.keys(KEYS.enter);
    await fill(s, '1.2.3');
    await s.waitForText('! 1.2.3 is not a valid IP address');
    await fill(s, '10.0.0.11');
    await fill(s, '255.0.255.0');
    await s.waitForText('invalid subnet mask: not continuous');
    await fill(s, '255.255.255.0');
    await fill(s, '10.0.0.1');
    await fill(s, 'x');
    await s.waitForText('! MTU should be a number.');
    await fill(s, '99');
    await s.waitForText('! 99 is not a valid MTU value');
    await fill(s, '9000');
    await s.page(TITLES.clusterNetwork);
    await s.keys(KEYS.enter, KEYS.enter);
    await fill(s, '10.99.0.10');
    await s.waitForText('! invalid cluster DNS IP: 10.99.0.10 is not in the service CIDR 10.53.0.0/16');
    await fill(s, '');
    await s.page(TITLES.hostname);
    await fill(s, '');
    await s.waitForText('! Must specify hostname.');
    await fill(s, 'Bad_Host');
    await s.waitForText("! invalid hostname. A lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'");
    await fill(s, 'node-1');
    await s.page(TITLES.dns);
    await fill(s, '');
    await s.waitForText('! DNS servers are required for static IP address');
    await fill(s, '10.0.0.2, 10.0.0.3');
    await s.page(TITLES.vip);
    await s.keys(KEYS.down, KEYS.enter); // static VIP
    await fill(s, '10.0.0.11');
    await s.waitForText("! VIP must not be the same as management NIC's IP");
    await fill(s, '10.0.0.300');
    await s.waitForText('! 10.0.0.300 is not a valid IP address');
    await fill(s, '10.0.0.100');
    await s.page(TITLES.token);
    await fill(s, '');
    await s.waitForText('! token not specified');
    await fill(s, 'tök');
    await s.waitForText('! Invalid token. Must be alphanumeric and OWASP special password characters.');
    await fill(s, 'a-good-token');
    await s.page(TITLES.ntp);
    await fill(s, 'pool 1');
    await s.waitForText('There is space in input.');
  }, 60_000);

  it('disk: too small for one disk (preflight), persistent size out of bounds (validator, planner)', async () => {
    ({ s } = startDryRun({ sysroot: 'usb-boot' }));
    await s.page(TITLES.hardware);
    await s.keys(KEYS.enter);
    await toPage(s, TITLES.disk);
    const text = await s.waitForText('Installation disk');
    // The USB stick the installer booted from is listed, with why it cannot be used.
    expect(text).toContain('/dev/disk/by-id/usb-Kingston_DataTraveler_3.0_408D5C1EA1B2-0:0');
    expect(text).toMatch(/cannot be used: \/dev\/sdb holds the medium this system booted from/);
    await s.keys(KEYS.enter);
    await s.waitForText('! installation disk size is too small. Minimum 250Gi is required');
    expect(s.flat()).toContain('Use a disk of at least 250GiB');
    await s.keys(KEYS.enter);
    await s.page(TITLES.disk); // it does not move on
  }, 30_000);

  it('disk: the persistent size is checked by the validator (format, minimum) and the planner (maximum for this disk)', async () => {
    ({ s } = startDryRun({ sysroot: 'prod-nvme' }));
    await toPage(s, TITLES.disk);
    await s.keys(KEYS.down, KEYS.enter); // installation disk: the 3.2 TB NVMe, the second in the list (it starts at the first, as Harvester's)
    await s.keys(KEYS.enter); // data disk: the same
    await fill(s, '100Gi');
    await s.waitForText('! partition size is too small. Minimum 150Gi is required');
    await fill(s, '90000Gi');
    await s.waitForText('! partition size is too large. Maximum 2907Gi is allowed');
    await fill(s, '12.5Gi');
    await s.waitForText("! partition size must end with 'Mi' or 'Gi'. Decimals and negatives are not allowed");
    await fill(s, '200Gi');
    await s.page(TITLES.network);
  }, 30_000);

  it('disk: install.skipchecks on the kernel command line lets a disk below the minimum through, saying so', async () => {
    const { writeFileSync } = await import('node:fs');
    const dir = (await import('./walk.js')).tempDir();
    writeFileSync(`${dir}/cmdline`, 'BOOT_IMAGE=/vmlinuz harvester.install.skipchecks=true console=tty1\n');
    ({ s } = startDryRun({ sysroot: 'usb-boot' }, ['--cmdline-file', `${dir}/cmdline`]));
    await s.page(TITLES.hardware);
    await s.keys(KEYS.enter);
    await toPage(s, TITLES.disk);
    await s.keys(KEYS.enter);
    await s.waitForText('* installation disk size is too small. Minimum 250Gi is required');
    expect(s.flat()).toContain('(allowed: install.skipchecks is set)');
    expect(s.flat()).toContain('Persistent size');
  }, 30_000);
});
