/**
 * hvinstall plan and install from a source that carries an Elemental boot chain (root, loop
 * devices): the plan and the install log name the choice; the ESP holds the image's signed shim
 * as EFI/BOOT/bootx64.efi (sbverify), grub and MokManager beside it and in EFI/elemental, the
 * small search/configfile grub.cfg; COS_STATE holds the image's grub.cfg with --no-floppy, the
 * modules, grub_oem_env with default_menu_entry and the debug grubcustom. Incomplete chains and a
 * grub.cfg that does not parse are refused before any disk is touched.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { readFile, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Cleanup, buildSmallOsTree, configYaml, diskSnapshot, diskWithFilesystem, events, hvinstall, installArgs, loopDisk, partitionNode, probe, sh, tempDir, testCleanup, withMount } from './helpers.js';
import { addImageChain, GRUB_ENTRY, FIXTURE, type ChainParts } from '../bootloader/image-chain-tree.js';

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('integration tests need root');
});

const mtoolsEnv = { MTOOLS_SKIP_CHECK: '1' };

async function partitionByLabel(disk: string, label: string): Promise<string> {
  for (let n = 1; n <= 8; n++) if ((await probe(partitionNode(disk, n))).LABEL === label) return partitionNode(disk, n);
  throw new Error(`no ${label} on ${disk}`);
}

async function espFile(esp: string, file: string, dir: string): Promise<Buffer> {
  const out = path.join(dir, 'esp-file');
  await rm(out, { force: true });
  await execa('mcopy', ['-n', '-i', esp, file, out], { env: mtoolsEnv });
  return readFile(out);
}

async function grubenv(file: string): Promise<Record<string, string>> {
  const text = (await sh('grub-editenv', [file, 'list'])).stdout;
  return Object.fromEntries(text.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

async function chainSource(dir: string, parts: ChainParts = {}) {
  const tree = await buildSmallOsTree(dir);
  const chain = await addImageChain(tree, parts);
  return { tree, chain };
}

// Each test on disks, directories and a server of its own, most of its time waiting on tools and
// the disk: the tests run side by side (a Cleanup each, run when the test ends).
describe.concurrent('hvinstall with the image boot chain', () => {
  it('plans and installs the image chain in Elemental\'s layout, from a squashfs source', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const { tree, chain } = await chainSource(dir);
    const source = path.join(dir, 'os.squashfs');
    await sh('mksquashfs', [tree, source, '-noappend', '-quiet', '-comp', 'gzip']);
    const config = path.join(dir, 'config.yaml');
    await writeConfig(config, disk);
    const plan = await hvinstall(['plan', '--config', config, '--source', source]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain(`Boot chain: the image's own: shim /usr/lib/shim/shimx64.efi.signed, grub /usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed, /etc/cos/grub.cfg (Elemental's layout, EFI/elemental)`);

    expect(plan.stdout).toContain(`Boot entry: none (${disk} is a loop device (a disk image): no firmware boots it by an NVRAM entry, so none is written; it boots through the removable path EFI/BOOT/BOOTX64.EFI)`);

    const r = await hvinstall(installArgs(config, source, path.join(dir, 'state'), ['--bundle', 'none']));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("boot chain: the image's own: shim /usr/lib/shim/shimx64.efi.signed");
    expect(r.stdout).toContain(`no UEFI boot entry: ${disk} is a loop device`);

    const esp = await partitionByLabel(disk, 'COS_GRUB');
    const listing = (await execa('mdir', ['-/', '-b', '-i', esp, '::/'], { env: mtoolsEnv })).stdout.split('\n').map((l) => l.toLowerCase());
    for (const f of ['::/efi/boot/bootx64.efi', '::/efi/boot/grubx64.efi', '::/efi/boot/mmx64.efi', '::/efi/boot/grub.cfg', '::/efi/elemental/shimx64.efi', '::/efi/elemental/grubx64.efi', '::/efi/elemental/mmx64.efi', '::/efi/elemental/grub.cfg']) {
      expect(listing).toContain(f);
    }
    const boot = await espFile(esp, '::/EFI/BOOT/BOOTX64.EFI', dir);
    expect(boot.equals(await readFile(chain.shim))).toBe(true);
    const sb = path.join(dir, 'bootx64.efi');
    await execa('cp', [path.join(dir, 'esp-file'), sb]);
    expect((await sh('sbverify', ['--list', sb])).stdout).toContain('Microsoft Corporation UEFI CA 2011');
    expect((await espFile(esp, '::/EFI/BOOT/grubx64.efi', dir)).equals(await readFile(chain.grub))).toBe(true);
    expect((await espFile(esp, '::/EFI/elemental/grubx64.efi', dir)).equals(await readFile(chain.grub))).toBe(true);
    expect((await espFile(esp, '::/EFI/elemental/shimx64.efi', dir)).equals(await readFile(chain.shim))).toBe(true);
    expect((await espFile(esp, '::/EFI/BOOT/mmx64.efi', dir)).equals(await readFile(chain.mokManager))).toBe(true);
    const stub = (await espFile(esp, '::/EFI/BOOT/grub.cfg', dir)).toString();
    expect(stub.split('\n')).toEqual(['search --no-floppy --label --set=root COS_STATE', 'set prefix=($root)/grub2', 'configfile ($root)/grub2/grub.cfg', '']);
    await sh('fsck.vfat', ['-n', esp]);

    const state = await withMount(await partitionByLabel(disk, 'COS_STATE'), dir, async (m) => ({
      grubCfg: await readFile(path.join(m, 'grub2/grub.cfg'), 'utf8'),
      modules: (await readdir(path.join(m, 'grub2/x86_64-efi'))).sort(),
      loopback: await readFile(path.join(m, 'grub2/x86_64-efi/loopback.mod')),
      oemEnv: await grubenv(path.join(m, 'grub_oem_env')),
      custom: await readFile(path.join(m, 'grubcustom'), 'utf8'),
      check: (await sh('grub-script-check', [path.join(m, 'grub2/grub.cfg')], { allowFailure: true })).code,
    }));
    const original = await readFile(path.join(FIXTURE, 'grub.cfg'), 'utf8');
    // The image's file, with --no-floppy on its two search lines and nothing else changed.
    const expected = original
      .replace('\nsearch --label "${oem_label}" --set oem_blk\n', '\nsearch --no-floppy --label "${oem_label}" --set oem_blk\n')
      .replace('\n  search.fs_label "${recovery_label}" root\n', '\n  search --set=root --no-floppy --label "${recovery_label}"\n');
    expect(expected).not.toBe(original);
    expect(state.grubCfg).toBe(expected);
    expect(state.check).toBe(0);
    expect(state.modules).toEqual(['loopback.mod', 'squash4.mod', 'xzio.mod']);
    expect(state.loopback.equals(await readFile('/usr/lib/grub/x86_64-efi/loopback.mod'))).toBe(true);
    expect(state.oemEnv).toMatchObject({ default_menu_entry: GRUB_ENTRY, state_label: 'COS_STATE', oem_label: 'COS_OEM', recovery_label: 'COS_RECOVERY', passive_label: 'COS_PASSIVE' });
    expect(state.custom).toContain('"${display_name} (debug)" --id debug');
    expect(state.custom).toContain('source (loop0)/etc/cos/bootargs.cfg');
  });

  it('killed before and after the bootloader step with the image chain, each re-run resumes; the final disk is identical', async ({ expect, onTestFinished }) => {
    const cleanup = testCleanup(onTestFinished);
    const dir = await tempDir(cleanup);
    const disk = await loopDisk(cleanup, dir, 'target', 260);
    const { tree } = await chainSource(dir);
    const config = path.join(dir, 'config.yaml');
    await writeConfig(config, disk);
    const args = installArgs(config, tree, path.join(dir, 'state'), ['--bundle', 'none']);
    const first = await hvinstall(args);
    expect(first.code, first.stderr).toBe(0);
    const baseline = await diskSnapshot(disk, dir);
    // before: the step is journaled as running with nothing done, so the re-run writes the chain
    // onto the fresh filesystems; after: it is done and the re-run starts at oem.
    for (const point of ['before:bootloader', 'after:bootloader']) {
      const killed = await hvinstall(args, { HVINSTALL_TEST_SIGKILL_AT: point });
      expect(killed.signal, `${point}: ${killed.stderr}`).toBe('SIGKILL');
      const again = await hvinstall(args);
      expect(again.code, again.stderr).toBe(0);
      const ran = events(again.stdout).filter((e) => e.type === 'step' && e.phase === 'done' && e.step !== 'guard').map((e) => e.step);
      expect(ran[0], point).toBe(point === 'before:bootloader' ? 'bootloader' : 'oem');
      expect(await diskSnapshot(disk, dir), point).toEqual(baseline);
    }
  }, 600_000);

  const refusals: Array<[string, ChainParts, RegExp]> = [
    ['a shim but no grub', { grub: false }, /carries an incomplete boot chain: it has \/etc\/cos\/grub.cfg, \/usr\/lib\/shim\/shimx64.efi.signed but not a grub EFI binary \(grub.efi, grubx64.efi, grubx64.efi.signed\)/],
    ['a grub but no shim', { shim: false, grubCfg: false }, /it has \/usr\/lib\/grub\/x86_64-efi-signed\/grubx64.efi.signed but not the grub config \/etc\/cos\/grub.cfg; a shim \(shim.efi, shimx64.efi, shimx64.efi.signed\)/],
    ['a missing module', { modules: ['loopback.mod', 'xzio.mod'] }, /but not the grub module squash4.mod \(in \/usr\/lib\/grub\/x86_64-efi\)/],
    ['a grub.cfg that does not parse', { grubCfg: 'menuentry "x" {\n  if [ 1 ]; then\n    echo broken\n}\n' }, /\/etc\/cos\/grub.cfg does not parse as a grub script: .*Syntax error/],
  ];
  for (const [what, parts, message] of refusals) {
    it(`refuses ${what} before any disk is touched`, async ({ expect, onTestFinished }) => {
      const cleanup = testCleanup(onTestFinished);
      const dir = await tempDir(cleanup);
      const disk = await loopDisk(cleanup, dir, 'target', 260);
      const { tree } = await chainSource(dir, parts);
      const config = path.join(dir, 'config.yaml');
      await writeConfig(config, disk);
      await diskWithFilesystem(disk, 'KEEPME');
      const before = await diskSnapshot(disk, dir);
      const plan = await hvinstall(['plan', '--config', config, '--source', tree]);
      expect(plan.code).toBe(2);
      expect(plan.stderr).toMatch(message);
      const r = await hvinstall(installArgs(config, tree, path.join(dir, 'state')));
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toMatch(/hint: /);
      expect(await diskSnapshot(disk, dir)).toEqual(before);
    });
  }
});

async function writeConfig(file: string, disk: string): Promise<void> {
  const { writeFile } = await import('node:fs/promises');
  await writeFile(file, configYaml({ device: disk, forceEfi: true }));
}
