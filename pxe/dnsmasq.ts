/**
 * dnsmasq configuration for proxy-DHCP + TFTP: the site's DHCP server keeps handing out addresses
 * (and must send a router: harvester#5675), dnsmasq only adds the boot information. Legacy PXE ROMs
 * get iPXE by TFTP (BIOS undionly.kpxe, UEFI ipxe.efi); iPXE itself (DHCP user class "iPXE") is
 * pointed at hvpxe's /boot.ipxe over HTTP. Pure.
 */
export interface DnsmasqOptions {
  serverUrl: string;
  /** Network address of the subnet to answer on (proxy mode), e.g. 10.0.0.0. */
  subnet: string;
  netmask?: string;
  tftpRoot?: string;
  interface?: string;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

/** The /24 network of the server URL's IPv4 host, when it has one (a starting point for --subnet). */
export function guessSubnet(serverUrl: string): string | undefined {
  const host = new URL(serverUrl).hostname;
  if (!IPV4.test(host)) return undefined;
  return host.split('.').slice(0, 3).concat('0').join('.');
}

export function renderDnsmasqConfig(o: DnsmasqOptions): string {
  if (!IPV4.test(o.subnet)) throw new Error(`--subnet must be an IPv4 network address, got '${o.subnet}'`);
  if (o.netmask !== undefined && !IPV4.test(o.netmask)) throw new Error(`--netmask must be a dotted IPv4 mask, got '${o.netmask}'`);
  if (o.interface !== undefined && !/^[A-Za-z0-9_.:-]{1,15}$/.test(o.interface)) throw new Error(`--interface '${o.interface}' is not an interface name`);
  const boot = `${o.serverUrl.replace(/\/+$/, '')}/boot.ipxe`;
  if (/[\s,"]/.test(boot)) throw new Error(`server URL must not contain spaces, commas or quotes: ${boot}`);
  const tftpRoot = o.tftpRoot ?? '/var/lib/tftpboot';
  return [
    '# dnsmasq configuration rendered by `hvpxe render-dnsmasq`.',
    '# Proxy-DHCP: your existing DHCP server keeps assigning addresses; dnsmasq only adds PXE boot info.',
    '# IMPORTANT: the DHCP server must send a router (option 3, "option routers"): the Harvester',
    '# installer aborts without a default route ("No default route found", harvester#5675).',
    '# Check it with:  dnsmasq --test -C <this file>',
    '',
    '# No DNS service, DHCP/TFTP only.',
    'port=0',
    'log-dhcp',
    ...(o.interface ? [`interface=${o.interface}`, 'bind-interfaces'] : []),
    `dhcp-range=${o.subnet},proxy${o.netmask ? `,${o.netmask}` : ''}`,
    '',
    '# TFTP for the iPXE binaries (copy undionly.kpxe and ipxe.efi from the ipxe package here).',
    'enable-tftp',
    `tftp-root=${tftpRoot}`,
    '',
    '# iPXE announces itself with the DHCP user class "iPXE": it gets the HTTP boot script.',
    'dhcp-userclass=set:ipxe,iPXE',
    '',
    '# Legacy PXE ROMs chain-load iPXE over TFTP: BIOS undionly.kpxe, UEFI ipxe.efi.',
    'pxe-service=tag:!ipxe,x86PC,"hvpxe: chain-load iPXE (BIOS)",undionly.kpxe',
    'pxe-service=tag:!ipxe,X86-64_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
    'pxe-service=tag:!ipxe,BC_EFI,"hvpxe: chain-load iPXE (UEFI)",ipxe.efi',
    '',
    '# iPXE fetches the boot script from hvpxe over HTTP.',
    `pxe-service=tag:ipxe,x86PC,"hvpxe: boot script",${boot}`,
    `pxe-service=tag:ipxe,X86-64_EFI,"hvpxe: boot script",${boot}`,
    `pxe-service=tag:ipxe,BC_EFI,"hvpxe: boot script",${boot}`,
    '',
  ].join('\n');
}
