import { describe, expect, it } from 'vitest';
import { chooseBootChain, describeBootChain, espFiles, espName, grubEntryName, patchNoFloppy } from '../../../installer/bootloader/image-chain.js';
import { HvError } from '../../../lib/errors.js';

// As Debian's shim-signed installs them: it pulls in shim-unsigned, whose unsigned builds sit
// beside the signed ones (sorted by name, the unsigned come first).
const DEBIAN = [
  'etc/cos/grub.cfg', 'etc/cos/bootargs.cfg',
  'usr/lib/shim/fbx64.efi', 'usr/lib/shim/mmx64.efi', 'usr/lib/shim/shimx64.efi',
  'usr/lib/shim/shimx64.efi.signed', 'usr/lib/shim/mmx64.efi.signed',
  'usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed',
  'usr/lib/grub/x86_64-efi/loopback.mod', 'usr/lib/grub/x86_64-efi/squash4.mod', 'usr/lib/grub/x86_64-efi/xzio.mod', 'usr/lib/grub/x86_64-efi/linux.mod',
];
const SUSE = [
  '/etc/cos/grub.cfg', '/etc/cos/bootargs.cfg',
  '/usr/share/efi/x86_64/shim.efi', '/usr/share/efi/x86_64/grub.efi', '/usr/share/efi/x86_64/MokManager.efi',
  '/usr/share/grub2/x86_64-efi/loopback.mod', '/usr/share/grub2/x86_64-efi/squash4.mod', '/usr/share/grub2/x86_64-efi/xzio.mod',
];

function refusal(paths: string[]): HvError {
  try {
    chooseBootChain(paths, '/src');
  } catch (e) {
    return e as HvError;
  }
  throw new Error('no refusal');
}

describe('chooseBootChain', () => {
  it("picks a Debian tree's signed binaries, config and modules", () => {
    expect(chooseBootChain(DEBIAN, '/src')).toEqual({
      kind: 'image',
      shim: '/usr/lib/shim/shimx64.efi.signed',
      grub: '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed',
      mokManager: '/usr/lib/shim/mmx64.efi.signed',
      grubCfg: '/etc/cos/grub.cfg',
      bootargsCfg: '/etc/cos/bootargs.cfg',
      modules: ['/usr/lib/grub/x86_64-efi/loopback.mod', '/usr/lib/grub/x86_64-efi/squash4.mod', '/usr/lib/grub/x86_64-efi/xzio.mod'],
    });
  });

  it("picks SUSE's names (Harvester's image)", () => {
    const c = chooseBootChain(SUSE, '/src');
    expect(c).toMatchObject({ kind: 'image', shim: '/usr/share/efi/x86_64/shim.efi', grub: '/usr/share/efi/x86_64/grub.efi', mokManager: '/usr/share/efi/x86_64/MokManager.efi' });
  });

  it('keeps the own chain for a tree with none of it, saying why; modules alone do not count', () => {
    expect(chooseBootChain(['/usr/lib/grub/x86_64-efi/loopback.mod', '/usr/lib/shim/mmx64.efi.signed'], '/src')).toEqual({ kind: 'own', why: '/src carries no /etc/cos/grub.cfg, shim or grub EFI binary' });
  });

  it('ignores binaries outside the distributions\' directories', () => {
    expect(chooseBootChain(['/home/u/shimx64.efi', '/opt/grubx64.efi'], '/src').kind).toBe('own');
  });

  it('refuses a shim without grub, naming what is there and what is missing', () => {
    const e = refusal(DEBIAN.filter((p) => !p.includes('grubx64')));
    expect(e).toBeInstanceOf(HvError);
    expect(e.message).toBe('/src carries an incomplete boot chain: it has /etc/cos/grub.cfg, /usr/lib/shim/shimx64.efi.signed but not a grub EFI binary (grub.efi, grubx64.efi, grubx64.efi.signed)');
    expect(e.hint).toMatch(/add what is missing to the image, or remove the partial chain/);
    expect(e.exitCode).toBe(2);
  });

  it('refuses grub without shim or config', () => {
    const e = refusal(['/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed']);
    expect(e.message).toContain('it has /usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed but not the grub config /etc/cos/grub.cfg; the kernel arguments /etc/cos/bootargs.cfg; a shim');
    expect(e.message).toContain('the grub module loopback.mod (in /usr/share/grub2/x86_64-efi or /usr/lib/grub2/x86_64-efi or /usr/lib/grub/x86_64-efi)');
  });

  it('refuses a missing module, and a missing MokManager', () => {
    expect(refusal(DEBIAN.filter((p) => !p.endsWith('xzio.mod'))).message).toMatch(/but not the grub module xzio\.mod \(in \/usr\/lib\/grub\/x86_64-efi\)$/);
    expect(refusal(DEBIAN.filter((p) => !p.includes('mmx64'))).message).toMatch(/but not a MokManager \(MokManager\.efi, mmx64\.efi, mmx64\.efi\.signed\)$/);
  });
});

