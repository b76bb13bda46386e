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
 */
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
  ];
  return [...head, ...(o.dhcp ? dhcpServerBoot(boot, httpBoot, !o.noTftp) : proxyBoot(boot, httpBoot)), ''].join('\n');
}

function proxyBoot(boot: string, httpBoot: string): string[] {
  return [
    '# Legacy PXE ROMs chain-load iPXE over TFTP: BIOS undionly.kpxe, UEFI ipxe.efi (architectures 7 and 9).',
    'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
    'pxe-service=tag:!ipxe,X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
    'pxe-service=tag:!ipxe,BC_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
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

function dhcpServerBoot(boot: string, httpBoot: string, tftp: boolean): string[] {
  const pxe = tftp
    ? [
        `dhcp-match=set:bios,option:client-arch,${CLIENT_ARCH.bios}`,
        `dhcp-match=set:efi64,option:client-arch,${CLIENT_ARCH.efiBc}`,
        `dhcp-match=set:efi64,option:client-arch,${CLIENT_ARCH.efiX64}`,
      ]
    : [];
  return [
    tftp
      ? `# Client architectures (DHCP option 93): ${CLIENT_ARCH.bios} BIOS, ${CLIENT_ARCH.efiBc} and ${CLIENT_ARCH.efiX64} x86-64 UEFI PXE, ${CLIENT_ARCH.httpX64} x86-64 UEFI HTTP Boot.`
      : `# Client architecture (DHCP option 93) ${CLIENT_ARCH.httpX64}: x86-64 UEFI HTTP Boot. PXE clients get an address and no boot file.`,
    ...pxe,
    `dhcp-match=set:httpboot,option:client-arch,${CLIENT_ARCH.httpX64}`,
    'dhcp-vendorclass=set:httpboot,HTTPClient',
    '',
    '# iPXE (whatever loaded it) fetches the boot script from hvpxe over HTTP.',
    `dhcp-boot=tag:ipxe,${boot}`,
    ...(tftp ? ['# PXE firmware chain-loads iPXE over TFTP.', 'dhcp-boot=tag:!ipxe,tag:bios,undionly.kpxe', 'dhcp-boot=tag:!ipxe,tag:efi64,ipxe.efi'] : []),
    '# HTTP Boot firmware loads iPXE over HTTP from hvpxe, and wants its vendor class echoed.',
    `dhcp-boot=tag:!ipxe,tag:httpboot,${httpBoot}`,
    'dhcp-option-force=tag:httpboot,option:vendor-class,HTTPClient',
  ];
}
