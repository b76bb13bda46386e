/**
 * The UEFI boot entry of the installed disk, first in BootOrder (Elemental creates `elemental-shim`
 * and prepends it: rancher/elemental-toolkit pkg/bootloader/grub.go CreateEntry), so firmware that
 * boots by NVRAM entry rather than the removable path starts the installed system and not the
 * installer medium again. The removable path EFI/BOOT/BOOTX64.EFI stays: it is what boots when the
 * NVRAM is lost, full, or the disk moves to another machine. So the entry is best effort: a full or
 * refusing NVRAM is a warning with what to do, never a failed install. Planning is pure; the
 * effect is efibootmgr against efivarfs through run().
 */
import { readdir, stat } from 'node:fs/promises';
import { run } from '../../lib/exec.js';
import { EFI_VENDOR_DIR } from './grub-config.js';
import { espName, IMAGE_BOOT_ENTRY_LABEL, IMAGE_EFI_VENDOR_DIR, type BootChainChoice } from './image-chain.js';

export const EFI_SYSFS = '/sys/firmware/efi';
export const EFIVARS = `${EFI_SYSFS}/efivars`;
export const OWN_BOOT_ENTRY_LABEL = 'hvinstall';

export interface BootEntryPlan {
  label: string;
  /** The loader as firmware names it: a backslash path on the ESP. */
  loader: string;
  disk: string;
  partition: number;
}

/** The entry for a chain: the image's shim in EFI/elemental, or hvinstall's own grub in EFI/hvinstall. Pure. */
export function planBootEntry(chain: BootChainChoice, disk: string, espPartition: number): BootEntryPlan {
  if (chain.kind === 'image') {
    return { label: IMAGE_BOOT_ENTRY_LABEL, loader: `\\EFI\\${IMAGE_EFI_VENDOR_DIR}\\${espName(chain.shim)}`, disk, partition: espPartition };
  }
  return { label: OWN_BOOT_ENTRY_LABEL, loader: `\\EFI\\${EFI_VENDOR_DIR}\\grubx64.efi`, disk, partition: espPartition };
}

/** Why no entry is written for a target, or undefined when one is. Pure. */
export function bootEntrySkipReason(disk: string): string | undefined {
  if (/^\/dev\/loop\d+$/.test(disk)) return `${disk} is a loop device (a disk image): no firmware boots it by an NVRAM entry, so none is written; it boots through the removable path EFI/BOOT/BOOTX64.EFI`;
  return undefined;
}

/** The efibootmgr arguments that create the entry; efibootmgr puts a new entry first in BootOrder. Pure. */
export function createArgs(p: BootEntryPlan): string[] {
  return ['--create', '--disk', p.disk, '--part', String(p.partition), '--label', p.label, '--loader', p.loader];
}

/** The command an operator runs by hand to do what the install could not. Pure. */
export function manualCommand(p: BootEntryPlan): string {
  return `efibootmgr ${createArgs(p).map((a) => (/[\s\\]/.test(a) ? `'${a}'` : a)).join(' ')}`;
}

export interface EfiBootState {
  bootOrder: string[];
  entries: Array<{ num: string; label: string; active: boolean }>;
}

/** efibootmgr's listing: `BootOrder: 0003,0001` and `Boot0003* label<TAB>path` lines. Pure. */
export function parseEfibootmgr(text: string): EfiBootState {
  const state: EfiBootState = { bootOrder: [], entries: [] };
  for (const line of text.split('\n')) {
    const order = /^BootOrder:\s*(.*)$/.exec(line);
    if (order) state.bootOrder = order[1]!.split(',').map((s) => s.trim()).filter(Boolean);
    const entry = /^Boot([0-9A-Fa-f]{4})(\*?)\s+([^\t]*?)(\t.*)?$/.exec(line);
    if (entry) state.entries.push({ num: entry[1]!.toUpperCase(), label: entry[3]!.trim(), active: entry[2] === '*' });
  }
  return state;
}

/** Entries with our label from an earlier install: their partition is gone, they would boot nothing. Pure. */
export function staleEntries(state: EfiBootState, label: string): string[] {
  return state.entries.filter((e) => e.label === label).map((e) => e.num);
}

/** The BootOrder with `first` in front, or undefined when it already is. Pure. */
export function orderWithFirst(order: readonly string[], first: string): string[] | undefined {
  if (order[0] === first) return undefined;
  return [first, ...order.filter((n) => n !== first)];
}

