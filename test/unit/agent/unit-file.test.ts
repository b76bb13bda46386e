/**
 * agent/hvagent.service as systemd reads it: ordered before rancherd and RKE2, after what the guards
 * need, ready only by notification, a bounded start, and no option that would give the agent its
 * own mount namespace (the Longhorn disk it mounts must reach the host).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadGuards } from '../../../agent/guards/index.js';
import { LAUNCHER } from '../../../node/payload-layout.js';
import { PRE_BOOTSTRAP_GUARDS } from '../../../agent/sd-notify.js';
import { SEEN_ADDRESS_PATH } from '../../../agent/identity/record.js';

const unitText = (name: string): string => readFileSync(path.resolve(import.meta.dirname, '../../../agent', name), 'utf8');

/** section -> key -> values (systemd list settings split on whitespace, repeated keys appended). */
function parseUnit(text: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {};
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(line);
    if (s) {
      section = s[1]!;
      out[section] ??= {};
      continue;
    }
    const i = line.indexOf('=');
    const key = line.slice(0, i).trim();
    (out[section]![key] ??= []).push(line.slice(i + 1).trim());
  }
  return out;
}
const unit = parseUnit(unitText('hvagent.service'));
const words = (section: string, key: string, u = unit): string[] => (u[section]?.[key] ?? []).flatMap((v) => v.split(/\s+/)).filter(Boolean);

function seconds(v: string): number {
  const m = /^(\d+)(min|s|h)?$/.exec(v);
  if (!m) throw new Error(`not a finite time span: ${v}`);
  return Number(m[1]) * (m[2] === 'min' ? 60 : m[2] === 'h' ? 3600 : 1);
}

describe('hvagent.service', () => {
  it('is ordered before rancherd and both RKE2 units, and after NetworkManager and the local filesystems', () => {
    expect(words('Unit', 'Before')).toEqual(expect.arrayContaining(['rancherd.service', 'rke2-server.service', 'rke2-agent.service']));
    expect(words('Unit', 'After')).toEqual(expect.arrayContaining(['local-fs.target', 'NetworkManager.service']));
    expect(words('Unit', 'RequiresMountsFor')).toEqual(expect.arrayContaining(['/oem', '/usr/local']));
    // network-online.target is what nm-online decides; hvagent replaces that check, it must not wait for it.
    expect(words('Unit', 'After')).not.toContain('network-online.target');
    // But wanted, so the target is reached while the guards run, not after the agent starts RKE2 (After= it).
    expect(words('Unit', 'Wants')).toContain('network-online.target');
    // The guards that need no containerd run while an image's containerd starts; image-preload waits for it.
    expect(words('Unit', 'After')).not.toContain('containerd.service');
  });

  it('is ordered after the time daemons time-sync asks, and the mount holding node-identity\'s record, without waiting for time-sync.target', () => {
    expect(words('Unit', 'After')).toEqual(expect.arrayContaining(['chronyd.service', 'chrony.service', 'systemd-timesyncd.service']));
    // time-sync bounds its own wait for the clock; time-sync.target (chrony-wait) could hold the node for long.
    expect(words('Unit', 'After')).not.toContain('time-sync.target');
    expect(words('Unit', 'Wants')).not.toEqual(expect.arrayContaining(['chronyd.service']));
    expect(words('Unit', 'RequiresMountsFor')).toContain(path.posix.dirname(path.posix.dirname(SEEN_ADDRESS_PATH)));
  });

  it('signals readiness by notification, from any of its processes (systemd-notify is a child)', () => {
    expect(unit.Service?.Type).toEqual(['notify']);
    expect(unit.Service?.NotifyAccess).toEqual(['all']);
  });

  it('bounds its start above the longest deadline of the guards it reports ready after', async () => {
    const timeout = seconds(unit.Service!.TimeoutStartSec![0]!);
    const guards = await loadGuards(PRE_BOOTSTRAP_GUARDS);
    const longest = Math.max(...PRE_BOOTSTRAP_GUARDS.map((g) => guards[g]!.deadlineMs)) / 1000;
    expect(longest).toBeGreaterThan(0);
    expect(timeout).toBeGreaterThan(longest);
    expect(timeout).toBeLessThan(6 * 3600);
  });

  it('starts the installed launcher, is enabled by multi-user.target and restarts without a limit', () => {
    expect(unit.Service?.ExecStart).toEqual([`${LAUNCHER} run`]);
    expect(unit.Install?.WantedBy).toEqual(['multi-user.target']);
    expect(unit.Service?.Restart).toEqual(['on-failure']);
    expect(unit.Unit?.StartLimitIntervalSec).toEqual(['0']);
    expect(unit.Service?.SyslogLevelPrefix).toEqual(['yes']);
  });

  it('has no option that would put the agent in a mount namespace of its own', () => {
    const namespacing = ['ProtectSystem', 'ProtectHome', 'PrivateTmp', 'PrivateDevices', 'PrivateMounts', 'ProtectKernelTunables', 'ProtectKernelModules', 'ProtectKernelLogs', 'ProtectControlGroups', 'ProtectProc', 'ProtectHostname', 'ProtectClock', 'ReadWritePaths', 'ReadOnlyPaths', 'InaccessiblePaths', 'TemporaryFileSystem', 'BindPaths', 'MountFlags'];
    for (const k of namespacing) expect(unit.Service?.[k], k).toBeUndefined();
    // and the hardening that needs none is there
    expect(unit.Service?.NoNewPrivileges).toEqual(['yes']);
    expect(words('Service', 'CapabilityBoundingSet')).toContain('CAP_SYS_ADMIN');
    expect(words('Service', 'CapabilityBoundingSet')).not.toContain('CAP_SYS_MODULE');
    expect(words('Service', 'SystemCallFilter').join(' ')).toMatch(/^~.*@reboot/);
  });
});

describe('hvagent-console.service', () => {
  const con = parseUnit(unitText('hvagent-console.service'));
  it('is enabled by multi-user.target and runs the installed launcher on tty1 in place of its login prompt', () => {
    expect(con.Install?.WantedBy).toEqual(['multi-user.target']);
    expect(con.Service?.ExecStart).toEqual([`${LAUNCHER} console`]);
    expect(con.Service?.TTYPath).toEqual(['/dev/tty1']);
    expect(words('Unit', 'Conflicts', con)).toContain('getty@tty1.service');
  });
  it('is not ordered after hvagent: a Type=notify agent would keep the screen dark until the node is prepared', () => {
    expect(unit.Service?.Type).toEqual(['notify']);
    expect(words('Unit', 'After', con)).not.toContain('hvagent.service');
    expect(words('Unit', 'Requires', con)).not.toContain('hvagent.service');
  });
  it("yields the CPUs to the node's preparation: a lower CPU weight than systemd's default 100, and a positive nice", () => {
    expect(Number(con.Service?.CPUWeight?.[0])).toBeLessThan(100);
    expect(Number(con.Service?.Nice?.[0])).toBeGreaterThan(0);
    expect(unit.Service?.CPUWeight).toBeUndefined();
    expect(unit.Service?.Nice).toBeUndefined();
  });
  it("takes no larger share of the CPUs at boot than NetworkManager, whose lease its READY=1 waits for", () => {
    expect(unit.Service?.StartupCPUWeight).toBeUndefined();
    expect(unit.Service?.CPUWeight).toBeUndefined();
    expect(con.Service?.StartupCPUWeight).toBeUndefined();
  });
});
