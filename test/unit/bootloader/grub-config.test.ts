import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  bootEntries,
  kernelCmdline,
  oemGrubenvVars,
  renderEarlyCfg,
  renderGrubCfg,
  stateGrubenvVars,
} from '../../../installer/bootloader/grub-config.js';
import { duplicateLabels } from '../../../installer/bootloader/labels.js';

/** grub-script-check (grub-common) parses a config the way grub does. */
async function grubSyntaxErrors(text: string): Promise<string | undefined> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hv-grubcheck-'));
  try {
    const f = path.join(dir, 'grub.cfg');
    await writeFile(f, text);
    const r = await execa('grub-script-check', [f], { reject: false });
    return r.exitCode === 0 ? undefined : `${r.stdout}${r.stderr}`;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('kernel command line (Harvester bootargs.cfg)', () => {
  it('boots active.img from COS_STATE with the installed parameters, console and third-party args last', () => {
    expect(kernelCmdline('active')).toBe(
      'root=LABEL=COS_STATE cos-img/filename=/cOS/active.img panic=0 net.ifnames=1 rd.cos.oemlabel=COS_OEM ' +
        'rd.cos.mount=LABEL=COS_OEM:/oem rd.cos.mount=LABEL=COS_PERSISTENT:/usr/local rd.cos.oemtimeout=120 ' +
        'audit=1 audit_backlog_limit=8192 intel_iommu=on amd_iommu=on iommu=pt console=tty1 ${third_party_kernel_args}',
    );
  });

  it('boots passive.img from COS_STATE and recovery.img from COS_RECOVERY', () => {
    expect(kernelCmdline('passive')).toMatch(/^root=LABEL=COS_STATE cos-img\/filename=\/cOS\/passive.img /);
    expect(kernelCmdline('recovery')).toMatch(/^root=LABEL=COS_RECOVERY cos-img\/filename=\/cOS\/recovery.img /);
  });

  it('uses install.tty for console=', () => {
    expect(kernelCmdline('active', 'ttyS0,115200')).toContain(' console=ttyS0,115200 ');
  });
});

describe('grub.cfg', () => {
  const cfg = renderGrubCfg({ tty: 'ttyS0' });

  it('is valid grub script', async () => {
    expect(await grubSyntaxErrors(cfg)).toBeUndefined();
    expect(await grubSyntaxErrors(renderEarlyCfg())).toBeUndefined();
  });

  it('the syntax check itself rejects broken scripts', async () => {
    expect(await grubSyntaxErrors('if [ x ; then\n')).toBeDefined();
  });

  it('lists active, passive, recovery in that order, falling back in the same order', () => {
    const ids = [...cfg.matchAll(/menuentry "[^"]+" --id (\w+)/g)].map((m) => m[1]);
    expect(ids).toEqual(['active', 'passive', 'recovery']);
    expect(cfg).toContain('set default=0');
    expect(cfg).toContain('set fallback="1 2"');
  });

  it('loop-mounts each image from its partition and passes its command line', () => {
    for (const e of bootEntries({ tty: 'ttyS0' })) {
      expect(cfg).toContain(`loopback hv${e.id} ($${e.deviceVar})${e.image}`);
      expect(cfg).toContain(`linux (hv${e.id})/boot/vmlinuz ${e.cmdline}`);
      expect(cfg).toContain(`initrd (hv${e.id})/boot/initrd`);
    }
    expect(cfg).toContain('console=ttyS0');
  });

  it('reads COS_OEM/grubenv: a one-shot next_entry (cleared), else saved_entry', () => {
    expect(cfg).toContain('load_env -f ($hv_dev_oem)/grubenv');
    expect(cfg).toMatch(/if \[ -n "\$next_entry" \]; then\s+set default="\$next_entry"\s+set next_entry=\s+save_env -f \(\$hv_dev_oem\)\/grubenv next_entry/);
    expect(cfg).toMatch(/elif \[ -n "\$saved_entry" \]; then\s+set default="\$saved_entry"/);
    expect(cfg).toContain('export third_party_kernel_args');
  });

  it('finds partitions by label and refuses to boot automatically on duplicates', () => {
    expect(cfg).toContain('hv_find_label COS_STATE hv_dev_state');
    expect(cfg).toContain('hv_find_label COS_OEM hv_dev_oem');
    expect(cfg).toContain('hv_find_label COS_RECOVERY hv_dev_recovery');
    expect(cfg).toContain('for hv_d in (*,*); do');
    expect(cfg).toContain('probe --set=hv_l --label "$hv_d"');
    expect(cfg).toMatch(/the filesystem label \$1 is on more than one device/);
    expect(cfg).toMatch(/if \[ -n "\$hv_label_error" \]; then\s+#[^\n]*\n\s+set timeout=-1/);
  });

  it('sources COS_OEM/grubcustom when present', () => {
    expect(cfg).toMatch(/if \[ -f \(\$hv_dev_oem\)\/grubcustom \]; then\s+source \(\$hv_dev_oem\)\/grubcustom/);
  });
});

describe('early.cfg', () => {
  const early = renderEarlyCfg();
  it('finds COS_STATE (refusing duplicates) and loads grub2/grub.cfg from it', () => {
    expect(early).toContain('hv_find_label COS_STATE hv_dev_state');
    expect(early).toContain('set prefix="($hv_dev_state)/grub2"');
    expect(early).toContain('configfile "($hv_dev_state)/grub2/grub.cfg"');
    expect(early).toMatch(/boot stopped: duplicate label/);
    expect(early).toMatch(/no filesystem labelled COS_STATE was found/);
  });
});

describe('grub environments', () => {
  it('COS_OEM/grubenv carries third_party_kernel_args and empty entry knobs', () => {
    expect(oemGrubenvVars('nomodeset')).toEqual({ third_party_kernel_args: 'nomodeset', next_entry: '', saved_entry: '' });
  });
  it("COS_STATE/grub_oem_env names every label, as Elemental's tooling expects", () => {
    expect(stateGrubenvVars()).toMatchObject({ state_label: 'COS_STATE', passive_label: 'COS_PASSIVE', system_label: 'COS_SYSTEM', oem_label: 'COS_OEM' });
  });
});

describe('duplicateLabels', () => {
  it('reports only labels on more than one device', () => {
    expect(duplicateLabels({ COS_STATE: ['/dev/sda4', '/dev/sdb4'], COS_OEM: ['/dev/sda2'], COS_RECOVERY: [] })).toEqual([
      { label: 'COS_STATE', devices: ['/dev/sda4', '/dev/sdb4'] },
    ]);
  });
});