/** What the operator reads when the firmware refused: why, and what to do. Pure. */
export function refusalWarning(p: BootEntryPlan, stderr: string): string {
  const said = stderr.trim().split('\n').slice(-1)[0] ?? '';
  const full = /No space left|ENOSPC|out of resources/i.test(stderr);
  const why = full ? 'the firmware NVRAM is full' : `the firmware refused the write (${said || 'no reason given'})`;
  return `no UEFI boot entry "${p.label}": ${why}. The disk still boots through the removable path EFI/BOOT/BOOTX64.EFI; ` +
    `${full ? 'delete stale entries (efibootmgr, then efibootmgr -b XXXX -B) and ' : ''}run \`${manualCommand(p)}\` from the installed system, or pick the disk in the firmware's boot menu`;
}

export type BootEntryOutcome =
  | { kind: 'created'; num: string; bootOrder: string[]; message: string }
  | { kind: 'skipped'; message: string }
  | { kind: 'warning'; message: string };

/**
 * Writes the entry: removes stale ones with the same label, creates it, makes sure it is first in
 * BootOrder. Never throws for the firmware's answers: each is an outcome to report.
 */
export async function writeBootEntry(p: BootEntryPlan, opts: { efiSysfs?: string } = {}): Promise<BootEntryOutcome> {
  const sysfs = opts.efiSysfs ?? EFI_SYSFS;
  if (!(await stat(sysfs).catch(() => undefined))) {
    return { kind: 'skipped', message: `no UEFI boot entry: ${sysfs} is absent (legacy BIOS boot, or no UEFI runtime services); the disk boots through the removable path EFI/BOOT/BOOTX64.EFI. On a UEFI machine, run \`${manualCommand(p)}\` from the installed system` };
  }
  if ((await readdir(`${sysfs}/efivars`).catch(() => [])).length === 0) {
    return { kind: 'skipped', message: `no UEFI boot entry: efivarfs is not mounted at ${sysfs}/efivars (a container, or a live system without it): mount -t efivarfs efivarfs ${sysfs}/efivars and run \`${manualCommand(p)}\`; until then the disk boots through the removable path EFI/BOOT/BOOTX64.EFI` };
  }
  const list = await run('efibootmgr', [], { allowFailure: true, timeoutMs: 60_000 }).catch((e: Error) => ({ exitCode: -1, stdout: '', stderr: e.message }));
  if (list.exitCode !== 0) return { kind: 'warning', message: refusalWarning(p, list.stderr) };
  const before = parseEfibootmgr(list.stdout);
  for (const num of staleEntries(before, p.label)) {
    await run('efibootmgr', ['--bootnum', num, '--delete-bootnum'], { allowFailure: true, timeoutMs: 60_000 });
  }
  const created = await run('efibootmgr', createArgs(p), { allowFailure: true, timeoutMs: 60_000 });
  if (created.exitCode !== 0) return { kind: 'warning', message: refusalWarning(p, created.stderr) };
  const after = parseEfibootmgr(created.stdout);
  const known = new Set(before.entries.map((e) => e.num));
  const mine = after.entries.find((e) => e.label === p.label && !known.has(e.num)) ?? after.entries.find((e) => e.label === p.label);
  if (!mine) return { kind: 'warning', message: refusalWarning(p, 'efibootmgr reported success but the entry is not in its listing') };
  let order = after.bootOrder;
  const wanted = orderWithFirst(order, mine.num);
  if (wanted) {
    const set = await run('efibootmgr', ['--bootorder', wanted.join(',')], { allowFailure: true, timeoutMs: 60_000 });
    if (set.exitCode !== 0) return { kind: 'warning', message: `UEFI boot entry Boot${mine.num} "${p.label}" created but not first in BootOrder (${order.join(',')}): ${set.stderr.trim()}; run \`efibootmgr --bootorder ${wanted.join(',')}\`` };
    order = parseEfibootmgr(set.stdout).bootOrder;
  }
  return { kind: 'created', num: mine.num, bootOrder: order, message: `UEFI boot entry Boot${mine.num} "${p.label}" -> ${p.loader} on ${p.disk} partition ${p.partition}, BootOrder ${order.join(',')}; the removable path EFI/BOOT/BOOTX64.EFI stays` };
}
