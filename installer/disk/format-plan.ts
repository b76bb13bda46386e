/** The human form of an InstallPlan, as `hvinstall plan` prints it. Pure. */
import { formatBytes, MiB } from '../../config/disk-sizes.js';
import type { InstallPlan } from './types.js';
import { describeBootChain } from '../bootloader/image-chain.js';
import { bootEntrySkipReason, planBootEntry } from '../bootloader/boot-entry.js';
import { formatDiskChoice } from '../preflight/disk-select.js';

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd());
}

export function formatPlanText(plan: InstallPlan): string {
  const out: string[] = [];
  out.push(
    `Target ${plan.device}: ${formatBytes(plan.deviceSizeBytes)}, ${plan.logicalSectorSize}-byte sectors, ${plan.table === 'gpt' ? 'GPT' : 'msdos (MBR)'}, ${plan.firmware === 'efi' ? 'UEFI' : 'legacy BIOS'} boot`,
  );
  out.push(`Mode ${plan.mode}, role ${plan.role}; active.img ${plan.systemSizeMiB} MiB`);
  if (plan.diskChoices?.length) out.push('', 'Disks chosen by rule (* taken):', ...plan.diskChoices.flatMap((c) => formatDiskChoice(c).map((l) => `  ${l}`)));
  out.push('');
  out.push('Partitions:');
  const rows = [['#', 'start', 'size', 'label', 'fs', 'type', 'mount']];
  for (const p of plan.partitions) {
    rows.push([
      String(p.number),
      `${p.startBytes / MiB} MiB`,
      formatBytes(p.sizeBytes),
      p.label ?? `(${p.name})`,
      p.fs === 'none' ? '-' : p.fs,
      `${p.typeCode}${p.bootable ? ' boot' : ''}`,
      p.mount ?? '-',
    ]);
  }
  out.push(...table(rows).map((l) => `  ${l}`));
  if (plan.dataDisk) {
    out.push('');
    out.push(`Data disk ${plan.dataDisk.path} (${formatBytes(plan.dataDisk.sizeBytes)}): formatted whole, ext4 ${plan.dataDisk.label}, mounted at ${plan.dataDisk.mount}`);
  }
  if (plan.wipeDisks.length) {
    out.push('');
    out.push(`Wiped (partition table zapped): ${plan.wipeDisks.join(', ')}`);
  }
  out.push('');
  out.push('Images:');
  out.push(...table([['file', 'on', 'label', 'fs', 'size'], ...plan.images.map((i) => [i.file, i.on, i.label, i.fs, `${i.sizeMiB} MiB`])]).map((l) => `  ${l}`));
  out.push('');
  out.push('Files:');
  out.push(...table(plan.files.map((f) => [`${f.on}:/${f.path}`, f.mode.toString(8).padStart(4, '0'), f.what])).map((l) => `  ${l}`));
  out.push(`  COS_PERSISTENT:/.state/<path>.bind for ${plan.persistentStatePaths.length} persistent paths`);
  out.push('');
  const chain = plan.bootChain ?? { kind: 'own' as const, why: 'no --source to look at' };
  out.push(`Boot chain: ${describeBootChain(chain)}`);
  const esp = plan.partitions.find((p) => p.role === 'efi');
  if (plan.firmware === 'efi' && esp) {
    const entry = planBootEntry(chain, plan.device, esp.number);
    const skip = bootEntrySkipReason(plan.device);
    out.push(skip ? `Boot entry: none (${skip})` : `Boot entry: UEFI "${entry.label}" -> ${entry.loader} on ${entry.disk} partition ${entry.partition}, first in BootOrder (when efivarfs is there; the removable path EFI/BOOT/BOOTX64.EFI stays)`);
  }
  out.push('');
  out.push('Steps:');
  plan.steps.forEach((s, i) => out.push(`  ${String(i + 1).padStart(2)}. ${s.name.padEnd(10)} ${s.description}`));
  if (plan.notes.length) {
    out.push('');
    out.push('Notes:');
    for (const n of plan.notes) out.push(`  - ${n}`);
  }
  out.push('');
  out.push('Destroys everything on:');
  for (const d of plan.destroys) out.push(`  - ${d}`);
  return out.join('\n') + '\n';
}
