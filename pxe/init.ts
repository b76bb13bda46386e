/** `hvpxe init DIR`: a working example layout for a three-node fleet. */
import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { HvError } from '../lib/errors.js';
import { writeFileAtomic } from '../lib/atomic-write.js';
import { EXAMPLE_HARVESTER_VERSION, harvesterArtifactNames } from '../lib/harvester-artifacts.js';

export function exampleProfiles(v = EXAMPLE_HARVESTER_VERSION): string {
  const zero = '0'.repeat(64);
  const names = harvesterArtifactNames(v);
  return `# hvpxe profiles (schema: schemas/pxe-profiles.schema.json, guide: docs/pxe.md).
# Start with:  hvpxe serve --root artifacts --profiles profiles.yaml --listen 0.0.0.0:8080
# and reload after edits with:  kill -HUP <pid>  (an invalid edit is refused; the old one keeps serving).

# The URL machines use to reach this server (the address of this host on the PXE network).
server_url: http://10.0.0.1:8080

# Files under --root, named as Harvester ${v} publishes them (and as \`make iso\` writes them).
# Replace each sha256 with the output of \`sha256sum artifacts/<file>\` (\`make iso\` writes them
# all to ${names.sha256}): hvpxe refuses to start while a checksum does not match.
artifacts:
  kernel: { path: ${names.kernel}, sha256: "${zero}" }
  initrd: { path: ${names.initrd}, sha256: "${zero}" }
  rootfs: { path: ${names.rootfs}, sha256: "${zero}" }
  iso: { path: ${names.iso}, sha256: "${zero}" }

profiles:
  harvester:
    kernel: kernel
    initrd: initrd
    rootfs: rootfs
    iso: iso            # sets install.iso_url to this server's copy
    # Added after Harvester's defaults (ip=dhcp net.ifnames=1 rd.cos.disable console=tty1);
    # an argument with the same key replaces the default (e.g. console=ttyS0,115200).
    kernel_args: [rd.net.dhcp.retry=3]
    # Post STARTED/SUCCEEDED/FAILED back to this server (see GET /machines).
    report_events: true
    # A Harvester config (scheme_version 1, snake_case as in Harvester's docs).
    # Strings may use \${hostname} \${mac} \${uuid} \${ip} \${vip} \${server_url} \${machine} and any \`values\`.
    config:
      scheme_version: 1
      token: change-me-cluster-token     # shared by every node of the cluster
      os:
        ssh_authorized_keys:
          - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyReplaceMe operator@example
        password: change-me
        ntp_servers: [0.suse.pool.ntp.org]
      install:
        device: /dev/disk/by-id/\${disk}   # by-id survives device renumbering
        management_interface:
          method: dhcp
          bond_options: { mode: active-backup, miimon: "100" }
        # mode, vip and server_url come from the fleet shorthand below

groups:
  # Fleet shorthand: the first machine creates the cluster on the VIP, the others join
  # https://<vip>:443. Machines are matched by MAC (or uuid: SMBIOS UUID, or hostname:).
  - name: rack1
    profile: harvester
    fleet: { vip: 10.0.0.100, vip_mode: static }
    values: { disk: nvme-EXAMPLE_DISK_SERIAL }
    machines:
      - { hostname: node-1, mac: "52:54:00:00:00:01", role: management }
      - { hostname: node-2, mac: "52:54:00:00:00:02", role: management }
      # A static management address instead of DHCP (needs gateway and dns):
      - { hostname: node-3, mac: "52:54:00:00:00:03", ip: 10.0.0.13/24, gateway: 10.0.0.1, dns: [10.0.0.1] }
`;
}

export function exampleReadme(): string {
  return `# hvpxe boot server: what remains to do

1. Put the Harvester artifacts in \`artifacts/\` (kernel, initrd, rootfs squashfs, ISO) and write their
   \`sha256sum\` into \`profiles.yaml\`.
2. Edit \`profiles.yaml\`: server_url, token, password, SSH key, the install disk, the VIP and each
   machine's MAC (\`ip link\`, the BMC, or the MAC iPXE prints) — \`hvpxe serve\` validates every
   config it would serve and refuses to start with the validator's messages.
3. Start the server:  \`hvpxe serve --root artifacts --profiles profiles.yaml --listen 0.0.0.0:8080\`
4. DHCP: either point your DHCP server's boot options at this server (iPXE user class → /boot.ipxe,
   otherwise undionly.kpxe for BIOS / ipxe.efi for UEFI over TFTP), or run dnsmasq next to it in
   proxy-DHCP mode:  \`hvpxe render-dnsmasq --profiles profiles.yaml > dnsmasq.conf\`, copy
   undionly.kpxe and ipxe.efi into \`tftp/\`, and \`dnsmasq -d -C dnsmasq.conf\`.
   **Your DHCP server must send a router (default gateway)**: the installer aborts without a
   default route (harvester#5675).
5. Power the machines on with network boot first. Follow them with \`hvpxe machines --profiles profiles.yaml\` (on the boot server: the admin listener is 127.0.0.1:8081).
`;
}

export async function initExample(dir: string): Promise<string[]> {
  const existing = await readdir(dir).catch(() => [] as string[]);
  if (existing.includes('profiles.yaml')) {
    throw new HvError(`${path.join(dir, 'profiles.yaml')} already exists; not overwriting it`, { hint: 'choose an empty directory' });
  }
  await mkdir(path.join(dir, 'artifacts'), { recursive: true });
  await mkdir(path.join(dir, 'tftp'), { recursive: true });
  // profiles.yaml holds the cluster token and password: 0600.
  await writeFileAtomic(path.join(dir, 'profiles.yaml'), exampleProfiles(), { mode: 0o600 });
  await writeFileAtomic(path.join(dir, 'README.md'), exampleReadme());
  return ['profiles.yaml', 'README.md', 'artifacts/', 'tftp/'].map((f) => path.join(dir, f));
}
