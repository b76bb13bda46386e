/**
 * The config the console's answers make (pure): each answer sets its key over what the kernel
 * command line said, a mode drops what it does not ask, and findings are matched to the field
 * that answers for them, whatever spelling the finding's path has.
 */
import { describe, expect, it } from 'vitest';
import { answersFrom, applyAnswers, splitCidr } from '../../../installer/console/answers.js';
import { findingIsAbout } from '../../../installer/console/checks.js';

describe('console answers -> config', () => {
  it('pre-fills from the command line and lets the answers win, keeping keys no page asks', () => {
    const base = { install: { mode: 'join', device: '/dev/sda', skipchecks: true, tty: 'ttyS0', managementInterface: { interfaces: [{ name: 'eno1' }], method: 'dhcp' } }, os: { hostname: 'from-cmdline', dnsNameservers: ['10.0.0.2'] } };
    const a = answersFrom(base);
    expect(a).toMatchObject({ mode: 'join', device: '/dev/sda', nics: ['eno1'], hostname: 'from-cmdline', dns: '10.0.0.2', ntp: '0.suse.pool.ntp.org' });
    a.hostname = 'typed';
    a.dns = '10.0.0.3, 10.0.0.4';
    a.serverUrl = '10.0.0.100';
    a.token = 'tok';
    a.password = 'pw';
    const cfg = applyAnswers(base, a, { macOf: (n) => (n === 'eno1' ? 'aa:bb:cc:dd:ee:ff' : undefined), passwordAs: (c) => `hash(${c})` }) as any;
    expect(cfg.os.hostname).toBe('typed');
    expect(cfg.os.dnsNameservers).toEqual(['10.0.0.3', '10.0.0.4']); // set, not appended to the command line's
    expect(cfg.os.password).toBe('hash(pw)');
    expect(cfg.install.skipchecks).toBe(true);
    expect(cfg.install.tty).toBe('ttyS0');
    expect(cfg.install.managementInterface.interfaces).toEqual([{ name: 'eno1', hwAddr: 'aa:bb:cc:dd:ee:ff' }]);
    expect(cfg.serverUrl).toBe('10.0.0.100');
    expect(cfg.install.vip).toBeUndefined();
    expect(cfg.install.vipMode).toBeUndefined();
    expect(cfg.install.clusterPodCidr).toBeUndefined();
  });

  it('create mode carries the VIP and cluster network, no server URL; binaries-only carries no network and no token', () => {
    const a = answersFrom({});
    Object.assign(a, { mode: 'create', vipMode: 'static', vip: '10.0.0.100', podCidr: '10.60.0.0/16', token: 't', serverUrl: 'left-over', nics: ['eth0'] });
    const create = applyAnswers({}, a) as any;
    expect(create.install).toMatchObject({ mode: 'create', role: 'default', vip: '10.0.0.100', vipMode: 'static', clusterPodCidr: '10.60.0.0/16' });
    expect(create.serverUrl).toBeUndefined();
    a.mode = 'install';
    const only = applyAnswers({}, a) as any;
    expect(only.install.managementInterface).toBeUndefined();
    expect(only.token).toBeUndefined();
    expect(only.install.vip).toBeUndefined();
  });

  it('a static address written address/prefix gives the mask; a typed mask wins', () => {
    expect(splitCidr('192.168.1.10/24')).toEqual({ ip: '192.168.1.10', mask: '255.255.255.0' });
    expect(splitCidr('10.1.2.3/20')).toEqual({ ip: '10.1.2.3', mask: '255.255.240.0' });
    expect(splitCidr('10.1.2.3')).toEqual({ ip: '10.1.2.3' });
    expect(splitCidr('10.1.2.3/33')).toEqual({ ip: '10.1.2.3/33' });
    const a = answersFrom({});
    Object.assign(a, { mode: 'create', nics: ['eth0'], method: 'static', address: '10.1.2.3/20', mask: '' });
    expect((applyAnswers({}, a) as any).install.managementInterface).toMatchObject({ ip: '10.1.2.3', subnetMask: '255.255.240.0' });
    a.mask = '255.255.0.0';
    expect((applyAnswers({}, a) as any).install.managementInterface.subnetMask).toBe('255.255.0.0');
  });

  it('with DHCP the static fields are dropped, but the MTU a config gave stays (the page asks it only with Static)', () => {
    const base = { install: { managementInterface: { interfaces: [{ name: 'eth0' }], method: 'static', ip: '10.0.0.5', subnetMask: '255.255.255.0', gateway: '10.0.0.1', mtu: 9000 } } };
    const a = answersFrom(base);
    Object.assign(a, { mode: 'create', method: 'dhcp' });
    const mi = (applyAnswers(base, a) as any).install.managementInterface;
    expect(mi).toMatchObject({ method: 'dhcp', mtu: 9000 });
    expect(mi.ip ?? mi.subnetMask ?? mi.gateway).toBeUndefined();
  });

  it('matches a finding to its field in any spelling, and not a sibling that shares a prefix', () => {
    const f = (path: string) => ({ severity: 'error' as const, path, message: 'x' });
    expect(findingIsAbout(f('install.vip_mode'), 'vipMode')).toBe(true);
    expect(findingIsAbout(f('install.vipMode'), 'vipMode')).toBe(true);
    expect(findingIsAbout(f('install.vipMode'), 'vip')).toBe(false);
    expect(findingIsAbout(f('install.managementInterface.interfaces[0].name'), 'nics')).toBe(true);
    expect(findingIsAbout(f('os.ntp_servers[1]'), 'ntp')).toBe(true);
    expect(findingIsAbout(f('server_url'), 'serverUrl')).toBe(true);
    expect(findingIsAbout(f('token'), 'hostname')).toBe(false);
  });
});
