import { describe, expect, it } from 'vitest';
import { chrootCommands, chrootMounts, fileContextsPath, outputTail, selinuxPolicyType, setfilesArgs } from '../../../installer/steps/chroot-plan.js';

describe('after-install-chroot decisions', () => {
  it('runs the config commands in order, blank ones dropped; none when the key is absent', () => {
    expect(chrootCommands({ os: { afterInstallChrootCommands: ['echo a', '  ', '', 'rm -f /etc/x'] } } as never)).toEqual(['echo a', 'rm -f /etc/x']);
    expect(chrootCommands({} as never)).toEqual([]);
  });

  it('binds the kernel filesystems first, then COS_OEM at /oem and COS_PERSISTENT at /usr/local', () => {
    expect(chrootMounts({ oem: '/r/mnt/cos_oem', persistent: '/r/mnt/cos_persistent' })).toEqual([
      { target: '/dev', source: '/dev' },
      { target: '/proc', source: '/proc' },
      { target: '/sys', source: '/sys' },
      { target: '/run', source: '/run' },
      { target: '/oem', source: '/r/mnt/cos_oem' },
      { target: '/usr/local', source: '/r/mnt/cos_persistent' },
    ]);
  });

  it('reads the SELinux policy type; disabled, unset or odd values mean no relabel', () => {
    expect(selinuxPolicyType('# comment\nSELINUX=permissive\nSELINUXTYPE=targeted\n')).toBe('targeted');
    expect(selinuxPolicyType('SELINUX = enforcing\nSELINUXTYPE = "mls" # strict\n')).toBe('mls');
    expect(selinuxPolicyType('SELINUX=disabled\nSELINUXTYPE=targeted\n')).toBeUndefined();
    expect(selinuxPolicyType('SELINUX=enforcing\n')).toBeUndefined();
    expect(selinuxPolicyType('SELINUXTYPE=../../etc\n')).toBeUndefined();
    expect(fileContextsPath('targeted')).toBe('/etc/selinux/targeted/contexts/files/file_contexts');
  });

  it('setfiles excludes every bound mount and labels from /', () => {
    expect(setfilesArgs('/etc/selinux/targeted/contexts/files/file_contexts', ['/dev', '/oem'])).toEqual(['-F', '-e', '/dev', '-e', '/oem', '/etc/selinux/targeted/contexts/files/file_contexts', '/']);
  });

  it('keeps the last lines of a command output', () => {
    const text = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const tail = outputTail(text, 3);
    expect(tail).toBe('line 28\nline 29\nline 30');
  });
});
