/**
 * dnsmasq configuration for network installs through hvpxe. Pure.
 *
 * Two modes:
 * - proxy-DHCP (default): the site's DHCP server keeps handing out addresses (and must send a
 *   router: harvester#5675); dnsmasq only adds the boot information for PXE clients. Legacy PXE
 *   ROMs get iPXE by TFTP (BIOS undionly.kpxe, UEFI ipxe.efi); iPXE itself (DHCP user class "iPXE")
 *   is pointed at hvpxe's /boot.ipxe over HTTP. dnsmasq's proxy-DHCP answers PXE clients only, so
 *   UEFI HTTP Boot clients need the site's DHCP server (the config says what to set there).
 * - DHCP server (`dhcp`): dnsmasq hands out the addresses and the router itself, and answers every
 *   kind of client by its architecture (RFC 4578 option 93): BIOS, x86-64 UEFI PXE (7 and 9) and
 *   UEFI HTTP Boot (16, vendor class "HTTPClient", which gets an http URL of an EFI binary hvpxe
 *   serves under /artifacts/ and must be answered with vendor class "HTTPClient" itself). With
 *   `noTftp` there is no TFTP server and PXE clients get no boot file: a network that boots by
 *   HTTP alone.
 *
 * Secure Boot: DHCP cannot see whether a machine enforces Secure Boot, so the machines whose
 * profile says `boot: grub-signed` are told apart by MAC (dnsmasq tags from profiles.yaml) and get
 * shim as their UEFI boot file, from hvpxe's TFTP server (`hvpxe serve --tftp`), instead of iPXE.
 * When the default group chooses grub-signed, every UEFI client gets shim but the MACs of iPXE
 * machines.
 */
import type { Catalog } from './profiles.js';
import { bootChainOf } from './profiles.js';
import { SHIM_BOOT_FILE } from './signed-chain.js';

/** Which UEFI PXE clients get shim: the listed MACs, or (`all`) everyone but the listed MACs. */
export interface SecureBootClients {
  all: boolean;
  macs: string[];
  /** The TFTP server shim, grub and the grub scripts come from (hvpxe serve --tftp), an IPv4 address. */
  tftpServer: string;
}
export interface DnsmasqOptions {
  serverUrl: string;
  /** Proxy-DHCP: the network address of the subnet to answer on, e.g. 10.0.0.0. */
  subnet?: string;
  netmask?: string;
  tftpRoot?: string;
  interface?: string;
  /** dnsmasq is the DHCP server: the address pool and the router it announces. */
  dhcp?: { start: string; end: string; router: string; leaseTime?: string };
  /** The EFI binary UEFI HTTP Boot clients load: a path under hvpxe's --root (default ipxe.efi). */
  httpBootFile?: string;
  /**
   * No TFTP server (DHCP-server mode only): a network that boots by HTTP alone. PXE clients get an
   * address and no boot file, so their firmware moves on to its next boot option.
   */
  noTftp?: boolean;
  /** Machines that boot the Secure Boot chain (profiles with boot: grub-signed). */
  secureBoot?: SecureBootClients;
}

/** dnsmasq tags: set by MAC for the machines that get shim (or, when all do, for those that do not). */
const SB_TAG = 'hvpxe-sb';
const NOT_SB_TAG = 'hvpxe-ipxe';

/**
 * The Secure Boot clients of a catalogue, or undefined when no profile chooses grub-signed. Throws
 * when a machine DHCP would have to tell apart has no MAC (a machine known by UUID or hostname only).
 */
