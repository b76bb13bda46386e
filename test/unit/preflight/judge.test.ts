/**
 * judgeInstall: which machine an install is judged against. This machine by Harvester's gate; a disk
 * built for another machine by that machine's facts (its hardware, never its disks nor this
 * machine's), or a verdict that says plainly no machine was checked.
 */
import { describe, expect, it } from 'vitest';
import { gateDecision, gateEvent, gateRefusal, judgeInstall, nodeFactsFor } from '../../../installer/preflight/index.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { disk, machine } from '../disk/facts-fixture.js';

const config = (skipchecks = false): HarvesterConfig => ({
  schemeVersion: 1,
  install: { mode: 'create', device: '/dev/vda', skipchecks, managementInterface: { interfaces: [{ name: 'ens3' }], method: 'dhcp' } },
});

const big = machine([disk('vda', 500)]);
big.nics = [{ name: 'ens3', mac: '52:54:00:00:00:01', virtual: false, loopback: false, speedMbps: 10000, operState: 'up', carrier: true }];
/** A lab VM: 2 CPUs, 2 GiB, no VT-x, legacy BIOS. */
const lab = { ...big, cpu: { cores: 2, threads: 2, vmx: false, svm: false, devKvm: false }, memoryBytes: 2 * 1024 ** 3, firmware: { uefi: false } };

describe('judgeInstall', () => {
  it('this machine, automatic mode: a legacy-BIOS lab VM is refused even with skipchecks, and says nothing overrides BIOS', () => {
    for (const skip of [false, true]) {
      const v = judgeInstall({ kind: 'this-machine', mode: 'automatic', facts: lab }, config(skip));
      expect(v.checked).toBe('this machine');
      expect(v.gate.proceed).toBe(false);
      expect(gateDecision(v)).toBe('refused');
      expect(v.gate.blocking.map((c) => c.id)).toContain('firmware.uefi');
      expect(v.lines.some((l) => l.startsWith('FAIL firmware.uefi: legacy BIOS'))).toBe(true);
      expect(v.lines.at(-1)).toMatch(/^to go on: nothing overrides firmware.uefi/);
    }
  });

  it('this machine under UEFI: the small machine stops without skipchecks and goes on, overridden, with it', () => {
    const uefiLab = { ...lab, firmware: { uefi: true } };
    const stopped = judgeInstall({ kind: 'this-machine', mode: 'automatic', facts: uefiLab }, config(false));
    expect(stopped.gate.proceed).toBe(false);
    expect(stopped.gate.blocking.map((c) => c.id)).toEqual(['cpu.cores', 'memory', 'virt.cpu-flags', 'virt.kvm']);
    const through = judgeInstall({ kind: 'this-machine', mode: 'automatic', facts: uefiLab }, config(true));
    expect(through.gate.proceed).toBe(true);
    expect(gateDecision(through)).toBe('overridden');
    expect(through.lines).toContain('decision: preflight failures overridden by install.skipchecks: cpu.cores, memory, virt.cpu-flags, virt.kvm');
  });

  it('a machine that meets the minimums passes', () => {
    const v = judgeInstall({ kind: 'this-machine', mode: 'unattended', facts: big }, config());
    expect(gateDecision(v)).toBe('passed');
    expect(v.lines).toEqual(['decision: preflight passed']);
  });

  it('another machine without facts: proceeds, and says no machine was checked and what is assumed', () => {
    const v = judgeInstall({ kind: 'other-machine', why: '--device /dev/loop3 is a loop device' }, config());
    expect(v.report).toBeUndefined();
    expect(gateDecision(v)).toBe('unchecked');
    expect(v.gate.message).toMatch(/^no machine was checked: --device \/dev\/loop3 is a loop device/);
    expect(v.gate.message).toContain('computed for 8 CPUs');
    expect(v.gate.message).toContain('--facts FILE');
  });

  it("another machine with facts: its hardware is judged (not its disks: the target is this machine's loop device)", () => {
    const v = judgeInstall({ kind: 'other-machine', why: 'hvinstall image builds a disk image', facts: lab, factsFrom: 'lab.json' }, config(true));
    expect(v.checked).toBe('the facts in lab.json');
    expect(v.report!.checks.some((c) => c.id.startsWith('device.'))).toBe(false);
    expect(v.gate.proceed).toBe(false);
    expect(v.gate.blocking.map((c) => c.id)).toEqual(['firmware.uefi']);
    expect(v.lines[0]).toBe('checked: the facts in lab.json (hvinstall image builds a disk image)');
    const good = judgeInstall({ kind: 'other-machine', why: 'x', facts: big }, config());
    expect(gateDecision(good)).toBe('passed');
  });

  it("another machine's NICs are its own: a NIC it lacks is refused, whatever this machine has", () => {
    const noEns3 = { ...big, nics: [{ name: 'eth0', mac: '52:54:00:00:00:02', virtual: false, loopback: false, operState: 'up', carrier: true }] };
    const v = judgeInstall({ kind: 'other-machine', why: 'x', facts: noEns3 }, config(true));
    expect(v.gate.proceed).toBe(false);
    expect(v.gate.blocking.map((c) => `${c.id} ${c.subject}`)).toEqual(['nic.exists ens3']);
  });

  it('nodeFactsFor: none for this machine, the given facts, or a stand-in with no NIC and Harvester\'s minimum CPU count', () => {
    expect(nodeFactsFor({ kind: 'this-machine', mode: 'automatic', facts: big })).toBeUndefined();
    expect(nodeFactsFor({ kind: 'other-machine', why: 'x', facts: lab })).toBe(lab);
    const stand = nodeFactsFor({ kind: 'other-machine', why: 'x' })!;
    expect(stand.cpu.threads).toBe(8);
    expect(stand.nics).toEqual([]);
  });

  it('the refusal error and the event carry every line', () => {
    const v = judgeInstall({ kind: 'this-machine', mode: 'automatic', facts: lab }, config());
    const err = gateRefusal(v);
    expect(err.exitCode).toBe(1);
    expect(err.message).toMatch(/^install refused by Harvester's hardware gate \(this machine\); no disk was touched:\n/);
    for (const l of v.lines) expect(err.message).toContain(`  ${l}`);
    expect(gateEvent(v)).toEqual({ type: 'gate', decision: 'refused', checked: 'this machine', lines: v.lines });
  });
});
