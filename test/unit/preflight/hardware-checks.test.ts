/**
 * The memory and /dev/kvm checks at their boundaries, on facts varied from a fixture machine. The
 * figures are written out (64 GiB for production; MemTotal may read up to 10 % low), not taken from
 * the product's constants.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { checkDevKvm, checkMemory } from '../../../installer/preflight/checks/hardware.js';
import type { MachineFacts } from '../../../installer/preflight/index.js';
import { fixtureFacts } from './helpers.js';

const GiB = 1024 ** 3;
let base: MachineFacts;
beforeAll(async () => {
  base = await fixtureFacts('prod-nvme');
});

const memory = (bytes: number, source: MachineFacts['memorySource']) => ({ ...base, memoryBytes: bytes, memorySource: source });

describe('memory: DMI is the installed RAM, MemTotal gets the 10 % allowance', () => {
  it('MemTotal: 57.6 GiB (90 % of 64) passes production, one byte less does not', () => {
    expect(checkMemory(memory(Math.ceil(57.6 * GiB), 'meminfo'), 'production').result).toBe('pass');
    expect(checkMemory(memory(Math.ceil(57.6 * GiB) - 1, 'meminfo'), 'production').result).toBe('fail');
    expect(checkMemory(memory(Math.ceil(57.6 * GiB), 'meminfo'), 'production').threshold).toBe('>= 64GiB (MemTotal >= 57.6GiB)');
  });

  it('DMI: 60 GiB installed fails production (no allowance: the DMI figure is not read low), 64 GiB passes', () => {
    const sixty = checkMemory(memory(60 * GiB, 'dmi'), 'production');
    expect(sixty).toMatchObject({ result: 'fail', measured: '60GiB (installed, DMI)', threshold: '>= 64GiB' });
    expect(sixty.message).toBe('60GiB RAM detected. Harvester requires at least 64GiB for production use.');
    expect(checkMemory(memory(64 * GiB - 1, 'dmi'), 'production').result).toBe('fail');
    expect(checkMemory(memory(64 * GiB, 'dmi'), 'production').result).toBe('pass');
  });

  it('testing profile: DMI 31 GiB fails (32 needed), MemTotal 28.8 GiB warns (enough for testing)', () => {
    expect(checkMemory(memory(31 * GiB, 'dmi'), 'testing').result).toBe('fail');
    expect(checkMemory(memory(Math.ceil(28.8 * GiB), 'meminfo'), 'testing').result).toBe('warn');
    expect(checkMemory(memory(Math.ceil(28.8 * GiB) - 1, 'meminfo'), 'testing').result).toBe('fail');
  });
});

describe('/dev/kvm', () => {
  const kvm = (devKvm: boolean, vmx: boolean, svm: boolean) => ({ ...base, cpu: { ...base.cpu, devKvm, vmx, svm } });

  it('present without vmx/svm (a sandbox exposing the node without the CPU extensions) is a warning that points at the flags', () => {
    expect(checkDevKvm(kvm(true, false, false))).toMatchObject({
      result: 'warn',
      measured: 'present, but no vmx/svm',
      message: '/dev/kvm exists, but the CPU exposes neither vmx nor svm, so KVM cannot run guests here.',
      whatToDo: 'Fix the CPU virtualisation flags (see virt.cpu-flags).',
    });
  });

  it('present with vmx or svm passes; absent fails, naming the module to load for the CPU it has', () => {
    expect(checkDevKvm(kvm(true, true, false)).result).toBe('pass');
    expect(checkDevKvm(kvm(true, false, true)).result).toBe('pass');
    expect(checkDevKvm(kvm(false, true, false))).toMatchObject({ result: 'fail', whatToDo: 'Load the KVM module (modprobe kvm_intel); check dmesg if it refuses.' });
    expect(checkDevKvm(kvm(false, false, true)).whatToDo).toBe('Load the KVM module (modprobe kvm_amd); check dmesg if it refuses.');
  });
});
