/**
 * network-online with a real Linux bond: mgmt-bo (active-backup, miimon 100) with two veth slaves
 * under the bridge mgmt-br, in a QEMU guest running Debian's kernel (this machine's kernel has no
 * bonding driver). The guest runs the built `hvagent once --guard network-online` per scenario.
 * Needs `make build` (dist/), qemu-system-x86 and Debian's kernel package (downloaded once with
 * apt-get into $HV_KERNEL_CACHE).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../../../agent/guard.js';
import { bootGuest, buildBondGuest } from './bond-guest.js';
import { POWEROFF_AFTER_OUTPUT } from '../../../../iso-build/poweroff-after-output.js';

const SCRIPT = String.raw`
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
for m in bonding veth bridge; do modprobe $m || echo "HVTEST-ERROR modprobe $m"; done
/usr/sbin/ip link set lo up
/usr/sbin/ip link add mgmt-bo type bond mode active-backup miimon 100 || echo "HVTEST-ERROR bond"
/usr/sbin/ip link add mgmt-br type bridge stp_state 0 forward_delay 0
/usr/sbin/ip link add ens3 type veth peer name peer3
/usr/sbin/ip link add ens4 type veth peer name peer4
/usr/sbin/ip link set ens3 master mgmt-bo; /usr/sbin/ip link set ens4 master mgmt-bo; /usr/sbin/ip link set mgmt-bo master mgmt-br
for l in ens3 ens4 mgmt-bo mgmt-br; do /usr/sbin/ip link set $l up; done
/usr/sbin/ip addr add 10.0.0.5/24 dev mgmt-br
/usr/sbin/ip route add default via 10.0.0.1 dev mgmt-br onlink
mkdir -p /agent/etc/hvagent /agent/oem
printf 'install:\n  mode: create\n  managementinterface:\n    interfaces:\n    - name: ens3\n    - name: ens4\n    method: static\n    ip: 10.0.0.5\n    subnetmask: 255.255.255.0\n    gateway: 10.0.0.1\n' > /agent/oem/harvester.config
hv() {
  echo "HVTEST-T $(cut -d' ' -f1 /proc/uptime) start $1"
  printf 'backoff: {initial: 200ms, max: 1s}\nguards:\n  network-online:\n    deadline: %s\n    stableMs: 1500\n    pollWindowMs: 3000\n' "$2" > /agent/etc/hvagent/config.yaml
  node /hv/dist/agent/cli.js once --guard network-online --root /agent 2>/tmp/$1.log
  echo "HVTEST-RESULT $1 exit=$?"
  echo "HVTEST-STATUS $1 $(tr -d '\n' < /agent/run/hvagent/status.json)"
  grep -o '"missing":"[^"]*"' /tmp/$1.log | sort -u | sed "s/^/HVTEST-MISSING $1 /"
  rm -f /agent/run/hvagent/status.json
}
# Node starts slowly under TCG: act only once the agent has seen both slaves down (bounded).
agent_saw_down() { i=0; while ! grep -q '"missing":"bond mgmt-bo: 0 of 2' /tmp/$1.log 2>/dev/null && [ $i -lt 900 ]; do sleep 0.2; i=$((i+1)); done; }
# 1. both switch ports down: no slave has carrier
hv down 4s
# 2. one port comes up late
(agent_saw_down late; sleep 1; /usr/sbin/ip link set peer3 up || echo "HVTEST-ERROR peer3 up") &
hv late 40s
wait
/usr/sbin/ip -br link | sed 's/^/HVTEST-LINK /'
/usr/sbin/ip -d link show ens3 | sed 's/^/HVTEST-LINK /'
# 3. the port flaps while the agent waits, then settles
/usr/sbin/ip link set peer3 down; sleep 1
(agent_saw_down flap; i=0
 while [ $i -lt 60 ]; do
  /usr/sbin/ip link set peer3 up; sleep 0.4; /usr/sbin/ip link set peer3 down; sleep 0.4; i=$((i+1))
  [ $i -ge 3 ] && grep -q 'flapped while settling' /tmp/flap.log && break
 done
 /usr/sbin/ip link set peer3 up; /usr/sbin/ip link set peer4 up) &
hv flap 40s
wait
echo "HVTEST-FLAPPED flap $(grep -c 'flapped while settling' /tmp/flap.log)"
sed 's/^/HVTEST-LOG flap /' /tmp/flap.log
echo HVTEST-DONE
${POWEROFF_AFTER_OUTPUT}
`;

let work: string;
let console_ = '';

function status(name: string): StatusDocument {
  const line = console_.split('\n').find((l) => l.startsWith(`HVTEST-STATUS ${name} `));
  if (!line) throw new Error(`no status for ${name} in the guest output:\n${console_.slice(-3000)}`);
  return JSON.parse(line.slice(`HVTEST-STATUS ${name} `.length).trim()) as StatusDocument;
}
const exitOf = (name: string) => new RegExp(`HVTEST-RESULT ${name} exit=(\\d+)`).exec(console_)?.[1];
const missingOf = (name: string) => console_.split('\n').filter((l) => l.startsWith(`HVTEST-MISSING ${name} `)).map((l) => l.slice(`HVTEST-MISSING ${name} "missing":"`.length).replace(/"\s*$/, ''));

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'hvagent-bond-'));
  const img = await buildBondGuest(work, path.resolve('.'), SCRIPT);
  console_ = (await bootGuest(img, 12 * 60_000)).replace(/\r/g, '');
  if (process.env.HV_KEEP_CONSOLE) await writeFile(process.env.HV_KEEP_CONSOLE, console_);
}, 15 * 60_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('network-online with a real bond (QEMU guest)', () => {
  it('the guest ran every scenario', () => {
    expect(console_).not.toContain('HVTEST-ERROR');
    expect(console_).toContain('HVTEST-DONE');
  });

  it('diagnoses a bond with no active slave when both switch ports stay down', () => {
    expect(exitOf('down')).toBe('1');
    expect(status('down').guards[0]!.lastError).toMatch(/^not reached within 4 s \(\d+ attempts?\): bond mgmt-bo: 0 of 2 slaves active \(ens3: no carrier, ens4: no carrier\)$/);
  });

  it('waits for a slave whose carrier comes up late', () => {
    expect(exitOf('late')).toBe('0');
    expect(status('late').guards[0]!.detail).toBe('mgmt-br 10.0.0.5/24, default via 10.0.0.1, bond mgmt-bo 1/2 slaves active');
    expect(missingOf('late')).toContain('bond mgmt-bo: 0 of 2 slaves active (ens3: no carrier, ens4: no carrier)');
  });

  it('waits out a flapping slave and reports online once it settles', () => {
    expect(exitOf('flap')).toBe('0');
    expect(status('flap').guards[0]).toMatchObject({ phase: 'succeeded' });
    expect(status('flap').guards[0]!.detail).toMatch(/^mgmt-br 10\.0\.0\.5\/24, default via 10\.0\.0\.1, bond mgmt-bo 1\/2 slaves active$/);
    // The agent saw the link come and go while settling (a slave down at a look, or the bond's link
    // failure count grown between two looks) and did not report online until it held steady.
    expect(Number(/HVTEST-FLAPPED flap (\d+)/.exec(console_)?.[1])).toBeGreaterThan(0);
    expect(missingOf('flap').every((m) => /^bond mgmt-bo: (0 of 2 slaves active|a slave lost its link \(link failures \d+ -> \d+\))/.test(m))).toBe(true);
  });
});
