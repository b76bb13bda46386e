/**
 * iPXE scripts (harvester/docs install/pxe-boot-install.md, harvester/ipxe-examples). Pure: every value that reaches a script is either ours or
 * checked, so a client cannot inject iPXE commands through its query string.
 */
import type { Catalog, Machine } from './profiles.js';
import { normaliseMac, normaliseUuid } from './profiles.js';
import { artifactUrl } from './render-config.js';
import { kernelArgs } from './kernel-args.js';
import { unsupportedArchLines } from './arch.js';

export type Platform = 'efi' | 'pcbios';

/** What a machine boots instead of the installer: its disk after an install, or on hold (boot-decision.ts). */
export type LocalBootReason = { kind: 'local'; installedAt: string; loop?: string } | { kind: 'hold'; why: string; loop?: string };

/** Text safe in an iPXE `echo`: printable ASCII without `$` (iPXE expands ${…} in every command). */
export function ipxeText(s: string): string {
  return s.replace(/[^\x20-\x7e]|\$/g, '?');
}

/** The first script every machine runs: identify itself and chain to its own script. */
export function renderBootScript(serverUrl: string): string {
  return [
    '#!ipxe',
    '# hvpxe: identify this machine (MAC of the boot NIC, SMBIOS UUID, DHCP hostname) and chain to its script.',
    'isset ${netX/ip} || dhcp',
    `chain --autofree ${serverUrl}/ipxe/auto?mac=\${netX/mac}&uuid=\${uuid}&hostname=\${hostname:uristring}&buildarch=\${buildarch}&platform=\${platform} || goto failed`,
    ':failed',
    `echo hvpxe: could not fetch this machine's boot script from ${serverUrl}`,
    'echo hvpxe: check that hvpxe serve is running and reachable; trying the next boot device in 30 s',
    'sleep 30',
    'exit 1',
    '',
  ].join('\n');
}

/** A machine's boot script: kernel (with its arguments), initrd, boot; a failed download says so and exits. */
export function renderMachineScript(
  cat: Catalog,
  m: Machine,
  serverUrl: string,
  opts: { platform?: Platform; matchedBy?: string; credential?: string } = {},
): string {
  const profile = cat.file.profiles[m.profile];
  return [
    '#!ipxe',
    `# hvpxe: machine ${m.name} (group ${m.group}, profile ${m.profile}${opts.matchedBy ? `, matched by ${opts.matchedBy}` : ''})`,
    `echo hvpxe: installing ${m.name} with profile ${m.profile}`,
    `kernel ${artifactUrl(serverUrl, cat.file, profile.kernel)} ${kernelArgs(cat, m, serverUrl, { initrdArg: opts.platform !== 'pcbios', credential: opts.credential }).join(' ')} || goto failed`,
    `initrd ${artifactUrl(serverUrl, cat.file, profile.initrd)} || goto failed`,
    'boot || goto failed',
    ':failed',
    `echo hvpxe: downloading or booting the installer for ${m.name} failed; trying the next boot device in 30 s`,
    'sleep 30',
    'exit 1',
    '',
  ].join('\n');
}

/** What a machine's iPXE shows when it runs on an architecture no profile serves (e.g. an arm64 iPXE). */
export function renderUnsupportedArchScript(m: Machine, arch: string): string {
  return ['#!ipxe', `# hvpxe: machine ${m.name}: architecture ${arch} not served`, ...unsupportedArchLines(m, arch).map((l) => `echo ${l}`), 'sleep 30', 'exit 1', ''].join('\n');
}

/** What an unknown machine sees on its console: who it is, what to do, and then it moves on. */
export function renderNoMatchScript(q: { mac?: string; uuid?: string; hostname?: string }): string {
  const mac = normaliseMac(q.mac) ?? 'unknown';
  const uuid = normaliseUuid(q.uuid) ?? 'unknown';
  const host = q.hostname && /^[a-z0-9.-]{1,253}$/i.test(q.hostname) ? q.hostname : 'none';
  return [
    '#!ipxe',
    '# hvpxe: no group in profiles.yaml matches this machine',
    `echo hvpxe: no profile matches this machine (MAC ${mac}, UUID ${uuid}, DHCP hostname ${host}).`,
    'echo hvpxe: add it to a group in profiles.yaml (mac: or uuid:), or add a default group, then reload hvpxe (SIGHUP).',
    'echo hvpxe: trying the next boot device in 30 s',
    'sleep 30',
    'exit 1',
    '',
  ].join('\n');
}

/** The comment and the console lines that say why a machine boots its disk. */
export function localBootLines(m: Machine, d: LocalBootReason): { comment: string; say: string[] } {
  if (d.kind === 'local') {
    return {
      comment: `machine ${m.name} reported a finished install at ${d.installedAt}: boot its disk (\`hvpxe rearm ${m.name}\` installs it again)`,
      say: [`hvpxe: ${m.name} is installed (${d.installedAt}); booting from the local disk`],
    };
  }
  return {
    comment: `machine ${m.name} is held: boot its disk (\`hvpxe rearm ${m.name}\` installs it)`,
    say: [`hvpxe: ${m.name}: ${d.why}`, `hvpxe: so it boots its local disk, not the installer; \`hvpxe rearm ${m.name}\` on the boot server installs it`],
  };
}

/**
 * A finished (or held) machine's script: boot the local disk. BIOS: `sanboot --drive 0x80` boots
 * the first disk's boot sector; UEFI: `exit` hands back to the firmware, which takes the next
 * BootOrder entry. When the machine keeps coming back (an NVRAM without an entry for the disk sends
 * UEFI firmware round to the network again), UEFI tries iPXE's own `sanboot --drive 0x80` too,
 * which boots the disk's fallback path EFI/BOOT/BOOTX64.EFI on iPXE builds that support local
 * drives, and the console says what is wrong.
 */
export function renderLocalBootScript(m: Machine, d: LocalBootReason, opts: { platform?: Platform } = {}): string {
  const efi = opts.platform === 'efi';
  const sanboot = !efi || d.loop !== undefined;
  const { comment, say } = localBootLines(m, d);
  return [
    '#!ipxe',
    `# hvpxe: ${ipxeText(comment)}`,
    ...say.map((l) => `echo ${ipxeText(l)}`),
    ...(d.loop ? [`echo hvpxe: ${m.name} ${d.loop}`, 'sleep 10'] : []),
    ...(sanboot ? ['sanboot --no-describe --drive 0x80 || goto firmware'] : []),
    ':firmware',
    'echo hvpxe: handing back to the firmware for the next boot device',
    'exit 0',
    '',
  ].join('\n');
}

/** What a machine sees when hvpxe cannot keep track of another machine of the default group. */
export function renderUntrackedScript(m: Machine): string {
  return [
    '#!ipxe',
    `# hvpxe: machine ${m.name}: not tracked`,
    `echo hvpxe: ${m.name}: hvpxe already tracks as many machines as it can, and could not record this one's install.`,
    'echo hvpxe: declare this machine in profiles.yaml (mac: or uuid:), then reload hvpxe; trying the next boot device in 30 s',
    'sleep 30',
    'exit 1',
    '',
  ].join('\n');
}