describe('the ESP layout', () => {
  it("puts the shim at the removable path and beside grub in EFI/elemental, with Debian's .signed dropped", () => {
    const c = chooseBootChain(DEBIAN, '/src');
    if (c.kind !== 'image') throw new Error('image chain expected');
    const to = Object.fromEntries(espFiles(c).map((f) => [f.to, f.from]));
    expect(to).toEqual({
      '::/EFI/BOOT/bootx64.efi': '/usr/lib/shim/shimx64.efi.signed',
      '::/EFI/BOOT/grubx64.efi': '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed',
      '::/EFI/BOOT/mmx64.efi': '/usr/lib/shim/mmx64.efi.signed',
      '::/EFI/BOOT/grub.cfg': 'stub',
      '::/EFI/elemental/shimx64.efi': '/usr/lib/shim/shimx64.efi.signed',
      '::/EFI/elemental/grubx64.efi': '/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed',
      '::/EFI/elemental/mmx64.efi': '/usr/lib/shim/mmx64.efi.signed',
      '::/EFI/elemental/grub.cfg': 'stub',
    });
    expect(espName('/usr/share/efi/x86_64/grub.efi')).toBe('grub.efi');
    expect(describeBootChain(c)).toBe("the image's own: shim /usr/lib/shim/shimx64.efi.signed, grub /usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed, /etc/cos/grub.cfg (Elemental's layout, EFI/elemental)");
    expect(describeBootChain({ kind: 'own', why: 'x' })).toBe("hvinstall's own grub (x)");
  });
});

describe('patchNoFloppy (Harvester)', () => {
  it('adds --no-floppy to every search, expands the short forms and a positional root', () => {
    const cfg = [
      'search --label "${oem_label}" --set oem_blk',
      '  search.fs_label COS_RECOVERY root',
      'search.file /cOS/active.img',
      'search.fs_uuid 1234-ABCD',
      '# search here is a comment',
      'if true; then search --file /x; fi',
      'search --no-floppy --label COS_STATE --set root',
      'set research=1',
    ].join('\n');
    expect(patchNoFloppy(cfg).split('\n')).toEqual([
      'search --no-floppy --label "${oem_label}" --set oem_blk',
      '  search --set=root --no-floppy --label COS_RECOVERY',
      'search --no-floppy --file /cOS/active.img',
      'search --no-floppy --fs-uuid 1234-ABCD',
      '# search here is a comment',
      'if true; then search --no-floppy --file /x; fi',
      'search --no-floppy --label COS_STATE --set root',
      'set research=1',
    ]);
  });

  it('is idempotent', () => {
    const once = patchNoFloppy('search.fs_label X root\nsearch --label Y --set y\n');
    expect(patchNoFloppy(once)).toBe(once);
  });

  it('leaves `--set root` as it is (the variable is named, not positional)', () => {
    expect(patchNoFloppy('  search --label "${recovery_label}" --set root')).toBe('  search --no-floppy --label "${recovery_label}" --set root');
  });
});

describe('grubEntryName', () => {
  it('reads GRUB_ENTRY_NAME unquoted; the last one wins; none gives undefined', () => {
    expect(grubEntryName('NAME=x\nGRUB_ENTRY_NAME="Harvester v1.8.0"\n')).toBe('Harvester v1.8.0');
    expect(grubEntryName("GRUB_ENTRY_NAME=a\nGRUB_ENTRY_NAME='b c'\n")).toBe('b c');
    expect(grubEntryName('NAME=x\n')).toBeUndefined();
    expect(grubEntryName(undefined)).toBeUndefined();
  });
});