export function secureBootClients(cat: Catalog, tftpServer: string): SecureBootClients | undefined {
  const chainOf = (profile: string): string => bootChainOf(cat.file.profiles[profile]);
  if (!Object.values(cat.file.profiles).some((p) => bootChainOf(p) === 'grub-signed')) return undefined;
  const all = cat.defaultGroup !== undefined && chainOf(cat.defaultGroup.profile) === 'grub-signed';
  const listed = cat.machines.filter((m) => (chainOf(m.profile) === 'grub-signed') !== all);
  const noMac = listed.filter((m) => !m.mac);
  if (noMac.length) {
    throw new Error(
      `DHCP tells Secure Boot machines apart by MAC, and ${noMac.map((m) => `${m.name} (group ${m.group})`).join(', ')} ${noMac.length === 1 ? 'has' : 'have'} none: give ${noMac.length === 1 ? 'it' : 'them'} a mac: in profiles.yaml`,
    );
  }
  return { all, macs: listed.map((m) => m.mac!), tftpServer };
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;
/** A path under the artifact root as hvpxe serves it: plain segments, no dot segments, nothing dnsmasq would split. */
const ARTIFACT_PATH = /^(?!.*(^|\/)\.)[A-Za-z0-9_+-][A-Za-z0-9_.+-]*(\/[A-Za-z0-9_+-][A-Za-z0-9_.+-]*)*$/;
const LEASE_TIME = /^(\d+[smhdw]?|infinite)$/;

/** RFC 4578 client system architectures (DHCP option 93) the rendered config answers. */
export const CLIENT_ARCH = { bios: 0, efiBc: 7, efiX64: 9, httpX64: 16 } as const;

/** The /24 network of the server URL's IPv4 host, when it has one (a starting point for --subnet). */
export function guessSubnet(serverUrl: string): string | undefined {
  const host = new URL(serverUrl).hostname;
  if (!IPV4.test(host)) return undefined;
  return host.split('.').slice(0, 3).concat('0').join('.');
}

/** The URL an HTTP Boot client is given: hvpxe's /artifacts/ path of the EFI binary. */
export function httpBootUrl(serverUrl: string, file = 'ipxe.efi'): string {
  if (!ARTIFACT_PATH.test(file)) throw new Error(`--http-boot-file must be a path under hvpxe's --root (letters, digits, . _ + -; no dot segments), got '${file}'`);
  return `${serverUrl.replace(/\/+$/, '')}/artifacts/${file}`;
}

export function renderDnsmasqConfig(o: DnsmasqOptions): string {
  if (!o.dhcp && !IPV4.test(o.subnet ?? '')) throw new Error(`--subnet must be an IPv4 network address, got '${o.subnet ?? ''}'`);
  if (o.netmask !== undefined && !IPV4.test(o.netmask)) throw new Error(`--netmask must be a dotted IPv4 mask, got '${o.netmask}'`);
  if (o.interface !== undefined && !/^[A-Za-z0-9_.:-]{1,15}$/.test(o.interface)) throw new Error(`--interface '${o.interface}' is not an interface name`);
  if (o.dhcp) {
    for (const [name, v] of [['--dhcp-range start', o.dhcp.start], ['--dhcp-range end', o.dhcp.end], ['--router', o.dhcp.router]] as const) {
      if (!IPV4.test(v)) throw new Error(`${name} must be an IPv4 address, got '${v}'`);
    }
    if (o.dhcp.leaseTime !== undefined && !LEASE_TIME.test(o.dhcp.leaseTime)) throw new Error(`--lease-time must be dnsmasq's form (e.g. 1h, 45m, 3600), got '${o.dhcp.leaseTime}'`);
  }
  if (o.noTftp && !o.dhcp) throw new Error('--no-tftp needs --dhcp-range: proxy-DHCP answers PXE clients only, and PXE loads its first binary by TFTP');
  if (o.noTftp && o.tftpRoot !== undefined) throw new Error('--no-tftp and --tftp-root contradict each other');
  const boot = `${o.serverUrl.replace(/\/+$/, '')}/boot.ipxe`;
  if (/[\s,"]/.test(boot)) throw new Error(`server URL must not contain spaces, commas or quotes: ${boot}`);
  const httpBoot = httpBootUrl(o.serverUrl, o.httpBootFile);
  const tftpRoot = o.tftpRoot ?? '/var/lib/tftpboot';
  if (o.secureBoot && !IPV4.test(o.secureBoot.tftpServer)) throw new Error(`the TFTP server for Secure Boot clients must be an IPv4 address (pass --tftp-server IP), got '${o.secureBoot.tftpServer}'`);
  const sb = o.secureBoot ? secureBootTags(o.secureBoot) : undefined;
  const head = [
    '# dnsmasq configuration rendered by `hvpxe render-dnsmasq`.',
    ...(o.dhcp
      ? ['# DHCP server: dnsmasq hands out the addresses and the router, and the boot information.']
      : ['# Proxy-DHCP: your existing DHCP server keeps assigning addresses; dnsmasq only adds PXE boot info.']),
    '# IMPORTANT: the DHCP answer must carry a router (option 3, "option routers"): the Harvester',
    '# installer aborts without a default route ("No default route found", harvester#5675).',
    '# Check it with:  dnsmasq --test -C <this file>',
    '',
    '# No DNS service, DHCP/TFTP only.',
    'port=0',
    'log-dhcp',
    ...(o.interface ? [`interface=${o.interface}`, 'bind-interfaces'] : []),
    o.dhcp
      ? `dhcp-range=${o.dhcp.start},${o.dhcp.end}${o.netmask ? `,${o.netmask}` : ''},${o.dhcp.leaseTime ?? '1h'}`
      : `dhcp-range=${o.subnet},proxy${o.netmask ? `,${o.netmask}` : ''}`,
    ...(o.dhcp ? [`dhcp-option=option:router,${o.dhcp.router}`] : []),
    '',
    ...(o.noTftp
      ? ['# No TFTP server (--no-tftp): this network boots over HTTP only.']
      : ['# TFTP for the iPXE binaries (copy undionly.kpxe and ipxe.efi from the ipxe package here).', 'enable-tftp', `tftp-root=${tftpRoot}`]),
    '',
    '# iPXE announces itself with the DHCP user class "iPXE": it gets the HTTP boot script.',
    'dhcp-userclass=set:ipxe,iPXE',
    '',
    ...(sb?.lines ?? []),
  ];
  return [...head, ...(o.dhcp ? dhcpServerBoot(boot, httpBoot, !o.noTftp, sb) : proxyBoot(boot, httpBoot, sb)), ''].join('\n');
}

interface SbTags {
  lines: string[];
  /** The tag condition of a Secure Boot client, and of the other UEFI clients. */
  sb: string;
  notSb: string;
  tftpServer: string;
}

function secureBootTags(c: SecureBootClients): SbTags {
  const tag = c.all ? NOT_SB_TAG : SB_TAG;
  return {
    lines: [
      `# Secure Boot (profiles with boot: grub-signed): ${c.all ? 'every UEFI client gets shim but these MACs (iPXE machines)' : 'these MACs get shim instead of iPXE'},`,
      `# from hvpxe's TFTP server ${c.tftpServer} (hvpxe serve --tftp), which also serves grub and its scripts.`,
      ...c.macs.map((mac) => `dhcp-mac=set:${tag},${mac}`),
      '',
    ],
    sb: c.all ? `tag:!${NOT_SB_TAG}` : `tag:${SB_TAG}`,
    notSb: c.all ? `tag:${NOT_SB_TAG}` : `tag:!${SB_TAG}`,
    tftpServer: c.tftpServer,
  };
}

function proxyBoot(boot: string, httpBoot: string, sb: SbTags | undefined): string[] {
  const efi = sb ? `tag:!ipxe,${sb.notSb}` : 'tag:!ipxe';
  return [
    '# Legacy PXE ROMs chain-load iPXE over TFTP: BIOS undionly.kpxe, UEFI ipxe.efi (architectures 7 and 9).',
    'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
    `pxe-service=${efi},X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi`,
    `pxe-service=${efi},BC_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi`,
    ...(sb
      ? [
          '# Secure Boot clients load shim from hvpxe. Debian\'s signed grub reads the DHCP server\'s answer, not this',
          `# proxy's: your DHCP server must send next-server (siaddr) ${sb.tftpServer} to these machines.`,
          `pxe-service=tag:!ipxe,${sb.sb},X86-64_EFI,"hvpxe: shim, signed grub (Secure Boot)",${SHIM_BOOT_FILE},${sb.tftpServer}`,
          `pxe-service=tag:!ipxe,${sb.sb},BC_EFI,"hvpxe: shim, signed grub (Secure Boot)",${SHIM_BOOT_FILE},${sb.tftpServer}`,
        ]
      : []),
    '',
    '# iPXE fetches the boot script from hvpxe over HTTP.',
    `pxe-service=tag:ipxe,x86PC,"hvpxe: boot script",${boot}`,
    `pxe-service=tag:ipxe,X86-64_EFI,"hvpxe: boot script",${boot}`,
    `pxe-service=tag:ipxe,BC_EFI,"hvpxe: boot script",${boot}`,
    '',
    '# UEFI HTTP Boot (client architecture 16, vendor class "HTTPClient") is not answered by',
    "# proxy-DHCP: set it on your DHCP server for clients whose vendor class starts with HTTPClient:",
    '#   option 60 (vendor class identifier) = "HTTPClient"',
    `#   boot file name (option 67 / "filename") = ${httpBoot}`,
    '# or render a DHCP server configuration instead (hvpxe render-dnsmasq --dhcp-range START,END --router IP).',
  ];
}

function dhcpServerBoot(boot: string, httpBoot: string, tftp: boolean, sb: SbTags | undefined): string[] {
  const efi = [`dhcp-match=set:efi64,option:client-arch,${CLIENT_ARCH.efiBc}`, `dhcp-match=set:efi64,option:client-arch,${CLIENT_ARCH.efiX64}`];
  // Secure Boot machines load shim from hvpxe's own TFTP server, so they are answered without dnsmasq's TFTP too.
  const pxe = tftp ? [`dhcp-match=set:bios,option:client-arch,${CLIENT_ARCH.bios}`, ...efi] : sb ? efi : [];
  return [
    tftp
      ? `# Client architectures (DHCP option 93): ${CLIENT_ARCH.bios} BIOS, ${CLIENT_ARCH.efiBc} and ${CLIENT_ARCH.efiX64} x86-64 UEFI PXE, ${CLIENT_ARCH.httpX64} x86-64 UEFI HTTP Boot.`
      : `# Client architecture (DHCP option 93) ${CLIENT_ARCH.httpX64}: x86-64 UEFI HTTP Boot. PXE clients get an address and no boot file${sb ? ' (but the Secure Boot machines: shim from hvpxe)' : ''}.`,
    ...pxe,
    `dhcp-match=set:httpboot,option:client-arch,${CLIENT_ARCH.httpX64}`,
    'dhcp-vendorclass=set:httpboot,HTTPClient',
    '',
    '# iPXE (whatever loaded it) fetches the boot script from hvpxe over HTTP.',
    `dhcp-boot=tag:ipxe,${boot}`,
    ...(tftp ? ['# PXE firmware chain-loads iPXE over TFTP.', 'dhcp-boot=tag:!ipxe,tag:bios,undionly.kpxe', `dhcp-boot=tag:!ipxe,tag:efi64,${sb ? `${sb.notSb},` : ''}ipxe.efi`] : []),
    ...(sb ? ['# Secure Boot clients load shim from hvpxe\'s TFTP server (next-server), and grub its scripts from there too.', `dhcp-boot=tag:!ipxe,tag:efi64,${sb.sb},${SHIM_BOOT_FILE},hvpxe,${sb.tftpServer}`] : []),
    '# HTTP Boot firmware loads iPXE over HTTP from hvpxe, and wants its vendor class echoed.',
    `dhcp-boot=tag:!ipxe,tag:httpboot,${httpBoot}`,
    'dhcp-option-force=tag:httpboot,option:vendor-class,HTTPClient',
  ];
}
