/**
 * grub scripts for the Secure Boot chain (`boot: grub-signed`): firmware → Debian's signed shim →
 * Debian's signed grub network image (grubnetx64.efi.signed, which shim loads as grubx64.efi from
 * the TFTP directory it came from) → the signed kernel, which grub has shim verify.
 *
 * Debian builds that grub with prefix /grub and a built-in config that sources
 * `$prefix/x86_64-efi/grub.cfg`, else `$prefix/grub.cfg`, from the TFTP server of the DHCP answer
 * (debian/build-efi-images in Debian's grub2 package). Its module list has tftp but no http, so
 * everything after shim comes over TFTP from `hvpxe serve --tftp`: `grub/grub.cfg`, the same for
 * every machine, identifies the machine and sources `grub/auto?mac=…`, which hvpxe answers with
 * that machine's script (kernel and initrd by TFTP, the kernel arguments every chain shares in
 * kernel-args.ts), a local boot, or a message. Pure: every value is single-quoted, so nothing a
 * client sends or a profile says can become a grub command.
 */
import type { Catalog, Machine } from './profiles.js';
import { normaliseMac, normaliseUuid } from './profiles.js';
import { kernelArgs } from './kernel-args.js';
import { unsupportedArchLines } from './arch.js';
import { localBootLines, type LocalBootReason } from './ipxe.js';

/** Where the machine script is asked for (a TFTP file name; grub has no HTTP in Debian's signed build). */
export const GRUB_AUTO = 'grub/auto';
/** What Debian's signed grubnetx64 reads first ($prefix is /grub on the TFTP server). */
export const GRUB_BOOTSTRAP = 'grub/grub.cfg';

/** One grub word that is exactly `s`: single quotes, a quote as '\''. */
export function grubQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** grub's device for hvpxe's TFTP server: `(tftp,HOST)` or `(tftp,HOST:PORT)`. */
export function tftpDevice(serverUrl: string, port: number): string {
  const host = new URL(serverUrl).hostname;
  return `(tftp,${host}${port === 69 ? '' : `:${port}`})`;
}

const FAIL_TAIL = ['sleep 30', 'exit 1', ''];

/** The script every machine's grub reads first: who it is, then its own script from hvpxe. */
export function renderGrubBootstrap(tftp: string): string {
  const auto = `${tftp}/${GRUB_AUTO}?mac=\${net_default_mac}&uuid=\${hvpxe_uuid}&arch=\${grub_cpu}&platform=\${grub_platform}`;
  return [
    '# hvpxe: identify this machine (MAC of the boot NIC, SMBIOS UUID, CPU) and load its script from hvpxe.',
    'set hvpxe_uuid=',
    'smbios --type 1 --get-uuid 8 --set hvpxe_uuid',
    // Every script hvpxe answers ends in boot or exit, so what follows runs only when the fetch failed
    // (grub's source returns success even for a file it could not open).
    `source "${auto}"`,
    `echo ${grubQuote(`hvpxe: could not fetch this machine's boot script from ${tftp} (TFTP)`)}`,
    `echo ${grubQuote('hvpxe: check that hvpxe serve --tftp is running and reachable; trying the next boot device in 30 s')}`,
    'sleep 30',
    'exit 1',
    '',
  ].join('\n');
}

/** A machine's grub script: the signed kernel with its arguments, the initrd, boot; a failure says so and exits. */
export function renderGrubMachineScript(cat: Catalog, m: Machine, serverUrl: string, tftp: string, opts: { matchedBy?: string; credential?: string } = {}): string {
  const profile = cat.file.profiles[m.profile];
  const file = (name: string): string => grubQuote(`${tftp}/${cat.file.artifacts[name].path}`);
  return [
    `# hvpxe: machine ${m.name} (group ${m.group}, profile ${m.profile}${opts.matchedBy ? `, matched by ${opts.matchedBy}` : ''})`,
    `echo ${grubQuote(`hvpxe: installing ${m.name} with profile ${m.profile}`)}`,
    `linux ${file(profile.kernel)} ${kernelArgs(cat, m, serverUrl, { initrdArg: false, credential: opts.credential }).map(grubQuote).join(' ')}`,
    `initrd ${file(profile.initrd)}`,
    'boot',
    `echo ${grubQuote(`hvpxe: downloading or booting the installer for ${m.name} failed (under Secure Boot the kernel must be signed); trying the next boot device in 30 s`)}`,
    ...FAIL_TAIL,
  ].join('\n');
}

/** What an unknown machine's grub shows: who it is, what to do, then back to the firmware. */
export function renderGrubNoMatchScript(q: { mac?: string; uuid?: string }): string {
  const mac = normaliseMac(q.mac) ?? 'unknown';
  const uuid = normaliseUuid(q.uuid) ?? 'unknown';
  return [
    '# hvpxe: no group in profiles.yaml matches this machine',
    `echo ${grubQuote(`hvpxe: no profile matches this machine (MAC ${mac}, UUID ${uuid}).`)}`,
    `echo ${grubQuote('hvpxe: add it to a group in profiles.yaml (mac: or uuid:), or add a default group, then reload hvpxe (SIGHUP).')}`,
    `echo ${grubQuote('hvpxe: trying the next boot device in 30 s')}`,
    ...FAIL_TAIL,
  ].join('\n');
}

/** What a machine's grub shows when it runs on an architecture no profile serves. */
export function renderGrubUnsupportedArchScript(m: Machine, arch: string): string {
  return [`# hvpxe: machine ${m.name}: architecture ${arch} not served`, ...unsupportedArchLines(m, arch).map((l) => `echo ${grubQuote(l)}`), ...FAIL_TAIL].join('\n');
}

/** A finished (or held) machine's grub script: hand back to the firmware, which boots the next entry (its disk). */
export function renderGrubLocalBootScript(m: Machine, d: LocalBootReason): string {
  const { comment, say } = localBootLines(m, d);
  const lines = d.kind === 'local' ? [`hvpxe: ${m.name} is installed (${d.installedAt}); handing back to the firmware to boot the local disk`] : say;
  return [
    `# hvpxe: ${comment}`,
    ...lines.map((l) => `echo ${grubQuote(l)}`),
    ...(d.loop ? [`echo ${grubQuote(`hvpxe: ${m.name} ${d.loop}`)}`, 'sleep 10'] : []),
    'exit 0',
    '',
  ].join('\n');
}

/** What a machine's grub shows when hvpxe cannot keep track of another machine of the default group. */
export function renderGrubUntrackedScript(m: Machine): string {
  return [
    `# hvpxe: machine ${m.name}: not tracked`,
    `echo ${grubQuote(`hvpxe: ${m.name}: hvpxe already tracks as many machines as it can, and could not record this one's install.`)}`,
    `echo ${grubQuote('hvpxe: declare this machine in profiles.yaml (mac: or uuid:), then reload hvpxe; trying the next boot device in 30 s')}`,
    ...FAIL_TAIL,
  ].join('\n');
}
