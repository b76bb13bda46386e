import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';

/** Labels that appear on more than one device, with the devices. Pure: for messages and tests. */
export function duplicateLabels(found: Record<string, readonly string[]>): Array<{ label: string; devices: readonly string[] }> {
  return Object.entries(found)
    .filter(([, devs]) => devs.length > 1)
    .map(([label, devices]) => ({ label, devices }));
}

/**
 * The devices carrying each of `labels`, from one fresh blkid run over all devices (or `among`):
 * one probe of every device instead of one per label.
 */
export async function devicesWithLabels(labels: readonly string[], among?: readonly string[]): Promise<Record<string, string[]>> {
  const r = await run('blkid', ['-c', '/dev/null', '-o', 'export', ...(among ?? [])], { allowFailure: true, timeoutMs: 60_000 });
  // blkid exits 2 when it finds no signature at all: that is an answer, not a failure.
  if (r.exitCode !== 0 && r.exitCode !== 2) {
    throw new HvError(`blkid failed while looking for the labels ${labels.join(', ')} (exit ${r.exitCode})`, {
      where: r.command,
      hint: r.stderr.trim() || 'check that util-linux is installed',
      exitCode: ExitCode.installFailed,
    });
  }
  return labelledDevices(r.stdout, labels);
}

/** `blkid -o export` output -> the devices (sorted, once each) carrying each label. Pure. */
export function labelledDevices(blkidExport: string, labels: readonly string[]): Record<string, string[]> {
  const found: Record<string, Set<string>> = Object.fromEntries(labels.map((l) => [l, new Set<string>()]));
  for (const block of blkidExport.split(/\n\s*\n/)) {
    const fields = new Map(block.split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const));
    const label = fields.get('LABEL');
    const dev = fields.get('DEVNAME');
    if (label !== undefined && dev && Object.hasOwn(found, label)) found[label]!.add(dev);
  }
  return Object.fromEntries(Object.entries(found).map(([l, devs]) => [l, [...devs].sort()]));
}

/**
 * The installer's own check behind grub's: every boot label must resolve to exactly one device,
 * or the firmware, grub and the initramfs may each pick a different one.
 */
export async function assertLabelsUnique(labels: readonly string[], among?: readonly string[]): Promise<void> {
  const found = await devicesWithLabels(labels, among);
  const dups = duplicateLabels(found);
  if (dups.length > 0) {
    const what = dups.map((d) => `${d.label} on ${d.devices.join(', ')}`).join('; ');
    throw new HvError(`duplicate filesystem labels: ${what}`, {
      where: 'bootloader: label check (blkid)',
      hint: 'another disk carries the same COS_* label (an old install, a USB stick, a multipath path): detach it, or clear its label (tune2fs -L "" / wipefs) and re-run',
      exitCode: ExitCode.installFailed,
    });
  }
  const missing = Object.entries(found).filter(([, d]) => d.length === 0).map(([l]) => l);
  if (missing.length > 0) {
    throw new HvError(`no device carries the label(s) ${missing.join(', ')}`, {
      where: 'bootloader: label check (blkid)',
      hint: 'the partitions were not formatted with their labels; re-run the install from the partition step',
      exitCode: ExitCode.installFailed,
    });
  }
}
